"""Verdicts that know their power: constructed cases for "inconclusive (underpowered)".

A true effect measured on many units is reproduced; the same mean on a handful of units is
inconclusive; a no-difference claim resting on two methods that both did nothing is
inconclusive; a paper value outside a narrow interval is not reproduced. The estimates are
built from per-unit values with the library's own bootstrap, as the notebooks build them.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from recagents import metrics
from recagents.report import loading
from recagents.report.claims import (
    DIRECTION_ONLY,
    INCONCLUSIVE,
    NOT_COMPARABLE,
    NOT_REPRODUCED,
    REPRODUCED,
)
from recagents.report.evaluate import evaluate_claims
from recagents.report.values import Estimate, paper_value
from recagents.report.verdicts import (
    judge_above,
    judge_contains,
    judge_greater,
    judge_no_amplification,
    judge_sample_size,
)
from tests.unit.test_report import write_executed

CLAIMS = loading.load_claims()

PAPER = 0.45  # a paper's hit rate


def read_estimate(values: np.ndarray) -> Estimate:
    mean, low, high = metrics.bootstrap_ci(values, n_boot=500, seed=0)
    return Estimate(mean, low, high, n=len(values))


def _hits(rate: float, n: int, seed: int = 0) -> np.ndarray:
    """``n`` per-unit hits whose mean is ``rate`` (rounded to what ``n`` units can hold)."""
    hits = np.zeros(n)
    hits[: round(rate * n)] = 1.0
    return np.random.default_rng(seed).permutation(hits)


# --------------------------------------------------------------------------------------------
# The four constructed cases
# --------------------------------------------------------------------------------------------


def test_a_true_effect_at_large_n_is_reproduced():
    ours = read_estimate(_hits(PAPER, 2000))
    verdict = judge_contains(PAPER, ours, chance=0.05)
    assert verdict.verdict == REPRODUCED, verdict.reason
    assert verdict.detectable is not None and verdict.detectable < 0.03
    assert verdict.effect == pytest.approx(0.40)


def test_the_same_mean_at_tiny_n_is_inconclusive():
    ours = read_estimate(_hits(PAPER, 6))  # 3 hits of 6: mean 0.5, interval about [0.17, 0.83]
    assert ours.low <= PAPER <= ours.high  # the old rule called this "reproduced"
    verdict = judge_contains(PAPER, ours, effect=0.05)
    assert verdict.verdict == INCONCLUSIVE
    assert "wider than the claim's effect 0.05" in verdict.reason
    # the same verdict through min_n, even with a generous tolerance
    sized = judge_sample_size(judge_contains(PAPER, ours, effect=0.5), 6, 9)
    assert sized.verdict == INCONCLUSIVE and "n=6 is below the 9" in sized.reason


def test_a_null_claim_where_both_methods_did_nothing_is_inconclusive():
    loop, single = np.zeros(16), np.zeros(16)  # both methods score HR@1 = 0
    result = metrics.paired_bootstrap(loop, single, n_boot=200)
    verdict = judge_no_amplification(
        result.diff, False, (result.low, result.high), effect=5.0, idle=True
    )
    assert verdict.verdict == INCONCLUSIVE and "did nothing" in verdict.reason
    # the same difference without the idle flag: identical choices prove nothing either
    same = judge_no_amplification(0.0, False, (0.0, 0.0), effect=5.0)
    assert same.verdict == INCONCLUSIVE


def test_a_paper_value_outside_a_narrow_interval_is_not_reproduced():
    ours = read_estimate(_hits(0.10, 2000))
    verdict = judge_contains(PAPER, ours, effect=0.05)
    assert verdict.verdict == NOT_REPRODUCED and "above our interval" in verdict.reason


# --------------------------------------------------------------------------------------------
# greater / above / no_amplification on hand-made intervals
# --------------------------------------------------------------------------------------------


def test_greater_overlapping_wide_intervals_are_inconclusive_not_direction_only():
    a, b = Estimate(0.6, 0.3, 0.9), Estimate(0.5, 0.2, 0.8)
    assert judge_greater(a, b).verdict == DIRECTION_ONLY  # no effect stated
    wide = judge_greater(a, b, "AFL", "single", effect=0.05)
    assert wide.verdict == INCONCLUSIVE
    assert wide.detectable == pytest.approx(math.hypot(0.3, 0.3))
    # the same means, tight intervals: the sample resolves 0.05, direction only remains
    tight = judge_greater(Estimate(0.6, 0.58, 0.63), Estimate(0.59, 0.57, 0.61), effect=0.05)
    assert tight.verdict == DIRECTION_ONLY
    # equal means on wide intervals cannot say "not reproduced" either
    assert judge_greater(b, b, effect=0.05).verdict == INCONCLUSIVE
    assert judge_greater(Estimate(0.2, 0.1, 0.3), Estimate(0.8, 0.7, 0.9), effect=0.05).verdict \
        == NOT_REPRODUCED  # fmt: skip


def test_above_uses_the_same_rule_as_greater():
    assert judge_above(Estimate(0.2, -0.3, 0.7), 0.0, effect=0.1).verdict == INCONCLUSIVE
    assert judge_above(Estimate(0.2, 0.1, 0.3), 0.0, effect=0.1).verdict == REPRODUCED


def test_no_amplification_needs_an_interval_narrower_than_the_effect():
    assert judge_no_amplification(0.3, False, (-4.0, 4.6), effect=1.0).verdict == INCONCLUSIVE
    assert judge_no_amplification(0.3, False, (-0.2, 0.8), effect=1.0).verdict == REPRODUCED
    assert judge_no_amplification(0.3, False).verdict == INCONCLUSIVE  # power unknown
    assert judge_no_amplification(2.0, True, (1.0, 3.0), 1.0, idle=True).verdict \
        == NOT_REPRODUCED  # fmt: skip


def test_min_n_leaves_undecided_and_large_samples_alone():
    judged = judge_contains(PAPER, Estimate(0.45, 0.44, 0.46), effect=0.05)
    assert judge_sample_size(judged, 100, 9) is judged
    assert judge_sample_size(judged, None, 9) is judged  # n unknown: shown, not guessed
    not_comparable = judge_contains(None, Estimate(0.4))
    assert judge_sample_size(not_comparable, 2, 9) is not_comparable


# --------------------------------------------------------------------------------------------
# The packaged claims, end to end
# --------------------------------------------------------------------------------------------


def test_a4r_p_view_with_six_agents_is_no_longer_reproduced(tmp_path):
    """The case of issue #21: [0.458, 0.833] around the paper's 0.493 at n = 6."""
    records = {
        "model": "m", "n_agents": 6, "p_view/LightGCN": [0.6667, 0.4583, 0.8333],
        "p_view/LightGCN/n": 6,
    }  # fmt: skip
    write_executed(tmp_path / "02_agent4rec.ipynb", records)
    _, outcomes = evaluate_claims(tmp_path)
    p_view = next(o for o in outcomes if o.claim.id == "a4r-lightgcn-p-view")
    assert p_view.verdict == INCONCLUSIVE
    assert p_view.n == 6 and p_view.detectable == pytest.approx(0.1875)
    assert p_view.effect == pytest.approx(0.049)


def test_afl_no_amplification_with_both_hr1_zero_is_inconclusive(tmp_path):
    records = {
        "model": "m",
        "max_rounds": 5,
        "n_samples": 16,
        "HR@1/AFL": [0.0, 0.0, 0.0],
        "HR@1/AFL/n": 16,
        "HR@1/Rec Agent": [0.0, 0.0, 0.0],
        "bias/popularity percentile": {"diff": 3.56, "amplifies": False, "low": -1, "high": 2},
    }
    write_executed(tmp_path / "03_afl.ipynb", records)
    _, outcomes = evaluate_claims(tmp_path)
    bias = next(o for o in outcomes if o.claim.id == "afl-bias-popularity")
    assert bias.verdict == INCONCLUSIVE and "did nothing" in bias.reason
    assert "AFL HR@1 0.0000" in bias.ours and bias.n == 16


def test_every_contains_claim_states_the_scale_of_its_effect():
    for claim in CLAIMS:
        if claim.rule == "contains":
            assert claim.chance is not None or claim.effect is not None, claim.id
        if claim.effect is not None:
            assert claim.effect_basis, claim.id


@pytest.mark.parametrize("claim", [c for c in CLAIMS if c.min_n], ids=lambda c: c.id)
def test_min_n_is_the_rule_of_three_for_the_claim(claim):
    """min_n = all_equal_min_n(d): d the paper value's distance from the nearest bound of
    [0, 1] for ``contains``, the claimed difference for ``greater``."""
    value = paper_value(claim.paper)
    if claim.rule == "contains":
        distance = min(value.number, 1 - value.number)
    else:
        distance = claim.effect if claim.effect is not None else abs(value.difference)
    assert claim.min_n == metrics.all_equal_min_n(distance)


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (lambda c: c.update(effect=-1), ".effect", "less than or equal"),
        (lambda c: c.update(min_n=0), ".min_n", "less than the minimum"),
        (lambda c: c.update(effect=0.1), "", "effect_basis"),
        (lambda c: c.pop("chance"), "", "not valid under any"),
        (lambda c: c.update(activity=[]), ".activity", "should be non-empty"),
    ],
    ids=["negative-effect", "min-n", "no-basis", "contains-without-scale", "activity"],
)
def test_bad_power_fields_name_the_field(tmp_path, change, field, problem):
    data = json.loads(loading.resource("claims.json").read_text(encoding="utf-8"))
    index = next(i for i, c in enumerate(data["claims"]) if c["id"] == "agentcf-br-ndcg10")
    change(data["claims"][index])
    path = tmp_path / "claims.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(loading.ResourceError) as error:
        loading.load_claims(path)
    message = str(error.value)
    assert f"claims[{index}]{field}:" in message and problem in message, message


def test_a_paper_value_is_judged_only_on_the_same_dataset(tmp_path):
    """AgentCF's B+R value is on Amazon CDs-dense: a MovieLens run is not comparable."""
    values = [0.5405, 0.50, 0.58]
    for dataset, comparable in (("ml-100k", False), ("cds-dense", True)):
        records = {"model": "m", "dataset": dataset, "n_users": 100, "steps": 5,
                   "ndcg@10/dense/AgentCF B+R": values,
                   "ndcg@10/dense/Random": [0.2, 0.15, 0.25]}  # fmt: skip
        write_executed(tmp_path / "01_agentcf.ipynb", records)
        _, outcomes = evaluate_claims(tmp_path)
        outcome = next(o for o in outcomes if o.claim.id == "agentcf-br-ndcg10")
        if comparable:
            assert outcome.verdict == REPRODUCED
        else:
            assert outcome.verdict == NOT_COMPARABLE
            assert "on cds-dense; this run is on ml-100k" in outcome.reason
