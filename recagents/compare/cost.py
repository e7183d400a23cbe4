"""What each method costs: calls, tokens, endpoint and wall seconds, and an estimated price.

:func:`cost_per_user` totals a method's recorded calls and prices them at a public per-token
rate; :func:`cost_scaling` measures the same at several (users, candidates) sizes, with
:func:`scaling_runner` building a fresh protocol per size and :func:`scaling_figure` plotting
how each cost grows.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from recagents.columns import USER
from recagents.compare.protocol import Protocol, Ranking, shared_protocol
from recagents.data.datasets import Dataset
from recagents.llm.cache import PRICES
from recagents.llm.runlog import cost_table

#: What :func:`cost_per_user` and :func:`cost_scaling` report per method.
COST_QUANTITIES = ("calls", "failed", "prompt_tokens", "completion_tokens", "endpoint_s", "wall_s")


def cost_per_user(
    calls_by_method: Mapping[str, pd.DataFrame],
    n_users: int | Mapping[str, int],
    price_model: str = "gpt-4o-mini",
    wall_s: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Calls, tokens, endpoint seconds and estimated USD per method, in total and per user.

    Totals come from :func:`recagents.llm.runlog.cost_table` (tokens and endpoint seconds as
    stored with each reply, so a warm rerun reports the cold run's spend); the price is
    those tokens at ``price_model``'s listed rate in :data:`recagents.llm.cache.PRICES`
    (an editable estimate). A method with no calls (a classic baseline) costs 0.

    Args:
        calls_by_method: Method -> its calls frame (:meth:`RunLog.calls_frame`).
        n_users: Users each method ranked (one number for all, or per method).
        price_model: Whose per-token price to apply.
        wall_s: Method -> wall seconds of its run (adds ``wall_s`` columns).

    Returns:
        One row per method: ``calls, failed, prompt_tokens, completion_tokens, endpoint_s,
        usd`` (totals) and the same with a ``_per_user`` suffix, plus ``wall_s`` when given,
        and ``n_users``.
    """
    if price_model not in PRICES:
        raise ValueError(f"no listed price for {price_model!r}; known: {sorted(PRICES)}")
    rows = []
    for method, calls in calls_by_method.items():
        users = n_users[method] if isinstance(n_users, Mapping) else n_users
        if users < 1:
            raise ValueError(f"{method}: n_users must be positive, got {users}")
        table = cost_table(calls, price_model)
        if table.empty:
            totals = {q: 0.0 for q in COST_QUANTITIES if q != "wall_s"} | {"usd": 0.0}
        else:
            total = table.loc["total"]
            totals = {
                q: float(total[q])
                for q in ("calls", "failed", "prompt_tokens", "completion_tokens")
            }
            totals["endpoint_s"] = float(calls["latency_s"].sum())
            price_in, price_out = PRICES[price_model]
            totals["usd"] = (
                totals["prompt_tokens"] * price_in + totals["completion_tokens"] * price_out
            ) / 1e6
        if wall_s is not None and method in wall_s:
            totals["wall_s"] = float(wall_s[method])
        row: dict[str, Any] = {"method": method, "n_users": users, **totals}
        row |= {f"{q}_per_user": v / users for q, v in totals.items()}
        rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs["price_model"] = price_model
    return out


def cost_scaling(
    measure: Callable[[int, int], Mapping[str, Ranking]],
    sizes: Sequence[tuple[int, int]],
    price_model: str = "gpt-4o-mini",
) -> pd.DataFrame:
    """Measured cost at several (users, candidates) sizes, as a tidy frame.

    ``measure(n_users, n_candidates)`` runs the methods at one size (e.g. builds
    :func:`shared_protocol` with ``n_negatives = n_candidates - 1`` and calls the adapters)
    and returns one :class:`Ranking` per method; :func:`cost_per_user` costs each size.

    Args:
        measure: Runs every method at one size.
        sizes: ``(n_users, n_candidates)`` pairs, e.g. 2-3 of them.
        price_model: Whose per-token price to apply.

    Returns:
        ``[method, n_users, n_candidates, quantity, total, per_user]``; quantities are
        :data:`COST_QUANTITIES` and ``usd``.
    """
    rows = []
    for n_users, n_candidates in sizes:
        runs = measure(n_users, n_candidates)
        table = cost_per_user(
            {name: run.calls for name, run in runs.items()},
            {name: run.status[USER].nunique() or n_users for name, run in runs.items()},
            price_model,
            wall_s={name: run.wall_seconds for name, run in runs.items()},
        )
        for record in table.to_dict("records"):
            for quantity in (*COST_QUANTITIES, "usd"):
                if quantity not in record:
                    continue
                rows.append(
                    {"method": record["method"], "n_users": n_users,
                     "n_candidates": n_candidates, "quantity": quantity,
                     "total": record[quantity], "per_user": record[f"{quantity}_per_user"]}
                )  # fmt: skip
    return pd.DataFrame(
        rows, columns=["method", "n_users", "n_candidates", "quantity", "total", "per_user"]
    )


def scaling_runner(
    dataset: Dataset,
    adapters: Mapping[str, Callable[[Protocol], Ranking | Mapping[str, Ranking]]],
    seed: int = 0,
    cache_dir: Path | None = None,
    within: Protocol | None = None,
) -> Callable[[int, int], dict[str, Ranking]]:
    """A ``measure`` for :func:`cost_scaling`: a protocol per size, then every adapter.

    With ``within`` (the run the costs are about), a size with its candidate count and at
    most its users measures the first ``n_users`` of its users on its saved candidates, so
    the calls are the run's own and replay from the cache; any other size draws a fresh
    :func:`shared_protocol`. Each method must rank a user the same way whoever else is
    ranked (true of the one-call-per-user rankers the cost figure measures).

    Args:
        dataset: The dataset.
        adapters: Name -> a function of a :class:`Protocol` returning one run (e.g.
            ``lambda p: run_baseline(p, "Pop")``) or several (e.g. ``run_paper``).
        seed: Seed of every fresh protocol.
        cache_dir: Where the candidate sets are saved.
        within: The protocol whose users and candidates sizes reuse where they can.

    Returns:
        ``measure(n_users, n_candidates)`` -> method name -> run.
    """

    def measure(n_users: int, n_candidates: int) -> dict[str, Ranking]:
        if (
            within is not None
            and n_candidates == within.n_negatives + 1
            and 1 <= n_users <= len(within.users)
        ):
            protocol = within.for_users(within.users[:n_users])
        else:
            protocol = shared_protocol(dataset, seed, n_users, n_candidates - 1, cache_dir)
        runs: dict[str, Ranking] = {}
        for name, adapter in adapters.items():
            result = adapter(protocol)
            runs.update({name: result} if isinstance(result, Ranking) else dict(result))
        return runs

    return measure


#: Readable panel titles and axis labels of the cost quantities.
QUANTITY_LABELS = {
    "calls": ("Model calls", "calls"),
    "failed": ("Failed calls", "calls"),
    "prompt_tokens": ("Prompt tokens", "tokens"),
    "completion_tokens": ("Completion tokens", "tokens"),
    "endpoint_s": ("Endpoint time", "seconds, as recorded"),
    "wall_s": ("Wall time of this run", "seconds (cache replays included)"),
    "usd": ("Estimated price", "USD"),
}


def scaling_figure(
    frame: pd.DataFrame,
    quantities: Sequence[str] = ("calls", "prompt_tokens", "endpoint_s", "usd"),
    value: Literal["total", "per_user"] = "total",
) -> Any:
    """How each cost grows with users (x axis) and candidates (line style), per method.

    Time is the endpoint time recorded with each reply (``endpoint_s``), which a warm
    rerun replays from the cache, not the wall time of the rerun (``wall_s``).

    Args:
        frame: :func:`cost_scaling` output.
        quantities: One panel each.
        value: Plot totals or per-user values.

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt
    import seaborn as sns

    from recagents.plotting import integer_axis, note_if_degenerate

    shown = [q for q in quantities if q in set(frame["quantity"])]
    if not shown:
        raise ValueError(f"none of {list(quantities)} in the frame")
    methods = list(dict.fromkeys(frame["method"]))
    colors = dict(zip(methods, sns.color_palette("colorblind", len(methods)), strict=True))
    sizes = sorted(frame["n_candidates"].unique())
    styles = dict(zip(sizes, ["-", "--", ":", "-."] * len(sizes), strict=False))
    markers = dict(zip(sizes, ["o", "s", "^", "D"] * len(sizes), strict=False))
    fig, axes = plt.subplots(1, len(shown), figsize=(4 * len(shown), 3.6), squeeze=False)
    for ax, quantity in zip(axes[0], shown, strict=True):
        part = frame[frame["quantity"] == quantity]
        drawn: dict[tuple, list[str]] = {}
        for (method, n_candidates), group in part.groupby(["method", "n_candidates"], sort=False):
            group = group.sort_values("n_users")
            label = f"{method}, {n_candidates} candidates"
            ax.plot(
                group["n_users"], group[value], marker=markers[n_candidates],
                color=colors[method], linestyle=styles[n_candidates], label=label,
            )  # fmt: skip
            key = (n_candidates, *zip(group["n_users"], group[value].round(9), strict=True))
            drawn.setdefault(key, []).append(method)
        title, unit = QUANTITY_LABELS.get(quantity, (quantity, quantity))
        per = " per user" if value == "per_user" else ""
        ax.set(xlabel="users", ylabel=f"{unit}{per}", title=title)
        ax.set_ylim(bottom=0)
        integer_axis(ax, "x")
        if note_if_degenerate(ax, part[value], "sizes") is None:
            same = list(dict.fromkeys(" = ".join(n) for n in drawn.values() if len(n) > 1))
            if same:  # lines drawn on top of each other: say so instead of hiding one
                text = textwrap.fill("lines coincide: " + "; ".join(same), 40)
                ax.text(0.97, 0.05, text, transform=ax.transAxes, ha="right", va="bottom",
                        fontsize=7, bbox={"facecolor": "white", "edgecolor": "0.7"})  # fmt: skip
    handles, labels = axes[0][-1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=min(4, len(labels)),
               bbox_to_anchor=(0.5, -0.02))  # fmt: skip
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig
