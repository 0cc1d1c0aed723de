import itertools
import math

import numpy as np
import pytest

from retrieval_lab import stats


def exact_p_by_enumeration(d, delta=0.0):
    """Independent reference: the sign-flip test of d - delta over every sign assignment, plain Python."""
    x = [v - delta for v in d]
    observed = abs(sum(x))
    hits = sum(abs(sum(s * v for s, v in zip(signs, x))) >= observed - 1e-12
               for signs in itertools.product([-1, 1], repeat=len(x)))
    return hits / 2 ** len(x)


def test_comparison_is_reproducible_for_a_fixed_seed():
    rng = np.random.default_rng(0)
    a, b = rng.random(50), rng.random(50)
    first = stats.paired_comparison(a, b, permutations=500, seed=3)
    assert stats.paired_comparison(a, b, permutations=500, seed=3) == first
    assert stats.paired_comparison(a, b, permutations=500, seed=4) != first


def test_p_by_hand():
    # d = (1, 1, 1, 1): only all-plus and all-minus reach |sum| = 4 -> exact p = 2 / 16; sampled
    # p = (1 + hits) / (1 + P) with hits ~ Binomial(P, 1/8)
    c = stats.paired_comparison([0] * 4, [1] * 4, permutations=20000, seed=1)
    assert abs(c.p_value - 0.125) < 4 * math.sqrt(0.125 * 0.875 / 20000)
    # d = (1, -1): every assignment has |sum| >= 0 -> p = 1
    assert stats.paired_comparison([0, 1], [1, 0], permutations=100).p_value == 1.0


def test_p_matches_exact_enumeration():
    d = [0.3, 0.1, -0.05, 0.2, 0.25, 0.0, 0.15, -0.1, 0.4, 0.05]
    reference = exact_p_by_enumeration(d)
    assert 0.005 < reference < 0.2  # a case where the p-value is informative
    c = stats.paired_comparison(np.zeros(10), d, family_size=3, permutations=40000, seed=2)
    assert abs(c.p_value - reference) < 4 * math.sqrt(reference * (1 - reference) / 40000)
    assert c.p_adjusted == pytest.approx(min(1.0, 3 * c.p_value))


def test_interval_is_the_set_of_shifts_the_test_does_not_reject():
    # Independent of the bracket arithmetic: the exact test of d - delta (every sign assignment)
    # rejects just outside the interval ends and not just inside them.
    rng = np.random.default_rng(3)
    d = rng.normal(0.1, 0.2, 12)
    level, family = 0.95, 2  # 97.5% each
    c = stats.paired_comparison(np.zeros(12), d, family, level, permutations=40000, seed=5)
    alpha = (1 - level) / family
    assert c.low < d.mean() < c.high
    for end, inward in ((c.low, 1), (c.high, -1)):
        # with 2^12 = 4096 assignments the sampled test's ends match the exact test's within its steps;
        # 0.01 from the end the exact p is clearly on either side of alpha
        assert exact_p_by_enumeration(d, end + inward * 0.01) > alpha
        assert exact_p_by_enumeration(d, end - inward * 0.01) <= alpha


def test_constant_difference_gives_a_point_interval():
    # twelve queries all +0.2: every split of them has both subset means 0.2, except the 2 / 4096
    # one-sided assignments, which bracket everything
    c = stats.paired_comparison(np.zeros(12), np.full(12, 0.2), permutations=2000, seed=0)
    assert (c.low, c.high) == pytest.approx((0.2, 0.2))
    assert c.excludes_zero and c.p_value < 0.01
    assert c.mde == pytest.approx(0.0, abs=1e-12)  # no spread: any true difference would show
    # three such queries: the smallest two-sided p is 2 / 2^3 = 0.25 > 0.05, so nothing can show, however
    # constant the difference; the MDE says so instead of the normal approximation's 0
    c = stats.paired_comparison(np.zeros(3), np.full(3, 0.2), permutations=2000, seed=0)
    assert (c.low, c.high, c.mde) == (-math.inf, math.inf, math.inf)


def test_identical_runs_never_differ():
    same = np.linspace(0.1, 0.9, 12)
    c = stats.paired_comparison(same, same, family_size=2, permutations=2000)
    assert (c.low, c.high, c.mean_difference) == (0.0, 0.0, 0.0)
    assert c.p_value == 1.0 and c.p_adjusted == 1.0 and not c.excludes_zero


def test_too_few_queries_can_never_differ():
    # six queries: the smallest exact p is 2 / 64 = 0.031 > 0.05 / 2, so at 97.5% nothing is rejected
    c = stats.paired_comparison(np.zeros(6), np.ones(6), family_size=2, permutations=10000, seed=0)
    assert (c.low, c.high) == (-np.inf, np.inf) and not c.excludes_zero and c.p_adjusted > 0.05


def test_minimum_detectable_effect_by_hand():
    # d = (0.1, 0.3): sd (n - 1) = 0.141421; (z_0.975 + z_0.8) = 1.959964 + 0.841621 = 2.801585;
    # MDE = 2.801585 * 0.141421 / sqrt(2) = 0.2801585
    assert stats.minimum_detectable_effect([0.1, 0.3], level=0.95) == pytest.approx(0.2801585, rel=1e-6)
    # level 0.99: z_0.995 = 2.575829 -> (2.575829 + 0.841621) * 0.1 = 0.341745
    assert stats.minimum_detectable_effect([0.1, 0.3], level=0.99) == pytest.approx(0.341745, rel=1e-6)
    assert math.isnan(stats.minimum_detectable_effect([0.2], level=0.95))


def test_mde_shrinks_with_the_square_root_of_the_number_of_queries():
    rng = np.random.default_rng(1)
    d = rng.normal(0.0, 0.2, 70)
    small = stats.minimum_detectable_effect(d, 0.95)
    large = stats.minimum_detectable_effect(np.tile(d, 4), 0.95)  # same spread, 4x the queries
    assert large == pytest.approx(small / 2, rel=0.02)
    # "+0.004 on 70 queries" with a typical spread of per-query differences (0.2) is far inside the MDE
    assert 0.004 < small / 10


def _random_case(rng):
    n = int(rng.integers(1, 80))
    kind = rng.integers(0, 4)
    if kind == 0:  # continuous, any shift
        d = rng.normal(rng.normal(0, 0.05), rng.uniform(0.01, 0.3), n)
    elif kind == 1:  # mostly ties, a few movers (a typical retriever change)
        d = np.where(rng.random(n) < 0.2, rng.normal(0, 0.3, n), 0.0)
    elif kind == 2:  # discrete measure values (Success@k): differences in {-1, 0, 1}
        d = rng.integers(-1, 2, n).astype(float)
    else:  # one-sided
        d = np.abs(rng.normal(0, 0.1, n)) * rng.choice([-1, 1])
    base = rng.random(n)
    return base, base + d


def test_property_adjusted_p_and_interval_never_disagree():
    rng = np.random.default_rng(2026)
    outcomes = set()
    boundary = 0
    for case in range(600):
        base, cand = _random_case(rng)
        family = int(rng.integers(1, 30))
        level = float(rng.choice([0.8, 0.9, 0.95, 0.99, rng.uniform(0.5, 0.999)]))
        permutations = int(rng.choice([20, 99, 500, 2000, int(rng.integers(1, 3000))]))
        c = stats.paired_comparison(base, cand, family, level, permutations, seed=case)
        alpha = 1 - level
        assert (c.p_adjusted <= alpha) == c.excludes_zero, (case, c)
        assert c.low <= c.high
        assert c.p_adjusted == pytest.approx(min(1.0, family * c.p_value), rel=1e-12)
        # a wider family never turns a non-significant comparison into a significant one
        wider = stats.paired_comparison(base, cand, family + 5, level, permutations, seed=case)
        assert wider.low <= c.low and wider.high >= c.high
        assert not (wider.excludes_zero and not c.excludes_zero)
        outcomes.add((c.low > 0, c.high < 0))
        boundary += c.tail >= 0 and round(c.p_value * (permutations + 1)) - 1 in (c.tail, c.tail + 1)
    assert outcomes == {(True, False), (False, True), (False, False)}  # every verdict was exercised
    assert boundary > 5  # cases where p sits right at the edge of the interval's cut


def _null_family_error(draw, family_size, trials=300, queries=50, permutations=1000):
    rng = np.random.default_rng(5)
    errors = 0
    for trial in range(trials):
        d = draw(rng, (5, queries))  # (comparisons, queries), no true difference
        errors += any(stats.paired_comparison(np.zeros(queries), row, family_size, 0.95, permutations,
                                              trial).excludes_zero for row in d)
    return errors / trials


def test_simultaneous_intervals_hold_the_family_error_rate_under_the_null():
    # Five comparisons with no true difference, 300 families of 50 queries: Bonferroni keeps
    # P(any interval excludes 0) near or below 5% (binomial se 0.013), also when most differences
    # are ties and a few are large (where a percentile bootstrap let 10% through); five lone 95%
    # intervals give about 1 - 0.95^5 = 23%.
    def normal(rng, shape):
        return rng.normal(0, 0.2, shape)

    def sparse(rng, shape):
        return np.where(rng.random(shape) < 0.2, rng.choice([-1, 1], shape) * rng.exponential(0.3, shape), 0.0)

    assert _null_family_error(normal, 5) < 0.09
    assert _null_family_error(sparse, 5) < 0.09
    assert _null_family_error(normal, 1) > 0.15


def test_interval_covers_a_true_shift():
    # d = 0.05 + symmetric noise over 70 queries: a 95% interval covers 0.05 in about 95% of 300 draws
    # (binomial se 0.013)
    rng = np.random.default_rng(8)
    hits = 0
    for trial in range(300):
        c = stats.paired_comparison(np.zeros(70), 0.05 + rng.normal(0, 0.2, 70), 1, 0.95, 1000, trial)
        hits += c.low <= 0.05 <= c.high
    assert 0.91 < hits / 300 <= 0.99


def test_results_are_pinned_bit_for_bit():
    # computed before the sign flips were read in chunks (memory independent of the permutation count):
    # committed comparisons (metrics/<dataset>/compare.json, 10000 permutations) must not move
    rng = np.random.default_rng(11)
    d = np.where(rng.random(40) < 0.3, rng.normal(0.05, 0.2, 40), 0.0)
    c = stats.paired_comparison(np.zeros(40), d, 3, 0.95, 10000, 5)
    assert (c.low, c.high, c.p_value, c.p_adjusted, c.tail) == (
        -0.015963506130680722, 0.07337544328386172, 0.1307869213078692, 0.39236076392360764, 165)


@pytest.mark.parametrize("buffer", [0, 1, 50])
def test_several_passes_give_the_one_pass_result(buffer, monkeypatch):
    # With more candidates for an interval end than _BUFFER holds, the ends are found by radix selection
    # over replays of the same sign flips (0: every one of the 64 key bits). The result must be the
    # exact order statistics of the one-pass sort, bit for bit, whatever the data.
    rng = np.random.default_rng(7)
    cases = []
    for case in range(30):
        base, cand = _random_case(rng)
        family, level = int(rng.integers(1, 10)), float(rng.choice([0.5, 0.9, 0.95, 0.99]))
        cases.append((base, cand, family, level, int(rng.integers(1, 3000)), case))
    # several chunks per pass too (the chunk size itself may move the matrix product's last bit: fixed here)
    monkeypatch.setattr(stats, "_CHUNK", 700)
    one_pass = [stats.paired_comparison(*case) for case in cases]
    monkeypatch.setattr(stats, "_BUFFER", buffer, raising=False)
    assert [stats.paired_comparison(*case) for case in cases] == one_pass


_PEAKS = """
import sys, tracemalloc
import numpy as np
from retrieval_lab import stats
stats._BUFFER, stats._CHUNK = 1024, 4096
d = np.random.default_rng(0).normal(0.05, 0.2, 8)
for permutations in map(int, sys.argv[1:]):
    tracemalloc.start()
    stats.paired_comparison(np.zeros(8), d, 2, 0.95, permutations, seed=1)
    print(tracemalloc.get_traced_memory()[1])
    tracemalloc.stop()
"""


def test_memory_does_not_grow_with_the_permutations():
    # evaluate.permutations=1e11 grew to 20 GB: every bracket end was held (and sorted) at once.
    # Small buffers here so that the test is quick: 10x the permutations must not mean more memory
    # (the one-pass arrays would be 2 x 8 bytes x 400,000 = 6.4 MB, against about 1.5 MB of histograms).
    # Measured in a fresh interpreter: tracemalloc counts every thread's allocations, and threads other
    # tests leave behind (servers, clusters) added 270 kB to one peak in CI.
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _PEAKS, "40000", "400000"], capture_output=True, text=True, check=True)
    small, large = map(int, out.stdout.split())
    assert large < 1.1 * small + 100_000, (small, large)


def test_permutations_are_bounded():
    with pytest.raises(ValueError, match=r"permutations must lie in \[1, 10000000\]"):
        stats.paired_comparison([0.0, 1.0], [1.0, 0.0], permutations=10**7 + 1)


def test_win_tie_loss():
    assert stats.win_tie_loss([0.1, 0.5, 0.3, 0.2], [0.2, 0.5, 0.1, 0.2 + 1e-15]) == (1, 2, 1)


def test_bad_inputs_are_errors():
    with pytest.raises(ValueError, match="aligned"):
        stats.paired_comparison([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="no query"):
        stats.win_tie_loss([], [])
    with pytest.raises(ValueError, match="family_level"):
        stats.paired_comparison([1.0], [2.0], family_level=1.0)
    with pytest.raises(ValueError, match="family_size"):
        stats.paired_comparison([1.0], [2.0], family_size=0)


def test_mean_interval_of_a_run_is_the_normal_interval_for_many_queries_and_exact_for_a_constant():
    from statistics import NormalDist

    from retrieval_lab.stats import mean_interval

    assert mean_interval([0.5] * 20) == (0.5, 0.5, 0.5)
    values = np.random.default_rng(1).binomial(1, 0.7, size=400).astype(float)  # 0/1 like RR@1
    mean, low, high = mean_interval(values, 0.95, 20000, seed=3)
    half = NormalDist().inv_cdf(0.975) * values.std(ddof=1) / np.sqrt(values.size)  # independent: normal theory
    assert mean == values.mean() and low < mean < high
    assert low == pytest.approx(mean - half, abs=0.006) and high == pytest.approx(mean + half, abs=0.006)
    assert mean_interval(values, 0.95, 2000, seed=3) == mean_interval(values, 0.95, 2000, seed=3)
