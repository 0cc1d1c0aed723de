import pytest

from retrieval_lab import fusion
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import FusionMethod, FusionParams
from retrieval_lab.fusion import rrf, weighted

A = {"q1": {"x": 3.0, "y": 2.0, "z": 1.0}, "q2": {"x": 5.0}}
B = {"q1": {"y": 0.9, "v": 0.8, "w": 0.5}, "q3": {"w": 2.0, "v": 1.0}}


def test_rrf_by_hand():
    fused = rrf.fuse([A, B], k=60, depth=100)
    # q1 ranks: A x1 y2 z3, B y1 v2 w3
    assert fused["q1"] == pytest.approx({
        "x": 1 / 61,            # 0.0163934
        "y": 1 / 62 + 1 / 61,   # 0.0325225: top of B, second of A
        "z": 1 / 63,
        "v": 1 / 62,
        "w": 1 / 63,
    })
    assert fused["q2"] == pytest.approx({"x": 1 / 61}) and fused["q3"] == pytest.approx({"w": 1 / 61, "v": 1 / 62})


def test_rrf_reads_only_the_top_depth_in_trec_order():
    tied = {"q": {"a": 1.0, "b": 1.0, "c": 0.5}}
    # trec order breaks the tie by doc id descending: b rank 1, a rank 2; depth 2 drops c
    assert rrf.fuse([tied], k=10, depth=2)["q"] == pytest.approx({"b": 1 / 11, "a": 1 / 12})


def test_weighted_by_hand_missing_document_is_the_floor():
    fused = weighted.fuse([A, B], alpha=0.25, depth=100)
    # q1 min-max: A x 1, y (2-1)/2 = 0.5, z 0; B y 1, v (0.8-0.5)/0.4 = 0.75, w 0
    assert fused["q1"] == pytest.approx({
        "x": 0.25 * 1 + 0.75 * 0,     # 0.25: missing from B -> B's floor 0
        "y": 0.25 * 0.5 + 0.75 * 1,   # 0.875
        "z": 0.0,
        "v": 0.75 * 0.75,             # 0.5625
        "w": 0.0,
    })
    # a single document is its run's best (1); a query absent from a run gets 0 from it
    assert fused["q2"] == pytest.approx({"x": 0.25})
    assert fused["q3"] == pytest.approx({"w": 0.75, "v": 0.0})


def test_weighted_depth_cut_happens_before_min_max():
    # depth 2 keeps x (3) and y (2) of A: y becomes A's minimum -> 0, z is dropped (floor)
    fused = weighted.fuse([A, {}], alpha=1.0, depth=2)
    assert fused["q1"] == pytest.approx({"x": 1.0, "y": 0.0})


def test_weighted_near_the_float_limits_by_hand():
    # max - min = 1.7e308 - (-1.7e308) overflows to inf: plain min-max gave 0 for the middle document and
    # inf / inf = nan for the best. By hand: top 1, bottom 0, middle (0 + 1.7e308) / 3.4e308 = 0.5
    huge = {"q": {"top": 1.7e308, "mid": 0.0, "bottom": -1.7e308}}
    small = {"q": {"mid": 2.0, "top": 1.0}}  # min-max: mid 1, top 0
    fused = weighted.fuse([huge, small], alpha=0.5, depth=10)["q"]
    assert fused == {"top": 0.5 * 1 + 0.5 * 0, "mid": 0.5 * 0.5 + 0.5 * 1, "bottom": 0.0}  # exact: 0.5, 0.75, 0
    # a quarter of the span: (-0.85e308 + 1.7e308) / 3.4e308 = 0.25, exact in halves too
    quarter = weighted.fuse([{"q": {"a": 1.7e308, "b": -0.85e308, "c": -1.7e308}}, {}], 1.0, 10)["q"]
    assert quarter == {"a": 1.0, "b": 0.25, "c": 0.0}


def test_weighted_refuses_a_score_that_is_not_finite():
    with pytest.raises(InputError, match="not finite") as err:
        weighted.fuse([{"q": {"a": float("inf"), "b": 1.0}}, B], 0.5, 10)
    assert err.value.field == "--runs"


def test_weighted_needs_two_runs_and_alpha_in_range():
    with pytest.raises(InputError, match="exactly 2 runs"):
        weighted.fuse([A, B, A], 0.5, 10)
    with pytest.raises(InputError) as err:
        weighted.fuse([A, B], 1.5, 10)
    assert err.value.field == "fusion.methods.weighted.value"


def test_unknown_method_lists_choices():
    with pytest.raises(InputError, match="rrf, weighted"):
        fusion.get("combmnz")


QRELS = {"q1": {"x": 1}}


def test_tuning_picks_the_best_alpha_and_records_the_grid():
    # alpha 0.1: x 0.1, y 0.05 + 0.9 = 0.95, v 0.675 -> x at rank 3: nDCG@10 = 1 / log2(4) = 0.5
    # alpha 0.9: x 0.9, y 0.45 + 0.1 = 0.55 -> x first: nDCG@10 = 1
    params = FusionParams(tune=True, methods={"weighted": FusionMethod(0.5, [0.1, 0.9])})
    result = fusion.fuse([A, B], "weighted", params, QRELS)
    report = result.to_json()
    assert report["chosen"] == 0.9 and report["tuned"] is True and report["param"] == "alpha"
    assert report["grid"] == [{"value": 0.1, "score": pytest.approx(0.5)}, {"value": 0.9, "score": pytest.approx(1.0)}]
    assert result.tuning.chosen == 0.9 and [g.value for g in result.tuning.grid] == [0.1, 0.9]
    assert result.run == weighted.fuse([A, B], 0.9, params.depth)


def test_tuning_ties_go_to_the_first_grid_value():
    # alpha 0.8: x 0.8 > y 0.6 -> also nDCG@10 = 1
    result = fusion.fuse([A, B], "weighted", FusionParams(tune=True, methods={"weighted": FusionMethod(0.5, [0.9, 0.8])}),
                         QRELS)
    assert result.chosen == 0.9


def test_no_tuning_without_tune_or_qrels():
    params = FusionParams(tune=False, methods={"rrf": FusionMethod(20, [1.0])})
    result = fusion.fuse([A, B], "rrf", params, QRELS)
    report = result.to_json()
    assert report["tuned"] is False and report["chosen"] == 20 and "fusion.tune" in report["reason"]
    assert list(report) == ["method", "depth", "tuned", "reason", "param", "chosen"]  # fusion.json's order
    assert result.run == rrf.fuse([A, B], 20, params.depth)
    result = fusion.fuse([A, B], "rrf", FusionParams(tune=True), None)
    assert result.tuned is False and result.reason == "no qrels given"
    # a test-only collection's validation qrels judge nothing: the fixed value, said so (issue 51)
    result = fusion.fuse([A, B], "rrf", FusionParams(tune=True), {})
    assert (result.tuned, result.chosen, result.reason) == (False, 60, "the tuning qrels judge no query")


def test_a_value_given_in_code_is_used_fixed_and_checked():
    # rrf with k = 1: ranks 1 and 2 score 1/2 and 1/3 in each run
    result = fusion.fuse([A, B], "rrf", qrels=QRELS, value=1.0)
    assert (result.tuned, result.chosen, result.reason) == (False, 1.0, "a value was given")
    assert result.run == rrf.fuse([A, B], 1.0, FusionParams().depth)
    with pytest.raises(InputError, match="k must be > 0, got -1"):
        fusion.fuse([A, B], "rrf", value=-1.0)


def test_each_value_is_checked_by_its_method_before_fusing():
    # the registry's modules hold the rules: rrf's k > 0, weighted's alpha in [0, 1]
    bad_grid = FusionParams(methods={"weighted": FusionMethod(0.5, [0.5, 1.5])})
    with pytest.raises(InputError, match=r"alpha must lie in \[0, 1\], got 1.5") as err:
        fusion.fuse([A, B], "weighted", bad_grid, QRELS)
    assert err.value.field == "fusion.methods.weighted.grid[1]"
    with pytest.raises(InputError, match="k must be > 0, got 0") as err:
        fusion.fuse([A, B], "rrf", FusionParams(tune=False, methods={"rrf": FusionMethod(0.0, [1.0])}))
    assert err.value.field == "fusion.methods.rrf.value"


def test_a_registered_method_without_params_is_named():
    with pytest.raises(InputError, match=r"no params for fusion method 'rrf' \(given: weighted\)") as err:
        fusion.fuse([A, B], "rrf", FusionParams(methods={"weighted": FusionMethod(0.5, [0.5])}))
    assert err.value.field == "fusion.methods.rrf"
