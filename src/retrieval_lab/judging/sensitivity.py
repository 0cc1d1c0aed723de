"""The judgments that matter: which unjudged documents could move a comparison of two runs, and how far.

Two runs are compared on a key measure (head - base, over the queries with a positive judgment).
A document neither run's judgments cover counts as not relevant (trec_eval's rule), so a comparison may
turn on documents nobody judged. For each unjudged document in either run's top ``depth`` this module
computes its *effect*: how much the mean difference would change if that document alone were judged
relevant (label ``relevant``) while the other unjudged documents stay non-relevant. A document high in
one run and absent or low in the other has a large effect; one at the same rank in both has none. The
documents, ordered by the size of their effect, are the judging queue.

The verdict's sensitivity to what is missing: the comparison (difference, simultaneous interval, verdict)
as it stands, and again under four labellings of the unjudged documents of the top ``depth``: every one
relevant, none relevant, and the two that favour one side (relevant exactly the documents whose effect
favours head, or base). The range of the difference is the span over the four; when their verdicts
differ from each other or from the current one, the comparison turns on documents nobody has judged.
(The measures are not additive in the documents, so a labelling mixing otherwise could in rare cases go
beyond the span: it is a range of these labellings, not a bound over all of them.) Before and after: the
comparison and Judged@depth on the judgments there were before the session, and on those plus the
session's final labels.

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
    if_favouring_head: Standing | None  # relevant: the unjudged documents whose effect is > 0
    if_favouring_base: Standing | None  # relevant: those whose effect is < 0
    candidates: tuple[Candidate, ...]  # largest effect first

    @property
    def scenarios(self) -> tuple[Standing, ...]:
        return tuple(s for s in (self.if_all_relevant, self.if_none_relevant, self.if_favouring_head,
                                 self.if_favouring_base) if s is not None)

    @property
    def difference_range(self) -> tuple[float, float] | None:
        ends = [s.difference for s in self.scenarios]
        return (min(ends), max(ends)) if ends else None

    @property
    def verdict_can_change(self) -> bool:
        """The labellings' verdicts differ from each other or from the current one: missing judgments decide."""
        verdicts = {s.verdict for s in (self.after, *self.scenarios) if s is not None}
        return len(verdicts) > 1

    def to_json(self) -> dict:
        def standing(s: Standing | None) -> dict | None:
            return None if s is None else s.to_json()

        span = self.difference_range
        return {"base": self.base, "head": self.head, "measure": self.measure, "depth": self.depth,
                "relevant_label": self.relevant, "before": standing(self.before), "after": standing(self.after),
                "if_all_relevant": standing(self.if_all_relevant),
                "if_none_relevant": standing(self.if_none_relevant),
                "if_favouring_head": standing(self.if_favouring_head),
                "if_favouring_base": standing(self.if_favouring_base),
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
                    row.test.mean_difference, row.test.low, row.test.high, row.verdict(),
                    base_judged, head_judged)


def _value(qid: str, judged: dict[str, int], run: Run, measure: str) -> float:
    return measure_run({qid: judged}, {qid: run.get(qid, {})}, [measure]).per_query[qid][measure]


def _defined(judged: dict[str, int], rel: int) -> bool:
    return any(r >= rel for r in judged.values())


_Trials = tuple[float | None, tuple[tuple[str, int | None, int | None, float | None], ...]]


def _trials(qid: str, judged: dict[str, int], base: Run, head: Run, measure: str, rel: int, depth: int,
            relevant: int) -> _Trials:
    """One query's difference now (None: not averaged) and, per unjudged document of either top ``depth``,
    its ranks and the query's difference were it alone relevant (None: still not averaged)."""
    now = (_value(qid, judged, head, measure) - _value(qid, judged, base, measure)) if _defined(judged, rel) else None
    in_base, in_head = _top(base, qid, depth), _top(head, qid, depth)
    out = []
    for doc in dict.fromkeys([*in_base, *in_head]):
        if doc in judged:
            continue
        trial = {**judged, doc: relevant}
        diff = (_value(qid, trial, head, measure) - _value(qid, trial, base, measure)) if _defined(trial, rel) else None
        out.append((doc, in_base.get(doc), in_head.get(doc), diff))
    return now, tuple(out)


def candidates(qrels: Qrels, base: Run, head: Run, measure: str, depth: int, queries: Iterable[str],
               relevant: int, pool: Collection[tuple[str, str]], memo: dict | None = None) -> tuple[Candidate, ...]:
    """Every unjudged document of either run's top ``depth`` on ``queries``, by the size of its effect on the
    mean difference (then best rank, query, document). A query without a positive is not averaged now;
    judging one document relevant adds it to the mean, and the effect says what that does.

    ``memo`` (a dict kept by the caller for these runs, measure, depth and label): each query's trials are
    reused while its judgments are unchanged, so a label costs the measures of one query, not of all.
    """
    m = parse_measure(measure)
    # the mean over every query the measure averages now (those outside ``queries`` too)
    n, total = 0, 0.0
    if any(_defined(j, m.rel) for j in qrels.values()):
        base_values = measure_run(qrels, base, [measure]).per_query
        head_values = measure_run(qrels, head, [measure]).per_query
        averaged = [q for q, v in base_values.items() if measure in v]
        n, total = len(averaged), sum(head_values[q][measure] - base_values[q][measure] for q in averaged)
    memo = {} if memo is None else memo
    found = []
    for qid in dict.fromkeys(queries):
        judged = qrels.get(qid, {})
        key = tuple(sorted(judged.items()))
        hit = memo.get(qid)
        if hit is None or hit[0] != key:
            hit = memo[qid] = (key, _trials(qid, judged, base, head, m.name, m.rel, depth, relevant))
        now, trials = hit[1]
        for doc, base_rank, head_rank, diff in trials:
            if diff is None:
                effect = 0.0  # "relevant" is below the measure's threshold: nothing moves
            elif now is not None:
                effect = (diff - now) / n
            else:
                effect = (total + diff) / (n + 1) - (total / n if n else 0.0)
            found.append(Candidate(qid, doc, base_rank, head_rank, effect, (qid, doc) in pool))
    best = {c.pair: min(r for r in (c.base_rank, c.head_rank) if r is not None) for c in found}
    return tuple(sorted(found, key=lambda c: (-abs(c.effect), best[c.pair], c.query_id, c.doc_id)))


def scenario(qrels: Qrels, found: Iterable[Candidate], relevant: int, not_relevant: int,
             which=lambda c: True) -> Qrels:
    """``qrels`` with every candidate judged: ``relevant`` where ``which(candidate)``, else ``not_relevant``."""
    out = {q: dict(j) for q, j in qrels.items()}
    for c in found:
        out.setdefault(c.query_id, {})[c.doc_id] = relevant if which(c) else not_relevant
    return out


def sensitivity(base: Run, head: Run, before: Qrels, after: Qrels, measure: str, depth: int, relevant: int,
                not_relevant: int, queries: Iterable[str], pool: Collection[tuple[str, str]],
                ci_level: float, permutations: int, seed: int, names: tuple[str, str] = ("base", "head"),
                memo: dict | None = None) -> Sensitivity:
    """The judging queue and the verdict's sensitivity for ``base`` against ``head`` (module docstring)."""
    parsed = parse_measure(measure)
    if depth < 1:
        raise InputError(f"depth must be positive, got {depth}", field="judge.depth")
    queries = list(dict.fromkeys([*queries, *after]))
    found = candidates(after, base, head, parsed.name, depth, queries, relevant, pool, memo)

    def judge(qrels: Qrels) -> Standing | None:
        return standing(qrels, base, head, parsed.name, depth, ci_level, permutations, seed)

    def labelled(which) -> Standing | None:
        return judge(scenario(after, found, relevant, not_relevant, which))

    return Sensitivity(names[0], names[1], parsed.name, depth, relevant, judge(before), judge(after),
                       labelled(lambda c: True), labelled(lambda c: False), labelled(lambda c: c.effect > 0),
                       labelled(lambda c: c.effect < 0), found)
