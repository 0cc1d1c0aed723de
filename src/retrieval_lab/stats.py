"""Paired significance over queries: bootstrap CI, randomization test, win/tie/loss, Holm correction.

Every function takes two aligned arrays of per-query values (same queries, same
order): ``baseline`` and ``candidate``; differences are candidate - baseline.
Random steps take an explicit seed, so a report is reproducible bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_CHUNK = 1 << 21  # resampled values held at once: bounds memory for many queries x resamples


@dataclass(frozen=True)
class Bootstrap:
    mean_difference: float
    low: float
    high: float
    level: float
    resamples: int
    seed: int


def _differences(baseline, candidate) -> np.ndarray:
    a = np.asarray(baseline, dtype=np.float64)  # (n,)
    b = np.asarray(candidate, dtype=np.float64)  # (n,)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"expected two aligned 1-d arrays, got shapes {a.shape} and {b.shape}")
    if len(a) == 0:
        raise ValueError("no query to compare")
    return b - a  # (n,)


def _resampled_means(d: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    n = len(d)
    rows = max(1, _CHUNK // n)
    out = []
    for start in range(0, resamples, rows):
        idx = rng.integers(0, n, size=(min(rows, resamples - start), n))  # (r, n) queries drawn
        out.append(d[idx].mean(axis=1))  # (r,)
    return np.concatenate(out)  # (resamples,)


def paired_bootstrap(baseline, candidate, level: float = 0.95, resamples: int = 2000,
                     seed: int = 0) -> Bootstrap:
    """Percentile bootstrap CI of the mean difference d = candidate - baseline.

    Each resample draws n queries with replacement and takes mean(d) over them;
    the interval is the (1 - level)/2 and (1 + level)/2 quantiles of those means.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    d = _differences(baseline, candidate)
    means = _resampled_means(d, resamples, np.random.default_rng(seed))
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return Bootstrap(float(d.mean()), float(low), float(high), level, resamples, seed)


def _sign_matrix(n: int) -> np.ndarray:
    codes = np.arange(2 ** n)[:, None] >> np.arange(n)  # (2^n, n) bit j of assignment i
    return (codes & 1) * 2.0 - 1.0  # (2^n, n) every +-1 assignment once


def randomization_test(baseline, candidate, permutations: int = 5000, seed: int = 0,
                       exact: bool | None = None) -> float:
    """Two-sided paired randomization (Fisher sign-flip) p-value for mean(candidate - baseline) = 0.

    Under the null each query's difference is as likely to have either sign, so
    p = P(|sum(s * d)| >= |sum(d)|) over random signs s. ``exact`` enumerates all
    2^n sign vectors (default: when 2^n <= permutations); otherwise ``permutations``
    random ones are drawn and p = (1 + hits) / (1 + permutations), which is never 0.
    """
    d = _differences(baseline, candidate)
    n = len(d)
    if exact is None:
        exact = n < 63 and 2 ** n <= permutations
    observed = abs(d.sum())
    tolerance = 1e-12 * max(1.0, float(np.abs(d).sum()))  # sums equal up to rounding count as ties
    if exact:
        stats = np.abs(_sign_matrix(n) @ d)  # (2^n,)
        return float(np.count_nonzero(stats >= observed - tolerance) / len(stats))
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK // n)
    hits = 0
    for start in range(0, permutations, rows):
        signs = rng.choice([-1.0, 1.0], size=(min(rows, permutations - start), n))  # (r, n)
        hits += int(np.count_nonzero(np.abs(signs @ d) >= observed - tolerance))
    return (1 + hits) / (1 + permutations)


def win_tie_loss(baseline, candidate, tolerance: float = 1e-12) -> tuple[int, int, int]:
    """Queries where the candidate is better, equal (within ``tolerance``), worse."""
    d = _differences(baseline, candidate)
    return int((d > tolerance).sum()), int((np.abs(d) <= tolerance).sum()), int((d < -tolerance).sum())


def holm(pvalues) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order.

    With p sorted ascending p_(1) <= ... <= p_(m): adj_(i) = max_{j<=i} min(1, (m - j + 1) p_(j)).
    """
    p = np.asarray(pvalues, dtype=np.float64)  # (m,)
    m = len(p)
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])  # (m,)
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted.tolist()
