"""Paired comparisons over queries under one rule: simultaneous intervals, and a p that cannot disagree.

Every function takes two aligned arrays of per-query values (same queries, same
order): ``baseline`` and ``candidate``; differences are candidate - baseline.
Random steps take an explicit seed, so a report is reproducible bit for bit.

The rule. A family of ``m`` comparisons is judged at family level ``1 - alpha``
(e.g. 95%): each interval is taken at level ``1 - alpha / m`` (Bonferroni), so all
``m`` hold together with probability >= 1 - alpha. Test and interval are one object:
the two-sided paired randomization (sign-flip) test, and the interval of every shift
``delta`` that test does not reject for ``d - delta`` with the same random signs. So
"adjusted p <= alpha" and "the interval excludes 0" are one statement.

Why sign flips and not a percentile bootstrap: with few queries, and with per-query
differences that are mostly ties and a few large moves (a typical retriever change),
percentile bootstrap intervals at Bonferroni's level let more families with no true
difference through than the level promises; sign flips are exact under that null
(the simulation's figures: docs/lab-notes.md, "Statistics: sign flips against the bootstrap").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from .core.params import MAX_PERMUTATIONS

_CHUNK = 1 << 21  # sign values drawn at once: bounds memory for many queries x permutations
_BUFFER = 1 << 20  # interval-end candidates held at once: larger counts take more passes over the signs
ADJUSTMENT = "bonferroni"
POWER = 0.8  # for the minimum detectable effect


@dataclass(frozen=True)
class Comparison:
    """One paired comparison judged inside a family of ``family_size`` comparisons."""

    mean_difference: float
    low: float            # simultaneous interval (level ``level`` each, ``family_level`` together)
    high: float
    p_value: float        # randomization p, unadjusted: (1 + splits bracketing 0) / (1 + permutations)
    p_adjusted: float     # Bonferroni: min(1, family_size * p_value); <= 1 - family_level iff excludes 0
    mde: float            # minimum detectable effect at the same level, POWER, for these queries
    queries: int
    family_size: int
    family_level: float
    level: float          # per-comparison level 1 - (1 - family_level) / family_size
    permutations: int
    seed: int
    tail: int             # splits left beyond each end of the interval: few (< 10) make the ends rough

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


def _bracket_chunks(d: np.ndarray, permutations: int, seed: int):
    """For each random sign vector, chunk by chunk: the lower and the higher of the mean of d over its +
    queries and over its - queries (an empty side makes the bracket the whole line). The same seed
    replays the same vectors, so a caller may read the stream more than once."""
    n, total = len(d), float(d.sum())
    rows = max(1, _CHUNK // n)
    tolerance = 1e-12 * max(1.0, float(np.abs(d).max()))  # a subset mean equal to 0 up to rounding is 0
    rng = np.random.default_rng(seed)
    for start in range(0, permutations, rows):
        plus = rng.random((min(rows, permutations - start), n)) < 0.5  # (r, n) sign +1
        count = plus.sum(axis=1)  # (r,)
        sum_plus = plus @ d  # (r,)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean_plus = sum_plus / count
            mean_minus = (total - sum_plus) / (n - count)
        one_sided = (count == 0) | (count == n)
        low = np.where(one_sided, -np.inf, np.fmin(mean_plus, mean_minus))  # (r,)
        high = np.where(one_sided, np.inf, np.fmax(mean_plus, mean_minus))  # (r,)
        low[np.abs(low) <= tolerance] = 0.0
        high[np.abs(high) <= tolerance] = 0.0
        yield low, high


def _keys(x: np.ndarray) -> np.ndarray:
    """uint64 keys in the order of the float64 values x (no NaN; -0.0 never occurs, see the tolerance)."""
    bits = x.view(np.uint64)
    return np.where(bits >> np.uint64(63), ~bits, bits | np.uint64(1 << 63))


class _Select:
    """The k-th smallest (0-based) of a replayable stream in memory independent of its length: radix
    selection on the values' sortable bits, 16 at a time, until the candidates fit in ``_BUFFER``."""

    def __init__(self, k: int, size: int):
        self.k, self.prefix, self.fixed, self.candidates = k, 0, 0, size  # top `fixed` key bits == prefix
        self.value: float | None = None
        self._collected: list[np.ndarray] = []
        self._histogram = np.zeros(1 << 16, dtype=np.int64)

    def _matching(self, x: np.ndarray):
        if self.fixed == 0:
            return x, _keys(x)
        keys = _keys(x)
        keep = (keys >> np.uint64(64 - self.fixed)) == np.uint64(self.prefix)
        return x[keep], keys[keep]

    def feed(self, x: np.ndarray) -> None:
        values, keys = self._matching(x)
        if self.candidates <= _BUFFER:
            self._collected.append(values)
        else:
            digit = (keys >> np.uint64(48 - self.fixed)) & np.uint64(0xFFFF)
            self._histogram += np.bincount(digit.astype(np.int64), minlength=1 << 16)

    def end_pass(self) -> None:
        if self.candidates <= _BUFFER:
            self.value = float(np.partition(np.concatenate(self._collected), self.k)[self.k])
            return
        below = np.cumsum(self._histogram)  # (65536,)
        digit = int(np.searchsorted(below, self.k, side="right"))  # the bin holding the k-th
        self.k -= int(below[digit - 1]) if digit else 0
        self.prefix, self.fixed = (self.prefix << 16) | digit, self.fixed + 16
        self.candidates = int(self._histogram[digit])
        self._histogram[:] = 0
        if self.fixed == 64:  # every candidate has this key: they are all the value
            key = np.array([self.prefix], dtype=np.uint64)
            self.value = float(np.where(key >> np.uint64(63), key & ~np.uint64(1 << 63), ~key).view(np.float64)[0])


def _split_brackets(d: np.ndarray, permutations: int, seed: int, j: int) -> tuple[int, float, float]:
    """c0 = min(#{L <= 0}, #{U >= 0}) over the brackets [L_s, U_s] of the sign vectors s, and, for
    j >= 0, the order statistics L_(j+1) and U_(P-j) (1-based, ascending); memory independent of P."""
    at_least = [0, 0]
    selects = [_Select(j, permutations), _Select(permutations - 1 - j, permutations)] if j >= 0 else []
    first = True
    while first or any(s.value is None for s in selects):
        for low, high in _bracket_chunks(d, permutations, seed):
            if first:
                at_least[0] += int(np.count_nonzero(low <= 0))
                at_least[1] += int(np.count_nonzero(high >= 0))
            for select, x in zip(selects, (low, high)):
                if select.value is None:
                    select.feed(x)
        for select in selects:
            if select.value is None:
                select.end_pass()
        first = False
    ends = (selects[0].value, selects[1].value) if selects else (-np.inf, np.inf)
    return min(at_least), *ends


def _adjusted_p(count: int, permutations: int, family_size: int) -> float:
    """Adjusted p of ``count`` sign vectors at least as extreme: min(1, m (1 + c) / (1 + P))."""
    return min(1.0, family_size * (1.0 + count) / (1.0 + permutations))


def _tail(permutations: int, family_size: int, alpha: float) -> int:
    """j = max{c in 0..P : adjusted p(c) <= alpha}, -1 if none: the splits left beyond each interval end.

    One formula decides both p and the interval, so they cannot disagree even by rounding; it rises
    with c (exact integers over one divisor), so the estimate needs at most a step or two of correction.
    """
    j = min(permutations, max(-1, int(alpha * (1.0 + permutations) / family_size) - 1))
    while j < permutations and _adjusted_p(j + 1, permutations, family_size) <= alpha:
        j += 1
    while j >= 0 and _adjusted_p(j, permutations, family_size) > alpha:
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
                      permutations: int = 10000, seed: int = 0) -> Comparison:
    """Paired randomization test of mean(d) = 0, d = candidate - baseline, and its inverted interval.

    Draw P random sign vectors s. The test of a shift delta counts the vectors with
    |sum s (d - delta)| >= |sum (d - delta)|; that holds exactly when delta lies between the mean of
    d over the queries signed +1 and over those signed -1 (the bracket [L_s, U_s]). So the count at
    delta is c(delta) = #{s : L_s <= delta <= U_s}, p(delta) = min(1, m (1 + c) / (1 + P)), and with
    j = max{c : p(c) <= alpha}, alpha = 1 - family_level, the interval of shifts not rejected is
    [L_(j+1), U_(P-j)] (sorted L ascending, U ascending). The test at 0 uses
    c0 = min(#{L <= 0}, #{U >= 0}) (every bracket holds mean(d), so one of the two counts is all P):
    L_(j+1) > 0 iff #{L <= 0} <= j, and U_(P-j) < 0 iff #{U >= 0} <= j, so the interval excludes 0
    exactly when c0 <= j, i.e. when the adjusted p <= alpha.
    """
    if not 0 < family_level < 1:
        raise ValueError(f"family_level must be in (0, 1), got {family_level}")
    if family_size < 1:
        raise ValueError(f"family_size must be >= 1, got {family_size}")
    if not 1 <= permutations <= MAX_PERMUTATIONS:
        raise ValueError(f"permutations must lie in [1, {MAX_PERMUTATIONS}], got {permutations}")
    d = _differences(baseline, candidate)
    alpha = 1 - family_level
    j = _tail(permutations, family_size, alpha)  # -1: too few permutations to reject
    c0, low, high = _split_brackets(d, permutations, seed, j)
    level = 1 - alpha / family_size
    # an unbounded interval: no difference at all can be shown (too few queries or permutations), whatever
    # the normal approximation says of a spread of 0
    mde = minimum_detectable_effect(d, level) if math.isfinite(low) and math.isfinite(high) else math.inf
    return Comparison(
        mean_difference=float(d.mean()), low=low, high=high,
        p_value=_adjusted_p(c0, permutations, 1), p_adjusted=_adjusted_p(c0, permutations, family_size),
        mde=mde, queries=len(d), family_size=family_size,
        family_level=family_level, level=level, permutations=permutations, seed=seed, tail=j)


def win_tie_loss(baseline, candidate, tolerance: float = 1e-12) -> tuple[int, int, int]:
    """Queries where the candidate is better, equal (within ``tolerance``), worse."""
    d = _differences(baseline, candidate)
    return int((d > tolerance).sum()), int((np.abs(d) <= tolerance).sum()), int((d < -tolerance).sum())


def mean_interval(values, level: float = 0.95, resamples: int = 10000, seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): the percentile bootstrap interval of one run's mean over its queries.

    Draws ``resamples`` samples of the queries with replacement (seeded) and takes the
    (1 - level)/2 and (1 + level)/2 quantiles of their means. For one run's measure, as a user
    reports it (MRR@3 0.82 [0.72, 0.91]); two runs are compared by :func:`paired_comparison`,
    never by whether two such intervals overlap.
    """
    x = np.asarray(values, dtype=np.float64)  # [n]
    if x.size == 0:
        raise ValueError("no values")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for start in range(0, resamples, 1000):  # bounds the [chunk, n] index array
        stop = min(start + 1000, resamples)
        means[start:stop] = x[rng.integers(0, x.size, size=(stop - start, x.size))].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(x.mean()), float(low), float(high)
