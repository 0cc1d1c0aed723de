import itertools

import numpy as np
import pytest

from retrieval_lab import stats


def exact_p_by_enumeration(d):
    """Independent reference: every sign assignment, plain Python."""
    observed = abs(sum(d))
    hits = sum(abs(sum(s * x for s, x in zip(signs, d))) >= observed - 1e-12
               for signs in itertools.product([-1, 1], repeat=len(d)))
    return hits / 2 ** len(d)


def test_bootstrap_is_reproducible_for_a_fixed_seed():
    rng = np.random.default_rng(0)
    a, b = rng.random(50), rng.random(50)
    first = stats.paired_bootstrap(a, b, resamples=500, seed=3)
    assert stats.paired_bootstrap(a, b, resamples=500, seed=3) == first
    assert stats.paired_bootstrap(a, b, resamples=500, seed=4) != first


def test_bootstrap_ci_contains_the_true_difference():
    # differences 0.1 +- 0.05 alternating: the true (and sample) mean difference is 0.1
    base = np.linspace(0.2, 0.6, 40)
    cand = base + 0.1 + np.where(np.arange(40) % 2 == 0, 0.05, -0.05)
    ci = stats.paired_bootstrap(base, cand, level=0.95, resamples=2000, seed=1)
    assert ci.mean_difference == pytest.approx(0.1, abs=1e-12)
    assert ci.low < 0.1 < ci.high
    assert ci.low > 0  # 0 is far outside: sd 0.05 over 40 queries gives a CI about +-0.016
    # width vs the normal approximation 2 * 1.96 * sd / sqrt(n) = 2 * 1.96 * 0.05 / sqrt(40) = 0.031
    assert ci.high - ci.low == pytest.approx(2 * 1.96 * 0.05 / np.sqrt(40), rel=0.15)


def test_bootstrap_constant_difference_gives_a_point_interval():
    ci = stats.paired_bootstrap([0.0, 0.5, 1.0], [0.2, 0.7, 1.2], resamples=100, seed=0)
    assert (ci.low, ci.high) == pytest.approx((0.2, 0.2))


def test_exact_randomization_by_hand():
    # d = (1, 1, 1, 1): only all-plus and all-minus reach |sum| = 4 -> p = 2 / 16
    assert stats.randomization_test([0] * 4, [1] * 4, exact=True) == 0.125
    # d = (1, -1): every assignment has |sum| >= 0 -> p = 1
    assert stats.randomization_test([0, 1], [1, 0], exact=True) == 1.0


def test_randomization_matches_exact_enumeration_for_tiny_n():
    d = [0.3, 0.1, -0.05, 0.2, 0.25, 0.0, 0.15, -0.1, 0.4, 0.05]
    base = np.zeros(len(d))
    reference = exact_p_by_enumeration(d)
    assert 0.005 < reference < 0.2  # a case where the p-value is informative
    assert stats.randomization_test(base, d, exact=True) == pytest.approx(reference, abs=1e-15)
    # auto mode enumerates when 2^n <= permutations (1024 <= 5000)
    assert stats.randomization_test(base, d, permutations=5000) == pytest.approx(reference, abs=1e-15)
    sampled = stats.randomization_test(base, d, permutations=20000, seed=2, exact=False)
    se = np.sqrt(reference * (1 - reference) / 20000)
    assert abs(sampled - reference) < 4 * se
    assert stats.randomization_test(base, d, permutations=2000, seed=2, exact=False) == \
        stats.randomization_test(base, d, permutations=2000, seed=2, exact=False)


def test_randomization_p_is_never_zero_when_sampled():
    p = stats.randomization_test(np.zeros(100), np.ones(100), permutations=99, seed=0)
    assert p == pytest.approx(1 / 100)  # no sampled assignment reaches |sum| = 100


def test_win_tie_loss():
    assert stats.win_tie_loss([0.1, 0.5, 0.3, 0.2], [0.2, 0.5, 0.1, 0.2 + 1e-15]) == (1, 2, 1)


def test_holm_by_hand():
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> running max 0.06
    adjusted = stats.holm([0.01, 0.04, 0.03, 0.005])
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1


def test_misaligned_inputs_are_errors():
    with pytest.raises(ValueError, match="aligned"):
        stats.paired_bootstrap([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="no query"):
        stats.win_tie_loss([], [])
