"""Paired comparisons over queries under one rule: simultaneous bootstrap intervals, and a p read off them.

Every function takes two aligned arrays of per-query values (same queries, same
order): ``baseline`` and ``candidate``; differences are candidate - baseline.
Random steps take an explicit seed, so a report is reproducible bit for bit.

The rule. A family of ``m`` comparisons is judged at family level ``1 - alpha``
(e.g. 95%): each interval is a percentile bootstrap interval at level
``1 - alpha / m`` (Bonferroni), so all ``m`` cover their true differences together
with probability >= 1 - alpha. The adjusted p-value is the smallest family alpha at
which the interval would exclude 0, computed from the same sorted resampled means,
so "p <= alpha" and "the interval excludes 0" are one statement and cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

_CHUNK = 1 << 21  # resampled values held at once: bounds memory for many queries x resamples
ADJUSTMENT = "bonferroni"
POWER = 0.8  # for the minimum detectable effect


@dataclass(frozen=True)
class Comparison:
    """One paired comparison judged inside a family of ``family_size`` comparisons."""

    mean_difference: float
    low: float            # simultaneous interval (level ``level`` each, ``family_level`` together)
    high: float
    p_value: float        # bootstrap p, unadjusted: smallest alpha of a lone interval excluding 0
    p_adjusted: float     # Bonferroni: min(1, family_size * p_value); <= 1 - family_level iff excludes 0
    mde: float            # minimum detectable effect at the same level, POWER, for these queries
    queries: int
    family_size: int
    family_level: float
    level: float          # per-comparison level 1 - (1 - family_level) / family_size
    resamples: int
    seed: int
    tail: int             # resampled means cut from each tail: few (< 10) make the interval rough

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


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


def _adjusted_p(far_side: int, resamples: int, family_size: int) -> float:
    # The one expression for p: interval and verdict are derived from it, never recomputed.
    return min(1.0, family_size * 2.0 * far_side / resamples)


def _cut(resamples: int, family_size: int, alpha: float) -> int:
    """Largest count j with _adjusted_p(j) <= alpha: the interval drops j means from each tail."""
    j = int(alpha * resamples / (2 * family_size))  # close; then settle on the same float test as p
    while _adjusted_p(j + 1, resamples, family_size) <= alpha:
        j += 1
    while j > 0 and _adjusted_p(j, resamples, family_size) > alpha:
        j -= 1
    return j


def minimum_detectable_effect(differences, level: float, power: float = POWER) -> float:
    """Smallest true mean difference found with probability ``power`` by a two-sided test at ``level``.

    MDE = (z_{(1 + level)/2} + z_power) * sd(d) / sqrt(n), sd with n - 1 (normal approximation
    of the paired test over n queries); NaN for fewer than two queries.
    """
    d = np.asarray(differences, dtype=np.float64)
    if len(d) < 2:
        return float("nan")
    z = NormalDist().inv_cdf((1 + level) / 2) + NormalDist().inv_cdf(power)
    return float(z * d.std(ddof=1) / np.sqrt(len(d)))


def paired_comparison(baseline, candidate, family_size: int = 1, family_level: float = 0.95,
                      resamples: int = 10000, seed: int = 0) -> Comparison:
    """Percentile bootstrap of mean(d), d = candidate - baseline, judged in a family of ``family_size``.

    Each resample draws n queries with replacement and takes mean(d); s_1 <= ... <= s_B are the
    B sorted means. With alpha = 1 - family_level and c = min(#{s <= 0}, #{s >= 0}) (means on the
    far side of 0), the adjusted p is min(1, m * 2c / B) and j = the largest count with
    m * 2j / B <= alpha; the interval is [s_{j+1}, s_{B-j}]: Bonferroni's level 1 - alpha / m,
    up to the resolution 1 / B. s_{j+1} > 0 iff at most j means are <= 0, and s_{B-j} < 0 iff at
    most j are >= 0, so the interval excludes 0 exactly when c <= j, i.e. when p <= alpha.
    """
    if not 0 < family_level < 1:
        raise ValueError(f"family_level must be in (0, 1), got {family_level}")
    if family_size < 1:
        raise ValueError(f"family_size must be >= 1, got {family_size}")
    if resamples < 2:
        raise ValueError(f"resamples must be >= 2, got {resamples}")
    d = _differences(baseline, candidate)
    means = np.sort(_resampled_means(d, resamples, np.random.default_rng(seed)))  # (B,)
    far_side = min(int(np.count_nonzero(means <= 0)), int(np.count_nonzero(means >= 0)))
    alpha = 1 - family_level
    j = _cut(resamples, family_size, alpha)
    level = 1 - alpha / family_size
    p = _adjusted_p(far_side, resamples, 1)
    return Comparison(
        mean_difference=float(d.mean()), low=float(means[j]), high=float(means[resamples - 1 - j]),
        p_value=p, p_adjusted=_adjusted_p(far_side, resamples, family_size),
        mde=minimum_detectable_effect(d, level), queries=len(d), family_size=family_size,
        family_level=family_level, level=level, resamples=resamples, seed=seed, tail=j)


def win_tie_loss(baseline, candidate, tolerance: float = 1e-12) -> tuple[int, int, int]:
    """Queries where the candidate is better, equal (within ``tolerance``), worse."""
    d = _differences(baseline, candidate)
    return int((d > tolerance).sum()), int((np.abs(d) <= tolerance).sum()), int((d < -tolerance).sum())
