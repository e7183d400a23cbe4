"""The scripted AFL user agent and the multi-seed paired comparison, with no LLM at all.

The recommendation agent is a fake (a ScriptedClient) that proposes candidate 1, 2, 3, ... in
turn, so the scripted user agent's rejections and the round count can be checked exactly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from recagents.llm.runlog import RunLog
from recagents.llm.scripted import ScriptedClient
from recagents.papers.afl.config import AFLConfig
from recagents.papers.afl.evaluate import hits_by_round
from recagents.papers.afl.loop import feedback_loop
from recagents.papers.afl.prompts import decision_schema
from recagents.papers.afl.samples import Sample
from recagents.papers.afl.scripted import (
    genre_reason,
    scripted_demo_text,
    scripted_user_client,
    scripted_user_policy,
)
from recagents.papers.afl.seeds import paired_over_seeds, paired_summary, seeds_text

N = 5
CONFIG = AFLConfig(n_candidates=N, max_rounds=5)


def _samples(n: int, target_at: int = 3) -> list[Sample]:
    out = []
    for k in range(n):
        candidates = tuple(f"u{k}-c{j}" for j in range(N))
        out.append(Sample(user=f"u{k}", history=(f"u{k}-h0", f"u{k}-h1", f"u{k}-h2"),
                              candidates=candidates, target=candidates[target_at],
                              prior=candidates[0], focus=candidates[:2],
                              scores={c: float(j) for j, c in enumerate(candidates)}))  # fmt: skip
    return out


def _titles(samples):
    return {i: f"Title {i}" for s in samples for i in (*s.candidates, *s.history)}


def _genres(samples):
    genres = {}
    for s in samples:
        for h in s.history:
            genres[h] = ("Drama", "Comedy") if h.endswith("h0") else ("Drama",)
        for j, c in enumerate(s.candidates):
            genres[c] = ("Horror",) if j % 2 else ("Drama", "War")
    return genres


def _in_turn(request):
    """Fake recommender: round r proposes candidate r (1-based), counted from the memory."""
    if "choice" not in request.schema["properties"]:
        raise AssertionError("the fake recommender got a user-agent request")
    text = request.messages[-1]["content"]
    rounds_done = sum(line.startswith("Round ") for line in text.splitlines())
    return {"reason": "in turn", "choice": rounds_done + 1}


def _client(samples, accept="target"):
    fake_rec = ScriptedClient(_in_turn, "fake-rec")
    return scripted_user_client(samples, _titles(samples), _genres(samples), CONFIG,
                                    fallback=fake_rec, accept=accept)  # fmt: skip


def test_dialogues_reach_the_target_round_and_rejections_name_genres():
    samples = _samples(3, target_at=3)
    client = _client(samples)
    assert client.model == "scripted:afl-user-target+scripted:fake-rec"
    rounds = feedback_loop(samples, _titles(samples), CONFIG, client, RunLog())
    assert rounds.groupby("user_id")["round"].max().tolist() == [4, 4, 4]
    last = rounds.groupby("user_id").tail(1)
    assert (last["stop"] == "accepted").all() and (last["label"] == 1).all()
    rejected = rounds[rounds["accepted"] == False]  # noqa: E712
    assert len(rejected) == 9
    assert rejected["user_reason"].str.contains("Drama").all()
    assert rejected["user_reason"].str.contains("Horror|War").all()
    hits = hits_by_round(rounds, 5)
    assert hits.groupby("limit")["hit"].mean().tolist() == [0, 0, 0, 1, 1]


def test_top_genre_acceptance_ends_dialogues_sooner():
    samples = _samples(2, target_at=3)
    rounds = feedback_loop(samples, _titles(samples), CONFIG, _client(samples, "top_genre"),
                               RunLog())  # fmt: skip
    assert rounds["round"].max() == 1, "candidate 1 is a Drama, the history's top genre"


def test_requests_it_cannot_place_go_to_the_fallback():
    samples = _samples(1)
    policy = scripted_user_policy(samples, _titles(samples), _genres(samples), CONFIG)
    from recagents.llm.client import ChatRequest
    from recagents.llm.scripted import PASS

    schema = decision_schema(CONFIG)
    unknown = ChatRequest(messages=[{"role": "user", "content": "x"}], schema=schema, tag="u0")
    stranger = ChatRequest(messages=[{"role": "user", "content": "x"}], schema=schema, tag="zz")
    assert policy(unknown) is PASS and policy(stranger) is PASS


def test_a_true_gain_is_detected_at_large_n_not_at_tiny_n():
    rng = np.random.default_rng(0)

    def frame(n_per_seed):
        rows = []
        for seed in (1, 2, 3):
            single = rng.random(n_per_seed) < 0.3
            afl_hits = single | (rng.random(n_per_seed) < 0.15)  # a true gain of about +0.1
            rows.append(pd.DataFrame({"seed": seed, "user_id": range(n_per_seed),
                                      "single": single.astype(float),
                                      "afl": afl_hits.astype(float)}))  # fmt: skip
        return pd.concat(rows, ignore_index=True)

    per_seed, big = paired_summary(frame(400), n_boot=500)
    assert big["n"] == 1200 and big["n_seeds"] == 3 and len(per_seed) == 3
    assert big["low"] > 0 and big["mde"] < big["diff"]
    _, tiny = paired_summary(frame(2), n_boot=500)
    assert tiny["low"] <= 0 <= tiny["high"] or tiny["mde"] > 0.1
    assert "No gain survives" in seeds_text(tiny, "m") or tiny["mde"] > 0.1
    assert "A gain survives" in seeds_text(big, "m", paper_diff=0.057, paper_source="p")
    assert "paper has no value" in seeds_text(big, "m")


def test_paired_over_seeds_pairs_the_single_agent_with_the_loop():
    by_seed = {1: _samples(3, target_at=1), 2: _samples(2, target_at=1)}
    everyone = [s for ss in by_seed.values() for s in ss][:3]  # users repeat across seeds
    result = paired_over_seeds(by_seed, _titles(everyone), CONFIG, _client(by_seed[1]),
                                   RunLog(), n_boot=200)  # fmt: skip
    # Seed 1: target is candidate 2 -> found in round 2 (AFL hit, single miss).
    assert result.per_seed.set_index("seed")["diff"].to_dict() == {1: 1.0, 2: 1.0}
    assert result.summary["n"] == 5 and result.summary["n_seeds"] == 2


def test_genre_reason_is_deterministic_and_says_when_no_genre_is_known():
    samples = _samples(1)
    titles, genres = _titles(samples), _genres(samples)
    s = samples[0]
    first = genre_reason(s.candidates[1], s.history, titles, genres)
    assert first == genre_reason(s.candidates[1], s.history, titles, genres)
    assert "none of my usual genres" in first and "Drama (3 of 3)" in first
    assert "No genres are known" in genre_reason("unknown", s.history, titles, genres)


def test_the_demo_text_reports_repeats_and_a_flat_curve_from_the_values():
    samples = _samples(2, target_at=4)
    stuck = ScriptedClient(lambda r: {"reason": "same again", "choice": 1}, "stuck-rec")
    client = scripted_user_client(samples, _titles(samples), _genres(samples), CONFIG, stuck)
    rounds = feedback_loop(samples, _titles(samples), CONFIG, client, RunLog(), max_rounds=3)
    text = scripted_demo_text(rounds, hits_by_round(rounds, 3), client.model)
    assert text.startswith("**Scripted demonstration, not an LLM result**")
    assert "reached round 3" in text and "4 repeat an item" in text
    assert "HR@1 stays 0 at every limit" in text
