import math

import numpy as np
import pytest

from retrieval_lab import stats


def test_comparison_is_reproducible_for_a_fixed_seed():
    rng = np.random.default_rng(0)
    a, b = rng.random(50), rng.random(50)
    first = stats.paired_comparison(a, b, resamples=500, seed=3)
    assert stats.paired_comparison(a, b, resamples=500, seed=3) == first
    assert stats.paired_comparison(a, b, resamples=500, seed=4) != first


def test_interval_contains_the_true_difference_and_has_the_normal_width():
    # differences 0.1 +- 0.05 alternating: the true (and sample) mean difference is 0.1
    base = np.linspace(0.2, 0.6, 40)
    cand = base + 0.1 + np.where(np.arange(40) % 2 == 0, 0.05, -0.05)
    c = stats.paired_comparison(base, cand, family_size=1, family_level=0.95, resamples=20000, seed=1)
    assert c.mean_difference == pytest.approx(0.1, abs=1e-12)
    assert c.low < 0.1 < c.high and c.low > 0
    # width vs the normal approximation 2 * 1.96 * sd / sqrt(n), sd = 0.05 (population): 0.031
    assert c.high - c.low == pytest.approx(2 * 1.96 * 0.05 / np.sqrt(40), rel=0.1)
    # five comparisons: Bonferroni level 1 - 0.05 / 5 = 0.99, z = 2.576 -> width 2 * 2.576 * 0.05 / sqrt(40) = 0.041
    c5 = stats.paired_comparison(base, cand, family_size=5, family_level=0.95, resamples=20000, seed=1)
    assert c5.level == pytest.approx(0.99)
    assert c5.high - c5.low == pytest.approx(2 * 2.576 * 0.05 / np.sqrt(40), rel=0.1)
    assert c5.low <= c.low and c5.high >= c.high  # same resamples, wider cut


def test_constant_difference_gives_a_point_interval_and_p_zero():
    c = stats.paired_comparison([0.0, 0.5, 1.0], [0.2, 0.7, 1.2], family_size=4, resamples=100, seed=0)
    assert (c.low, c.high) == pytest.approx((0.2, 0.2))
    assert c.p_value == 0 and c.p_adjusted == 0 and c.excludes_zero
    assert c.mde == pytest.approx(0.0, abs=1e-12)  # no spread: any true difference would show


def test_identical_runs_never_differ():
    c = stats.paired_comparison([0.3, 0.5, 0.1], [0.3, 0.5, 0.1], family_size=2, resamples=200)
    assert (c.low, c.high, c.mean_difference) == (0.0, 0.0, 0.0)
    assert c.p_value == 1.0 and c.p_adjusted == 1.0 and not c.excludes_zero


def test_bootstrap_p_against_the_binomial():
    # d = nine queries at +0.1 and one at -0.1. A resample holding K copies of the loser has mean
    # 0.01 * (10 - 2K), <= 0 iff K >= 5, K ~ Binomial(10, 0.1); no resample mean is exactly 0 with
    # K < 5, so p = 2 * P(K >= 5) (the two-sided far-side share).
    tail = sum(math.comb(10, k) * 0.1 ** k * 0.9 ** (10 - k) for k in range(5, 11))  # 0.0016349
    d = np.array([0.1] * 9 + [-0.1])
    resamples = 200_000
    c = stats.paired_comparison(np.zeros(10), d, family_size=3, resamples=resamples, seed=7)
    se = 2 * math.sqrt(tail * (1 - tail) / resamples)
    assert abs(c.p_value - 2 * tail) < 4 * se
    assert c.p_adjusted == pytest.approx(min(1.0, 3 * c.p_value))  # Bonferroni over 3: ~0.0098 <= 0.05
    assert c.excludes_zero and c.low > 0


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
    for case in range(600):
        base, cand = _random_case(rng)
        family = int(rng.integers(1, 30))
        level = float(rng.choice([0.8, 0.9, 0.95, 0.99, rng.uniform(0.5, 0.999)]))
        resamples = int(rng.choice([20, 99, 500, 2000, int(rng.integers(2, 3000))]))
        c = stats.paired_comparison(base, cand, family, level, resamples, seed=case)
        alpha = 1 - level
        assert (c.p_adjusted <= alpha) == c.excludes_zero, (case, c)
        assert c.low <= c.high
        assert c.p_adjusted == pytest.approx(min(1.0, family * c.p_value), rel=1e-12)
        # a wider family never turns a non-significant comparison into a significant one
        wider = stats.paired_comparison(base, cand, family + 5, level, resamples, seed=case)
        assert wider.low <= c.low and wider.high >= c.high
        assert not (wider.excludes_zero and not c.excludes_zero)
        outcomes.add((c.low > 0, c.high < 0))
    assert outcomes == {(True, False), (False, True), (False, False)}  # every verdict was exercised


def test_interval_ends_are_the_bonferroni_quantiles_of_the_resampled_means():
    # Independent of the index arithmetic: the ends sit within one resample of the empirical
    # alpha / (2m) and 1 - alpha / (2m) quantiles of the same resampled means.
    rng = np.random.default_rng(3)
    a, b = rng.random(60), rng.random(60) + 0.02
    resamples, family = 4000, 4
    c = stats.paired_comparison(a, b, family, 0.95, resamples, seed=11)
    means = np.sort(stats._resampled_means(b - a, resamples, np.random.default_rng(11)))
    q = 0.05 / (2 * family)  # 0.00625 -> 25 means cut from each tail
    assert c.tail == 25
    assert means[int(q * resamples) - 1] <= c.low <= means[int(q * resamples) + 1]
    assert means[-int(q * resamples) - 2] <= c.high <= means[-int(q * resamples)]


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
