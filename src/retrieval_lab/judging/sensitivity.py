"""The judgments that matter: which unjudged documents could move a comparison of two runs, and how far.

Two runs are compared on a key measure (head - base, over the queries with a positive judgment).
A document neither run's judgments cover counts as not relevant (trec_eval's rule), so a comparison may
turn on documents nobody judged. For each unjudged document in either run's top ``depth`` this module
computes its *effect*: how much the mean difference would change if that document alone were judged
relevant (label ``relevant``) while the other unjudged documents stay non-relevant. A document high in
one run and absent or low in the other has a large effect; one at the same rank in both has none. The
documents, ordered by the size of their effect, are the judging queue.

The verdict's sensitivity to what is missing: the comparison (difference, simultaneous interval, verdict)
as it stands, and again if *every* unjudged document of the top ``depth`` were relevant, and if none were.
When the two verdicts differ, the comparison cannot be trusted until those documents are judged. (These
are two uniform scenarios, not the extremes over every labelling, which a mix could exceed.) Before and
after: the comparison and Judged@depth on the judgments there were before the session, and on those plus
the session's final labels.

Every number comes from the one metrics engine (:func:`metrics.measure_run`) and the one comparison
(:func:`comparison.compare_runs`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from ..comparison import compare_runs
from ..core.data import Qrels
from ..core.errors import InputError
from ..metrics import measure_run, parse_measure
from ..runs import Run, ranked


@dataclass(frozen=True)
class Standing:
    """The comparison on one set of judgments."""

    judgments: int  # judged (query, document) pairs of the considered queries
    queries: int  # queries with a positive judgment: those the measure averages
    base_mean: float
    head_mean: float
    difference: float  # head - base
    low: float  # its simultaneous interval (compare_runs: one measure, one family)
    high: float
    verdict: str
    judged_base: float  # mean Judged@depth of each run over the same queries
    judged_head: float

    def to_json(self) -> dict:
        return {"judgments": self.judgments, "queries": self.queries, "base_mean": self.base_mean,
                "head_mean": self.head_mean, "difference": self.difference, "ci_low": _finite(self.low),
                "ci_high": _finite(self.high), "verdict": self.verdict, "judged_base": self.judged_base,
                "judged_head": self.judged_head}


@dataclass(frozen=True)
class Candidate:
    """An unjudged document of either run's top ``depth`` and what judging it relevant would do."""

    query_id: str
    doc_id: str
    base_rank: int | None  # None: not in the base run's top depth
    head_rank: int | None
    effect: float  # change of the mean difference (head - base) were it alone relevant
    in_pool: bool  # judgeable in this session (the pool holds it)

    @property
    def pair(self) -> tuple[str, str]:
        return self.query_id, self.doc_id

    def to_json(self) -> dict:
        return {"query_id": self.query_id, "doc_id": self.doc_id, "base_rank": self.base_rank,
                "head_rank": self.head_rank, "effect": self.effect, "in_pool": self.in_pool}


@dataclass(frozen=True)
class Sensitivity:
    base: str
    head: str
    measure: str
    depth: int
    relevant: int  # the label an unjudged document is given in the "relevant" scenario and the effects
    before: Standing | None  # None: no query with a positive judgment, nothing to compare
    after: Standing | None
    if_all_relevant: Standing | None
    if_none_relevant: Standing | None
    candidates: tuple[Candidate, ...]  # largest effect first

    @property
    def difference_range(self) -> tuple[float, float] | None:
        ends = [s.difference for s in (self.if_all_relevant, self.if_none_relevant) if s is not None]
        return (min(ends), max(ends)) if ends else None

    @property
    def verdict_can_change(self) -> bool:
        """The two scenarios' verdicts differ, or differ from the current one: missing judgments can decide."""
        verdicts = {s.verdict for s in (self.after, self.if_all_relevant, self.if_none_relevant) if s is not None}
        return len(verdicts) > 1

    def to_json(self) -> dict:
        def standing(s: Standing | None) -> dict | None:
            return None if s is None else s.to_json()

        span = self.difference_range
        return {"base": self.base, "head": self.head, "measure": self.measure, "depth": self.depth,
                "relevant_label": self.relevant, "before": standing(self.before), "after": standing(self.after),
                "if_all_relevant": standing(self.if_all_relevant),
                "if_none_relevant": standing(self.if_none_relevant),
                "difference_range": None if span is None else list(span),
                "verdict_can_change": self.verdict_can_change, "unjudged": len(self.candidates),
                "not_in_pool": sum(not c.in_pool for c in self.candidates),
                "candidates": [c.to_json() for c in self.candidates]}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _top(run: Run, qid: str, depth: int) -> dict[str, int]:
    return {d: i for i, (d, _) in enumerate(ranked(run.get(qid, {}))[:depth], start=1)}


def standing(qrels: Qrels, base: Run, head: Run, measure: str, depth: int, ci_level: float, permutations: int,
             seed: int) -> Standing | None:
    """The comparison on ``qrels``; None when no query has a positive judgment (nothing to compare)."""
    if not any(r >= 1 for judged in qrels.values() for r in judged.values()):
        return None
    row = compare_runs(qrels, base, head, [measure], ci_level, permutations, seed).measures[measure]
    judged = f"Judged@{depth}"
    base_judged = measure_run(qrels, base, [judged]).means[judged]
    head_judged = measure_run(qrels, head, [judged]).means[judged]
    return Standing(sum(len(v) for v in qrels.values()), row.test.queries, row.baseline_mean, row.candidate_mean,
                    row.test.mean_difference, row.test.low, row.test.high, row.verdict("head", "base"),
                    base_judged, head_judged)


def _value(qid: str, judged: dict[str, int], run: Run, measure: str) -> float:
    return measure_run({qid: judged}, {qid: run.get(qid, {})}, [measure]).per_query[qid][measure]


def _defined(judged: dict[str, int], rel: int) -> bool:
    return any(r >= rel for r in judged.values())


def candidates(qrels: Qrels, base: Run, head: Run, measure: str, depth: int, queries: Iterable[str],
               relevant: int, pool: Collection[tuple[str, str]]) -> tuple[Candidate, ...]:
    """Every unjudged document of either run's top ``depth`` on ``queries``, by the size of its effect on the
    mean difference (then best rank, query, document). A query without a positive is not averaged now;
    judging one document relevant adds it to the mean, and the effect says what that does."""
    m = parse_measure(measure)
    queries = list(dict.fromkeys(queries))
    current = {q: qrels[q] for q in queries if q in qrels and _defined(qrels[q], m.rel)}
    diffs = {q: _value(q, j, head, measure) - _value(q, j, base, measure) for q, j in current.items()}
    # the mean over every query the measure averages now (those outside ``queries`` too)
    n, total = 0, 0.0
    if any(_defined(j, m.rel) for j in qrels.values()):
        base_values = measure_run(qrels, base, [measure]).per_query
        head_values = measure_run(qrels, head, [measure]).per_query
        averaged = [q for q, v in base_values.items() if measure in v]
        n, total = len(averaged), sum(head_values[q][measure] - base_values[q][measure] for q in averaged)
    found = []
    for qid in queries:
        judged = qrels.get(qid, {})
        in_base, in_head = _top(base, qid, depth), _top(head, qid, depth)
        for doc in dict.fromkeys([*in_base, *in_head]):
            if doc in judged:
                continue
            trial = {**judged, doc: relevant}
            if not _defined(trial, m.rel):
                effect = 0.0  # "relevant" is below the measure's threshold: nothing moves
            else:
                diff = _value(qid, trial, head, measure) - _value(qid, trial, base, measure)
                if qid in diffs:
                    effect = (diff - diffs[qid]) / n
                else:
                    effect = (total + diff) / (n + 1) - (total / n if n else 0.0)
            found.append(Candidate(qid, doc, in_base.get(doc), in_head.get(doc), effect, (qid, doc) in pool))
    best = {c.pair: min(r for r in (c.base_rank, c.head_rank) if r is not None) for c in found}
    return tuple(sorted(found, key=lambda c: (-abs(c.effect), best[c.pair], c.query_id, c.doc_id)))


def scenario(qrels: Qrels, found: Iterable[Candidate], label: int) -> Qrels:
    """``qrels`` with every candidate judged ``label``."""
    out = {q: dict(j) for q, j in qrels.items()}
    for c in found:
        out.setdefault(c.query_id, {})[c.doc_id] = label
    return out


def sensitivity(base: Run, head: Run, before: Qrels, after: Qrels, measure: str, depth: int, relevant: int,
                not_relevant: int, queries: Iterable[str], pool: Collection[tuple[str, str]],
                ci_level: float, permutations: int, seed: int, names: tuple[str, str] = ("base", "head")
                ) -> Sensitivity:
    """The judging queue and the verdict's sensitivity for ``base`` against ``head`` (module docstring)."""
    parsed = parse_measure(measure)
    if depth < 1:
        raise InputError(f"depth must be positive, got {depth}", field="judge.depth")
    queries = list(dict.fromkeys([*queries, *after]))
    found = candidates(after, base, head, parsed.name, depth, queries, relevant, pool)

    def judge(qrels: Qrels) -> Standing | None:
        return standing(qrels, base, head, parsed.name, depth, ci_level, permutations, seed)

    return Sensitivity(names[0], names[1], parsed.name, depth, relevant, judge(before), judge(after),
                       judge(scenario(after, found, relevant)), judge(scenario(after, found, not_relevant)), found)
