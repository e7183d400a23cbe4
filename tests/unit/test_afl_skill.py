"""AFL's skilled scripted agents: the positive and negative controls of the mechanism, no LLM.

Made-up samples of 20 candidates: the tool (its scores) ranks the target 1st for a quarter
of the users and 2nd-4th for the rest, and the target has a genre pair only it and few
others share. At skill 1 (a user that knows the target, a recommender that reads its
reasons) the loop must lift HR@1 from round limit 1 to 5 beyond the interval; at skill 0
(a coin-flipping user) it must not.
"""

from __future__ import annotations

import pandas as pd

from recagents.llm.client import ChatRequest
from recagents.llm.runlog import RunLog
from recagents.llm.scripted import PASS
from recagents.papers.afl.config import AFLConfig
from recagents.papers.afl.loop import feedback_loop
from recagents.papers.afl.prompts import recommend_schema
from recagents.papers.afl.samples import Sample
from recagents.papers.afl.skilled import (
    limit_curve,
    proposed_before,
    round_gain,
    skill_hits,
    skilled_client,
    skilled_recommender_policy,
    tool_ranking,
    wanted_genres,
)
from recagents.skill import summarise_units

N = 20
CONFIG = AFLConfig(n_candidates=N, max_rounds=5)


def _samples(n: int) -> list[Sample]:
    """Users whose target the tool ranks 1st (every 4th user) or 2nd-4th."""
    out = []
    for k in range(n):
        candidates = tuple(f"u{k}-c{j}" for j in range(N))
        rank = 0 if k % 4 == 0 else 1 + k % 3
        order = [candidates[(j + 7) % N] for j in range(N)]  # the tool's ranking, best first
        target = order[rank]
        scores = {c: float(N - r) for r, c in enumerate(order)}
        out.append(Sample(user=f"u{k}", history=(f"u{k}-h0", f"u{k}-h1"), candidates=candidates,
                          target=target, prior=order[0], focus=tuple(order[:5]),
                          scores=scores))  # fmt: skip
    return out


def _titles(samples):
    return {i: f"Title {i}" for s in samples for i in (*s.candidates, *s.history)}


def _genres(samples):
    genres = {}
    for s in samples:
        for h in s.history:
            genres[h] = ("Drama",)
        for j, c in enumerate(s.candidates):
            genres[c] = ("Drama", "War") if c == s.target or j % 9 == 0 else ("Drama",)
    return genres


def _gain(skill: float, n: int = 40) -> tuple[float, float, float, int]:
    samples = _samples(n)
    hits = skill_hits(samples, _titles(samples), _genres(samples), CONFIG, skill, seed=3)
    return summarise_units(round_gain(hits, CONFIG.max_rounds), seed=0)


def test_skill_one_lifts_hr1_with_the_round_limit_beyond_the_interval():
    mean, low, high, n = _gain(1.0)
    assert n == 40 and low > 0, (mean, low, high)
    assert mean == 0.75  # every target reached: 30 of 40 users gain a hit, none lose one


def test_skill_zero_does_not():
    mean, low, high, _ = _gain(0.0)
    assert not low > 0, (mean, low, high)
    assert mean < 0  # a coin-flipping user also rejects the tool's right picks


def test_never_re_proposes_and_uses_the_users_genres():
    samples = _samples(12)
    titles, genres = _titles(samples), _genres(samples)
    for skill in (0.0, 0.5, 1.0):
        client = skilled_client(samples, titles, genres, CONFIG, skill, seed=1)
        assert client.model == f"scripted:afl-skill-{skill:g}"
        rounds = feedback_loop(samples, titles, CONFIG, client, RunLog())
        assert not rounds.duplicated(["user_id", "item_id"]).any(), skill
        assert rounds["rec_ok"].all() and rounds["user_ok"].all()
    rejected = rounds[rounds["accepted"] == False]  # noqa: E712  (skill 1)
    assert rejected["user_reason"].str.contains("of these genres: Drama, War.").all()
    later = rounds[rounds["round"] > 1]
    assert len(later) and all(genres[i] == ("Drama", "War") for i in later["item_id"])
    accepted = rounds[rounds["accepted"] == True]  # noqa: E712
    assert (accepted["label"] == 1).all() and len(accepted) == len(samples)


def test_same_seed_same_dialogues_other_seed_other_coins():
    samples = _samples(16)
    args = (samples, _titles(samples), _genres(samples), CONFIG, 0.5)
    first = skill_hits(*args, seed=5)
    pd.testing.assert_frame_equal(first, skill_hits(*args, seed=5))
    assert not first.equals(skill_hits(*args, seed=6))


def test_limit_curve_and_round_gain():
    hits = pd.DataFrame({"user_id": ["a", "b", "a", "b"], "limit": [1, 1, 2, 2],
                         "hit": [0, 1, 1, 1]})  # fmt: skip
    assert round_gain(hits, 2).tolist() == [1.0, 0.0]
    curve = limit_curve(hits, n_boot=50)
    assert curve["limit"].tolist() == [1, 2] and curve["mean"].tolist() == [0.5, 1.0]


def test_parsers_read_the_papers_prompts():
    (sample,) = _samples(1)
    titles = _titles([sample])
    first, second = tool_ranking(sample)[:2]
    assert first == sample.prior
    prompt = "\n".join([
        "Candidates:\n1. x",
        f"Round 1: you recommended {titles[first]} because best; the user said: I want a movie "
        "of these genres: Drama, War. It is not it.",
        f"Round 2: you recommended {titles[second]} because next; the user said: no.",
    ])  # fmt: skip
    assert proposed_before(prompt, sample, titles) == {first, second}
    assert wanted_genres(prompt) == ("Drama", "War")
    assert wanted_genres("no genres here") == ()


def test_recommender_passes_other_requests_and_skips_proposed():
    (sample,) = _samples(1)
    titles = _titles([sample])
    policy = skilled_recommender_policy([sample], titles, {}, skill=0.0)
    first = tool_ranking(sample)[0]
    schema = recommend_schema(N, CONFIG)
    text = f"Round 1: you recommended {titles[first]} because best; the user said: no."
    reply = policy(ChatRequest(messages=[{"role": "user", "content": text}], schema=schema,
                               tag=sample.user))  # fmt: skip
    assert sample.candidates[reply["choice"] - 1] == tool_ranking(sample)[1]
    other = policy(ChatRequest(messages=[{"role": "user", "content": text}], schema=schema,
                               tag="someone else"))  # fmt: skip
    assert other is PASS
    assert "not yet proposed" in reply["reason"]
