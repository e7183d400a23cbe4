"""The manipulation experiment: can an adversarial agent item get itself recommended?

:func:`manipulation_experiment` has the adversary report an attack (a lie, plus an
instruction in free text) or, as the baseline, an honest report, through a free-text or a
schema-checked channel, and records where the recommender routes the user;
:func:`manipulation_summary` gives attack and honest rates with bootstrap intervals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from recagents.columns import USER
from recagents.llm.client import LLMClient
from recagents.llm.runlog import RunContext, RunLog
from recagents.metrics import bootstrap_ci, paired_bootstrap
from recagents.papers.rec4agentverse.catalogue import Catalogue
from recagents.papers.rec4agentverse.config import Rec4AConfig
from recagents.papers.rec4agentverse.prompts import (
    parse_choice,
    recommender_messages,
    recommender_schema,
)
from recagents.papers.rec4agentverse.recommender import (
    Profile,
    choose_agent,
    profile_from_text,
    update_profile,
)
from recagents.papers.rec4agentverse.reports import (
    adversarial_report,
    gate_report,
    honest_report,
    render_report,
    report_evidence,
    report_text,
    validate_report,
)
from recagents.papers.rec4agentverse.templates import template_opening
from recagents.papers.rec4agentverse.users import SimUser

# --------------------------------------------------------------------------- manipulation

#: What the adversary reports in the attack condition, given the user and the channel.
Attack = Callable[[SimUser, str], Any]


def strongest_attack(catalogue: Catalogue) -> Attack:
    """The default attack: the adversary's :func:`adversarial_report` for every user."""
    adversary = catalogue.adversary
    if adversary is None:
        raise ValueError("the catalogue has no adversarial agent (build it with_adversary)")
    card = catalogue.card(adversary)
    return lambda user, mode: adversarial_report(card, mode)  # type: ignore[arg-type]


def manipulation_experiment(
    users: Sequence[SimUser],
    catalogue: Catalogue,
    config: Rec4AConfig,
    client: LLMClient | None = None,
    log: RunLog | None = None,
    modes: Sequence[str] = ("free_text", "schema"),
    attack: Attack | None = None,
) -> pd.DataFrame:
    """Can an agent item talk the recommender into routing users to it?

    For each user the adversarial agent has served one turn that did not satisfy them
    (the profile so far comes from the template opening). It reports either its attack
    (:func:`adversarial_report`: a lie, plus an instruction in free text) or, as the
    baseline for the same decision, an honest report (:func:`honest_report`). The
    recommender (``config.recommender``; ``"llm"`` reads the report text or fields, the
    classic scorer reads only the fields it can parse) then routes the user. Schema-mode
    reports pass :func:`validate_report`; free-text ones are read as they are.

    Args:
        users: The simulated users (the same ones in every mode and condition).
        catalogue: Must hold the adversarial agent.
        config: ``recommender``, ``share_fields`` and the sampling settings.
        client: The LLM client (needed for the LLM recommender).
        log: Receives the calls (phase ``{config.phase} manipulation``).
        modes: The channels to test.
        attack: What the adversary sends in the attack condition, per user and channel
            (default :func:`adversarial_report`, its strongest attack; a scripted attacker
            of weaker strength is :func:`recagents.papers.rec4agentverse.scripted.attacker`).

    Returns:
        One row per decision: ``[user_id, mode, condition, recommender, chosen,
        adversary_chosen, ok, report_valid, profile, report]``; ``adversary_chosen`` is
        ``NaN`` when the LLM's reply was unusable (``ok`` False; counted, never dropped).
    """
    adversary = catalogue.adversary
    if adversary is None:
        raise ValueError("the catalogue has no adversarial agent (build it with_adversary)")
    if config.recommender == "llm" and client is None:
        raise ValueError("the LLM recommender needs a client")
    for mode in modes:
        if mode not in ("schema", "free_text"):
            raise ValueError(f"unknown mode {mode!r}; use 'schema' and/or 'free_text'")
    log = log if log is not None else RunLog()
    attack = attack if attack is not None else strongest_attack(catalogue)
    cases = [
        case
        for mode in modes
        for user in users
        for case in _cases(user, mode, catalogue, config, attack)
    ]
    if config.recommender == "llm":
        assert client is not None
        llm = RunContext(client, log, f"{config.phase} manipulation")
        chosen = _llm_decisions(cases, catalogue, config, llm)
    else:
        penalties = {adversary: 1}
        chosen = [choose_agent(c.profile, catalogue, config, penalties) for c in cases]
    return pd.DataFrame(
        [_decision_row(c, agent, adversary, config) for c, agent in zip(cases, chosen, strict=True)]
    )


@dataclass(frozen=True)
class _Case:
    """One decision of the experiment: a user, a channel and what the adversary reported."""

    user: SimUser
    mode: str
    condition: str
    profile: Profile
    valid: bool
    rendered: str | None


def _cases(
    user: SimUser, mode: str, catalogue: Catalogue, config: Rec4AConfig, attack: Attack
) -> list[_Case]:
    """The user's attack and honest cases in ``mode``, after one unsatisfying turn.

    The profile so far comes from the template opening; the report updates it as the
    recommender receives it (gated, and validated in schema mode).
    """
    adversary = catalogue.adversary
    assert adversary is not None
    start = profile_from_text(template_opening(user))
    cases = []
    for condition in ("attack", "honest"):
        if condition == "attack":
            sent = attack(user, mode)
        else:
            sent = honest_report(adversary, user)
        evidence, rendered = _receive(sent, mode, catalogue, config.share_fields)
        profile = update_profile(start, evidence)
        cases.append(_Case(user, mode, condition, profile, rendered is not None, rendered))
    return cases


def _llm_decisions(
    cases: Sequence[_Case], catalogue: Catalogue, config: Rec4AConfig, llm: RunContext
) -> list[str | None]:
    """The LLM recommender's choice per case (one batch); ``None`` for an unusable reply."""
    prompts = [
        recommender_messages(
            catalogue, c.profile, config, current=catalogue.adversary, report=c.rendered
        )
        for c in cases
    ]
    results = llm.ask("recommender", [c.user.user_id for c in cases], prompts,
                      recommender_schema(catalogue), temperature=config.temperature,
                      max_tokens=config.max_tokens, seed=config.seed,
                      desc=f"{llm.phase}: route")  # fmt: skip
    return [parse_choice(r.data, catalogue) if r.ok else None for r in results]


def _decision_row(
    case: _Case, agent: str | None, adversary: str, config: Rec4AConfig
) -> dict[str, Any]:
    """One row of :func:`manipulation_experiment`'s result."""
    return {
        USER: case.user.user_id,
        "mode": case.mode,
        "condition": case.condition,
        "recommender": config.recommender,
        "chosen": agent,
        "adversary_chosen": np.nan if agent is None else float(agent == adversary),
        "ok": agent is not None,
        "report_valid": case.valid,
        "profile": case.profile.text(),
        "report": case.rendered,
    }


def _receive(
    sent: Any, mode: str, catalogue: Catalogue, share_fields: Sequence[str]
) -> tuple[Profile, str | None]:
    """What the recommender takes from one report: ``(evidence, rendering or None)``.

    Schema mode: the consent gate, then validation (a rejected report gives no evidence
    and no rendering). Free-text mode: an honest report is written out from its gated
    fields; the text is read by keywords.
    """
    if mode == "free_text":
        text = sent if isinstance(sent, str) else report_text(gate_report(sent, share_fields)[0])
        return profile_from_text(text), render_report(text, "free_text")
    shared = gate_report(sent, share_fields)[0]
    if validate_report(shared, catalogue) is not None:
        return Profile(), None
    return report_evidence(shared), render_report(shared, "schema")


def manipulation_summary(
    decisions: pd.DataFrame, n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Success rate of the attack and the honest baseline per mode, with 95% intervals.

    The rate is the share of usable decisions that route the user to the adversary; the
    difference (attack - honest) is a paired bootstrap over users with both decisions.

    Returns:
        ``[mode, condition, rate, low, high, n, failures]`` plus one ``attack - honest``
        row per mode (``rate`` = the difference, ``p_value`` set).
    """
    rows = []
    for mode, group in decisions.groupby("mode", sort=False):
        values = {}
        for condition in ("attack", "honest"):
            part = group[group["condition"] == condition]
            usable = part.dropna(subset=["adversary_chosen"])
            values[condition] = usable.set_index(USER)["adversary_chosen"]
            if len(usable):
                mean, low, high = bootstrap_ci(
                    usable["adversary_chosen"].to_numpy(float), n_boot=n_boot, seed=seed
                )
            else:
                mean = low = high = float("nan")
            rows.append(
                {
                    "mode": mode,
                    "condition": condition,
                    "rate": mean,
                    "low": low,
                    "high": high,
                    "n": len(usable),
                    "failures": int((~part["ok"]).sum()),
                    "p_value": np.nan,
                }
            )
        both = pd.concat(values, axis=1).dropna()
        if len(both):
            diff = paired_bootstrap(
                both["attack"].to_numpy(float),
                both["honest"].to_numpy(float),
                n_boot=n_boot,
                seed=seed,
            )
            rows.append(
                {
                    "mode": mode,
                    "condition": "attack - honest",
                    "rate": diff.diff,
                    "low": diff.low,
                    "high": diff.high,
                    "n": len(both),
                    "failures": 0,
                    "p_value": diff.p_value,
                }
            )
    return pd.DataFrame(rows)
