"""Every number the project reports: ranking measures in ir_measures notation, checked against trec_eval.

Measure names (``k`` a positive integer cutoff, ``t`` an integer relevance threshold >= 1):

=====================  ==========================================================  ================
name                   per-query value                                             trec_eval
=====================  ==========================================================  ================
``Success@k``          1 if a relevant document is in the top k, else 0             success_k
``P@k``                relevant in top k / k (k even when fewer were retrieved)     P_k
``R@k``, ``R``         relevant in top k / R (R = all relevant judged)              recall_k
``RR@k``, ``RR``       1 / rank of the first relevant document (0 beyond k)         recip_rank
``AP@k``, ``AP``       sum over relevant ranks i <= k of P@i, divided by R          map_cut_k, map
``nDCG@k``, ``nDCG``   DCG@k / ideal DCG@k, gain(rel) / log2(i + 1)                  ndcg_cut_k, ndcg
``Judged@k``           judged documents in top k / k                               (ir_measures)
=====================  ==========================================================  ================

Options go in parentheses: ``R(rel=2)@5`` counts documents with relevance >= 2 as
relevant (trec_eval ``-l 2``; Success, P, R, RR and AP take it), ``nDCG(gain=exp)@10``
uses gain 2^rel - 1 instead of the linear gain rel (no trec_eval equivalent). nDCG
gains come from the graded labels whatever the threshold; its ideal ranking is built
from ALL judged documents of the query, not only the retrieved ones.

Conventions, all trec_eval's:

* order: score descending, ties broken by document id descending (``runs.ranked``);
* negative judgments are non-relevant and have no gain; trec_eval reads them as
  "not in the pool", so they are not *judged* for ``Judged@k`` nor kept by ``judged_only``;
* ``judged_only=True`` is trec_eval ``-J`` (condensed lists): documents without a
  judgment >= 0 are removed from every ranking before measuring.

Queries (where this differs from plain trec_eval):

* a judged query without any positive (relevance >= 1) is excluded from every mean
  and listed in the report; trec_eval would average it in as 0. A measure with a
  threshold ``rel=t`` likewise excludes queries without a judgment >= t;
* a judged query absent from the run scores 0 on every measure (trec_eval ``-c``);
  trec_eval without ``-c`` and pytrec_eval silently leave such queries out of the mean,
  which rewards a system for skipping hard queries;
* run queries that are not in the qrels are ignored and counted.

Implementation: only judged documents matter to these measures, so each judged
document that was retrieved becomes one (query, rank, relevance) triple and every
measure is a few vectorised numpy reductions over those triples. A judged
document's rank is counted from one numpy sort of the query's scores; documents
are never sorted as Python objects except to break score ties by id.

Over 400 lines on purpose: one concern, the metrics engine; every measure beside its parser, so that one
module produces every number (fusion tuning, validation, evaluate, score-runs).
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .core.data import Qrels
from .core.errors import InputError
from .runs import Run, ranked

# ----------------------------------------------------------------------------- measure names


@dataclass(frozen=True)
class Measure:
    """A parsed measure name; ``name`` is the canonical spelling."""

    name: str
    family: str
    cutoff: int | None = None
    rel: int = 1
    gain: str = "lin"


@dataclass(frozen=True)
class _Family:
    kernel: Callable[[_Triples, Measure], np.ndarray]
    options: tuple[str, ...]
    cutoff_required: bool
    usage: str


_MEASURE_RE = re.compile(r"^(?P<family>[A-Za-z]+)(?:\((?P<options>[^()]*)\))?(?:@(?P<cutoff>[^@]+))?$")


def _valid_names() -> str:
    return ", ".join(f.usage for f in _FAMILIES.values())


@functools.cache
def parse_measure(name: str) -> Measure:
    """Parse ``Family(option=value,...)@k``; unknown names and bad options are errors listing valid ones."""
    match = _MEASURE_RE.match(name.strip())
    family = _FAMILIES.get(match.group("family")) if match else None
    if family is None:
        raise InputError(f"unknown measure {name!r} (valid: {_valid_names()})", field="measure")
    cutoff = None
    if match.group("cutoff") is not None:
        text = match.group("cutoff")
        if not text.isdecimal() or int(text) < 1:
            raise InputError(f"measure {name!r}: cutoff {text!r} is not a positive integer", field="measure")
        cutoff = int(text)
    elif family.cutoff_required:
        raise InputError(f"measure {name!r} needs a cutoff, e.g. {family.usage}", field="measure")
    options: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in (match.group("options") or "").split(","))):
        key, _, value = (s.strip() for s in item.partition("="))
        if key not in family.options or not value:
            allowed = ", ".join(family.options) or "none"
            raise InputError(f"measure {name!r}: bad option {item!r} (options: {allowed})", field="measure")
        options[key] = value
    rel, gain = 1, options.get("gain", "lin")
    if "rel" in options:
        if not options["rel"].isdecimal() or int(options["rel"]) < 1:
            raise InputError(f"measure {name!r}: rel must be an integer >= 1", field="measure")
        rel = int(options["rel"])
    if gain not in ("lin", "exp"):
        raise InputError(f"measure {name!r}: gain must be lin or exp", field="measure")
    canonical = match.group("family")
    shown = [f"rel={rel}"] if rel != 1 else []
    shown += [f"gain={gain}"] if gain != "lin" else []
    if shown:
        canonical += f"({','.join(shown)})"
    if cutoff is not None:
        canonical += f"@{cutoff}"
    return Measure(canonical, match.group("family"), cutoff, rel, gain)


# ----------------------------------------------------------------------------- ranks of judged documents


_COUNTED_IN_PYTHON = 256  # ranking length up to which ranks are counted without numpy


def _judged_ranks(judged: dict[str, int], scores: dict[str, float], judged_only: bool) -> dict[str, int]:
    """1-based rank of every judged document present in ``scores`` (trec_eval order).

    rank(d) = 1 + #{score > s_d} + #{score == s_d and id > d}: counted, not sorted, so a
    ranking costs one numpy sort of its scores whatever its length.
    """
    present = {d: scores[d] for d in judged if d in scores}
    if judged_only:
        # -J: the ranking is the judged documents alone, in their own order.
        kept = {d: s for d, s in present.items() if judged[d] >= 0}
        return {d: i for i, (d, _) in enumerate(ranked(kept), start=1)}
    if not present:
        return {}
    if len(scores) <= _COUNTED_IN_PYTHON:
        # the usual ranking (a run's depth): the same counts with Python's sort and bisect, which beat
        # numpy's per-call overhead at this size (a run read from a file is already in order: O(n))
        ordered_list = sorted(scores.values())
        n, ranks = len(ordered_list), {}
        for d, s in present.items():
            right = bisect.bisect_right(ordered_list, s)
            ranks[d] = n - right + 1
            if right - bisect.bisect_left(ordered_list, s) > 1:  # ties: rare, resolved by id
                ranks[d] += sum(1 for e, v in scores.items() if v == s and e > d)
        return ranks
    values = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))  # (n,)
    ordered = np.sort(values)  # (n,)
    mine = np.fromiter(present.values(), dtype=np.float64, count=len(present))  # (j,)
    left = np.searchsorted(ordered, mine, side="left")  # (j,)
    right = np.searchsorted(ordered, mine, side="right")  # (j,)
    ranks = len(values) - right + 1  # (j,) docs scoring strictly higher, plus one
    tied = np.flatnonzero(right - left > 1)  # ties: rare, resolved by id
    if len(tied):
        ids = np.array(list(scores), dtype=str)  # (n,)
        docs = list(present)
        for i in tied:
            ranks[i] += int(np.count_nonzero(ids[values == mine[i]] > docs[i]))
    return dict(zip(present, ranks.tolist()))


def positive_ranks(qrels: Qrels, run: Run, rel: int = 1) -> dict[str, dict[str, int | None]]:
    """For every query with a positive (relevance >= ``rel``): positive doc id -> rank in the run, or None."""
    out = {}
    for qid, judged in qrels.items():
        pos = [d for d, r in judged.items() if r >= rel]
        if pos:
            ranks = _judged_ranks({d: judged[d] for d in pos}, run.get(qid, {}), judged_only=False)
            out[qid] = {d: ranks.get(d) for d in sorted(pos, key=lambda d: (ranks.get(d, np.inf), d))}
    return out


def first_positive_ranks(qrels: Qrels, run: Run, rel: int = 1) -> dict[str, int | None]:
    """For every query with a positive: rank of its best-ranked positive, None when none was retrieved."""
    return {qid: min((r for r in ranks.values() if r is not None), default=None)
            for qid, ranks in positive_ranks(qrels, run, rel).items()}


# ----------------------------------------------------------------------------- flattened judgments


@dataclass
class _Triples:
    """Judged documents as flat arrays over the evaluated queries (index 0..nq-1).

    Retrieved ones sorted by (query, rank): ``q``, ``rank``, ``rel``.
    All judgments sorted by (query, relevance descending): ``jq``, ``jrel``.
    """

    nq: int
    q: np.ndarray
    rank: np.ndarray
    rel: np.ndarray
    jq: np.ndarray
    jrel: np.ndarray


def _flatten(qrels: Qrels, run: Run, queries: list[str], judged_only: bool) -> _Triples:
    retrieved, rank, rel, judged_count, jrel = [], [], [], [], []  # per query counts, then flat values
    empty: dict[str, float] = {}
    for qid in queries:
        judged = qrels[qid]
        ranks = _judged_ranks(judged, run.get(qid, empty), judged_only)
        retrieved.append(len(ranks))
        rank += ranks.values()
        rel += map(judged.__getitem__, ranks)
        judged_count.append(len(judged))
        jrel += judged.values()
    nq = np.arange(len(queries))
    q, rank, rel = np.repeat(nq, retrieved), np.array(rank, np.int64), np.array(rel, np.int64)
    order = np.lexsort((rank, q))
    jq, jrel = np.repeat(nq, judged_count), np.array(jrel, np.int64)
    jorder = np.lexsort((-jrel, jq))
    return _Triples(len(queries), q[order], rank[order], rel[order], jq[jorder], jrel[jorder])


# ----------------------------------------------------------------------------- kernels: (nq,) per measure


def _within(t: _Triples, m: Measure) -> np.ndarray:
    """Retrieved judged documents at or above the cutoff (all when there is none)."""
    return t.rank <= m.cutoff if m.cutoff is not None else np.ones(len(t.rank), bool)


def _count(t: _Triples, mask: np.ndarray) -> np.ndarray:
    return np.bincount(t.q[mask], minlength=t.nq).astype(np.float64)  # (nq,)


def _num_rel(t: _Triples, threshold: int) -> np.ndarray:
    return np.bincount(t.jq[t.jrel >= threshold], minlength=t.nq).astype(np.float64)  # (nq,)


def _per_relevant(x: np.ndarray, t: _Triples, threshold: int) -> np.ndarray:
    """x / R; 0 where R = 0 (those queries are left out of the measure anyway)."""
    r = _num_rel(t, threshold)  # (nq,)
    return np.divide(x, r, out=np.zeros(t.nq), where=r > 0)


def _ordinal(groups: np.ndarray) -> np.ndarray:
    """1-based position of each element within its run of equal values in a sorted array."""
    if len(groups) == 0:
        return np.zeros(0, np.int64)
    _, starts, inverse = np.unique(groups, return_index=True, return_inverse=True)
    return np.arange(len(groups)) - starts[inverse] + 1


def _success(t: _Triples, m: Measure) -> np.ndarray:
    return (_count(t, _within(t, m) & (t.rel >= m.rel)) > 0).astype(np.float64)


def _precision(t: _Triples, m: Measure) -> np.ndarray:
    return _count(t, _within(t, m) & (t.rel >= m.rel)) / m.cutoff


def _recall(t: _Triples, m: Measure) -> np.ndarray:
    return _per_relevant(_count(t, _within(t, m) & (t.rel >= m.rel)), t, m.rel)


def _judged(t: _Triples, m: Measure) -> np.ndarray:
    return _count(t, _within(t, m) & (t.rel >= 0)) / m.cutoff


def _reciprocal_rank(t: _Triples, m: Measure) -> np.ndarray:
    hit = _within(t, m) & (t.rel >= m.rel)
    first_q, first = np.unique(t.q[hit], return_index=True)  # rows are rank-sorted per query
    out = np.zeros(t.nq)
    out[first_q] = 1.0 / t.rank[hit][first]
    return out


def _average_precision(t: _Triples, m: Measure) -> np.ndarray:
    hit = _within(t, m) & (t.rel >= m.rel)
    q = t.q[hit]
    precision_at_hit = _ordinal(q) / t.rank[hit]  # (hits,) i-th relevant at rank r: i / r
    return _per_relevant(np.bincount(q, weights=precision_at_hit, minlength=t.nq), t, m.rel)


def _dcg(q: np.ndarray, rank: np.ndarray, rel: np.ndarray, gain: str, nq: int) -> np.ndarray:
    keep = rel > 0
    rel = rel[keep].astype(np.float64)
    g = rel if gain == "lin" else np.exp2(rel) - 1.0  # (n,)
    return np.bincount(q[keep], weights=g / np.log2(rank[keep] + 1.0), minlength=nq)  # (nq,)


def _ndcg(t: _Triples, m: Measure) -> np.ndarray:
    """nDCG = sum_{i<=k} gain(rel_i)/log2(i+1) over the run, divided by the same sum over the
    judgments sorted by relevance (the ideal ranking of ALL judged documents, retrieved or not)."""
    within = _within(t, m)
    dcg = _dcg(t.q[within], t.rank[within], t.rel[within], m.gain, t.nq)
    ideal_rank = _ordinal(t.jq)  # (judgments,) position in the relevance-sorted list
    keep = ideal_rank <= m.cutoff if m.cutoff is not None else slice(None)
    ideal = _dcg(t.jq[keep], ideal_rank[keep], t.jrel[keep], m.gain, t.nq)
    return np.divide(dcg, ideal, out=np.zeros(t.nq), where=ideal > 0)


_FAMILIES: dict[str, _Family] = {
    "Success": _Family(_success, ("rel",), True, "Success@k"),
    "P": _Family(_precision, ("rel",), True, "P@k"),
    "R": _Family(_recall, ("rel",), False, "R@k"),
    "RR": _Family(_reciprocal_rank, ("rel",), False, "RR[@k]"),
    "AP": _Family(_average_precision, ("rel",), False, "AP[@k]"),
    "nDCG": _Family(_ndcg, ("gain",), False, "nDCG[(gain=exp)][@k]"),
    "Judged": _Family(_judged, (), True, "Judged@k"),
}


# ----------------------------------------------------------------------------- evaluation


COVERAGE_COUNTS = ("queries_evaluated", "queries_without_positive", "judged_queries_absent_from_run",
                   "run_queries_not_in_qrels")


@dataclass(frozen=True)
class Coverage:
    """Which queries a run's means cover and why the others are left out: a mean alone can hide a
    run that skipped its hard queries, so every report carries these counts beside it."""

    judged_only: bool
    queries_evaluated: int
    queries_without_positive: int
    queries_without_positive_ids: tuple[str, ...]  # the first 50, sorted
    judged_queries_absent_from_run: int
    judged_queries_absent_from_run_ids: tuple[str, ...]  # the first 50, sorted
    run_queries_not_in_qrels: int
    excluded_by_measure: dict[str, int]  # measure -> queries it leaves out (only measures that leave some)
    queries_by_measure: dict[str, int]  # measure -> queries it averages (only measures that leave some out)

    def counts(self) -> dict[str, int]:
        """The :data:`COVERAGE_COUNTS`, as every metrics JSON writes them."""
        return {key: getattr(self, key) for key in COVERAGE_COUNTS}

    def query_count_fields(self) -> dict[str, int]:
        """``queries_evaluated[NAME]`` -> queries averaged, for each measure averaged over fewer queries than
        ``queries_evaluated``: flat JSON keys no reader takes for a measure (``parse_measure`` refuses them).
        Written only; a reader in code uses :attr:`queries_by_measure`."""
        return {f"queries_evaluated[{name}]": n for name, n in self.queries_by_measure.items()}

    def sentence(self) -> str:
        """What a run's mean covers: no query is left out unsaid."""
        return (f"{self.queries_evaluated} queries evaluated; {self.queries_without_positive} without a "
                f"positive (excluded); {self.judged_queries_absent_from_run} judged but absent from the run "
                f"(scored 0); {self.run_queries_not_in_qrels} run queries not in the qrels (ignored)")

    def to_json(self) -> dict:
        return {"judged_only": self.judged_only, "queries_evaluated": self.queries_evaluated,
                "queries_without_positive": self.queries_without_positive,
                "queries_without_positive_ids": list(self.queries_without_positive_ids),
                "judged_queries_absent_from_run": self.judged_queries_absent_from_run,
                "judged_queries_absent_from_run_ids": list(self.judged_queries_absent_from_run_ids),
                "run_queries_not_in_qrels": self.run_queries_not_in_qrels,
                "excluded_by_measure": dict(self.excluded_by_measure),
                "queries_by_measure": dict(self.queries_by_measure)}


@dataclass(frozen=True)
class EvalResult:
    """Means over evaluated queries, per-query values, and what was left out and why."""

    means: dict[str, float]
    per_query: dict[str, dict[str, float]]
    coverage: Coverage


def _listed(ids: list[str], limit: int = 50) -> list[str]:
    return sorted(ids)[:limit]


def _evaluated_queries(qrels: Qrels) -> list[str]:
    """Judged queries with a positive (relevance >= 1), in qrels order."""
    queries = [qid for qid, judged in qrels.items() if any(r >= 1 for r in judged.values())]
    if not queries:
        raise InputError("the qrels hold no query with a positive judgment (relevance >= 1)", field="qrels")
    return queries


def measure_run(qrels: Qrels, run: Run, measures: list[str], judged_only: bool = False) -> EvalResult:
    """Score ``run`` against ``qrels`` on ``measures`` (see the module docstring for every definition).

    Means and per-query values are keyed by the names as given. Evaluated queries are
    the judged ones with a positive (relevance >= 1); absent from the run they score 0.
    A measure with ``rel=t`` leaves out queries without a judgment >= t (its per-query
    entry is missing, ``coverage.excluded_by_measure`` counts them and
    ``coverage.queries_by_measure`` gives the number it averages; its mean is NaN when no
    query qualifies).
    """
    parsed = {name: parse_measure(name) for name in measures}
    queries = _evaluated_queries(qrels)
    evaluated = set(queries)
    no_positive = [qid for qid in qrels if qid not in evaluated]
    triples = _flatten(qrels, run, queries, judged_only)

    means: dict[str, float] = {}
    per_query: dict[str, dict[str, float]] = {qid: {} for qid in queries}
    excluded: dict[str, int] = {}
    for name, measure in parsed.items():
        values = _FAMILIES[measure.family].kernel(triples, measure)  # (nq,)
        defined = _num_rel(triples, measure.rel) > 0  # (nq,) always true for rel=1
        if not defined.all():
            excluded[name] = int((~defined).sum())
        means[name] = float(values[defined].mean()) if defined.any() else float("nan")
        for qid, value, ok in zip(queries, values.tolist(), defined.tolist()):
            if ok:
                per_query[qid][name] = value

    absent = [qid for qid in queries if qid not in run]
    ignored = [qid for qid in run if qid not in qrels]
    coverage = Coverage(judged_only, len(queries), len(no_positive), tuple(_listed(no_positive)), len(absent),
                        tuple(_listed(absent)), len(ignored), excluded,
                        {name: len(queries) - n for name, n in excluded.items()})
    return EvalResult(means, per_query, coverage)


def recall_curve(qrels: Qrels, run: Run, depth: int, judged_only: bool = False) -> np.ndarray:
    """Mean R@k for k = 1..depth over the evaluated queries, shape (depth,): same numbers as
    ``measure_run(..., ["R@k"])`` for each k, computed in one pass."""
    t = _flatten(qrels, run, _evaluated_queries(qrels), judged_only)
    hit = (t.rel >= 1) & (t.rank <= depth)
    share = _per_relevant(np.ones(t.nq), t, 1)  # (nq,) one positive found is worth 1/R of its query
    found = np.bincount(t.rank[hit] - 1, weights=share[t.q[hit]], minlength=depth)  # (depth,)
    return np.cumsum(found) / t.nq
