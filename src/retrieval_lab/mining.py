"""Negative mining from a run (stage ``mine``), and the audit that every mined file must pass.

Mining reads only a run, the qrels and the prepared dataset's corpus ids and
families. For each training query it ranks the *pool* (the documents a training
pair may use), removes every annotated positive of the query by ID (rel > 0 in
any split), and picks negatives by strategy:

* ``hard``: pool ranks ``range_min..range_max`` (ranks count every pool document of
  the run, positives included, so rank 4 means "fourth in the pool ranking"),
  optionally only those scoring below ``(1 - margin) x`` the query's lowest
  positive score; ``count`` of them drawn uniformly with a per-query seed.
* ``random``: ``count`` documents drawn uniformly from the whole pool.

The pool leaves out documents that would leak validation data into training:
those relevant to any val query (SciFact shares one corpus between splits) and,
for a family split, every document of a family with no training query (val and
test families alike: a query's family is in queries.jsonl, no label is needed);
and documents with no text (an empty negative teaches nothing). The test qrels are
not in the prepared folder at all: mining cannot read them.
"""

from __future__ import annotations

import bisect
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from .core.data import SPLIT_FILE, Dataset, positives
from .core.errors import InputError
from .core.params import MineParams
from .core.parse import json_loads
from .negatives import Candidate, MinedQuery, read_negatives, write_mined
from .runs import Run, ranked

HELDOUT_SPLITS = ("val",)  # the test qrels live outside the prepared folder


class MiningAuditError(Exception):
    """A mined negatives file failed its audit (a negative outside the pool or an annotated positive)."""

    def __init__(self, audit: Audit):
        self.audit = audit
        if not audit.failures:
            super().__init__(f"mining audit failed: {NOTHING_AUDITED}")
            return
        first = audit.failures[0]
        super().__init__(f"mining audit failed: {len(audit.failures)} problem(s); first: query "
                         f"{first.query_id!r} document {first.doc_id!r}: {first.problem}")


# ----------------------------------------------------------------------------- the pool


@dataclass(frozen=True)
class Pool:
    documents: frozenset[str]
    excluded: dict[str, str]  # document id -> why it is not in the pool
    split_mode: str
    heldout_families: frozenset[str]


def split_mode(dataset: Dataset) -> str:
    """``family`` or ``given`` from the prepared dataset's split.json (``unknown`` without one)."""
    path = Path(dataset.path) / SPLIT_FILE
    if not path.exists():
        return "unknown"
    try:
        mode = json_loads(path.read_text(encoding="utf-8"), str(path)).get("mode")
    except (json.JSONDecodeError, AttributeError, UnicodeDecodeError) as exc:
        raise InputError(f"unreadable split file ({exc})", str(path)) from None
    if not isinstance(mode, str):
        raise InputError("missing or non-string split mode", str(path), field="mode")
    return mode


def mining_pool(dataset: Dataset) -> Pool:
    """Documents a training pair may use: no held-out family (family split), nothing relevant to val."""
    mode = split_mode(dataset)
    heldout_families: set[str] = set()
    if mode == "family":
        trained = dataset.qrels.get("train", {})
        heldout_families = {query.family for qid, query in dataset.queries.items()
                            if qid not in trained and query.family is not None}
    excluded: dict[str, str] = {}
    for split in HELDOUT_SPLITS:
        for qid, judged in sorted(dataset.qrels.get(split, {}).items()):
            for did in sorted(positives(judged)):
                excluded.setdefault(did, f"relevant to {split} query {qid!r}")
    for did, doc in dataset.corpus.items():
        if doc.family in heldout_families:
            excluded.setdefault(did, f"in held-out family {doc.family!r}")
        elif not doc.content():
            excluded.setdefault(did, "no text")
    return Pool(frozenset(set(dataset.corpus) - set(excluded)), excluded, mode, frozenset(heldout_families))


def annotated_positives(dataset: Dataset) -> dict[str, set[str]]:
    """Query id -> every document judged relevant (rel > 0) to it, in any split."""
    out: dict[str, set[str]] = {}
    for qrels in dataset.qrels.values():
        for qid, judged in qrels.items():
            out.setdefault(qid, set()).update(positives(judged))
    return out


# ----------------------------------------------------------------------------- strategies


def _margin_ceiling(lowest: float | None, params: MineParams) -> float | None:
    """Scores at or above ``(1 - margin) x`` the lowest positive's are too close to be sure negatives."""
    return None if params.margin is None or lowest is None else (1 - params.margin) * lowest


def _pool_ranking(run: Run, qid: str, pool: Pool) -> list[Candidate]:
    """The run's ranking of ``qid`` restricted to the pool, ranks renumbered from 1."""
    return [Candidate(d, r, s) for r, (d, s) in
            enumerate((item for item in ranked(run.get(qid, {})) if item[0] in pool.documents), 1)]


def _window(ranking: list[Candidate], positive: set[str], params: MineParams) -> list[Candidate]:
    return [c for c in ranking if params.range_min <= c.rank <= params.range_max and c.id not in positive]


def _select_hard(ranking: list[Candidate], pool_docs: list[str], positive: set[str], lowest: float | None,
                 params: MineParams, rng: random.Random) -> list[Candidate]:
    ceiling = _margin_ceiling(lowest, params)
    eligible = [c for c in _window(ranking, positive, params) if ceiling is None or c.score < ceiling]
    return eligible if len(eligible) <= params.count else rng.sample(eligible, params.count)


def margin_drops(run: Run, dataset: Dataset, params: MineParams) -> dict:
    """What ``mine.margin`` kept out of the hard window: per query, the candidates scoring at or above
    ``(1 - margin) x`` its lowest positive score (likely unannotated positives: the NV-Retriever rule)."""
    if params.margin is None:
        return {"margin": None, "dropped": 0, "queries": 0, "by_query": {}}
    pool = mining_pool(dataset)
    relevant = annotated_positives(dataset)
    by_query = {}
    for qid in sorted(dataset.qrels.get("train", {})):
        ranking = _pool_ranking(run, qid, pool)
        scores = [c.score for c in ranking if c.id in relevant.get(qid, set())]
        ceiling = _margin_ceiling(min(scores) if scores else None, params)
        dropped = [c.to_json() for c in _window(ranking, relevant.get(qid, set()), params)
                   if ceiling is not None and c.score >= ceiling]
        if dropped:
            by_query[qid] = {"ceiling": ceiling, "dropped": dropped}
    return {"margin": params.margin, "rule": "window candidate scoring >= (1 - margin) x the lowest positive score",
            "dropped": sum(len(v["dropped"]) for v in by_query.values()), "queries": len(by_query),
            "by_query": by_query}


class _LazyDifference(Sequence):
    """``[d for d in ordered if d not in removed]`` without building it: the pool minus a query's
    positives costs O(positives) per query, not O(corpus)."""

    def __init__(self, ordered: list[str], removed: set[str]):
        self._ordered = ordered
        # positions of the removed documents in ``ordered`` (a sorted list), ascending
        self._gaps = sorted(i for d in removed if (i := bisect.bisect_left(ordered, d)) < len(ordered)
                            and ordered[i] == d)

    def __len__(self) -> int:
        return len(self._ordered) - len(self._gaps)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError(k)
        # the k-th kept item sits at k + (number of removed positions at or before it)
        position = k
        for gap in self._gaps:
            if gap <= position:
                position += 1
            else:
                break
        return self._ordered[position]


def _select_random(ranking: list[Candidate], pool_docs: list[str], positive: set[str], lowest: float | None,
                   params: MineParams, rng: random.Random) -> list[Candidate]:
    by_id = {c.id: c for c in ranking}
    eligible = _LazyDifference(pool_docs, positive)
    # random.sample reads only the items it draws (len(eligible) > count): the same draws as on a list
    chosen = list(eligible) if len(eligible) <= params.count else rng.sample(eligible, params.count)
    return [by_id.get(d, Candidate(d, None, None)) for d in chosen]


STRATEGIES: dict[str, Callable[..., list[Candidate]]] = {"hard": _select_hard, "random": _select_random}


def check_strategy(name: str) -> None:
    if name not in STRATEGIES:
        raise InputError(f"unknown strategy {name!r} (choices: {', '.join(sorted(STRATEGIES))})",
                         field="--strategy")


# ----------------------------------------------------------------------------- mining


def mine(run: Run, dataset: Dataset, params: MineParams, strategy: str) -> list[MinedQuery]:
    """One record per training query with a positive.

    ``negatives`` are sorted by pool rank (rank and score are None for a random negative
    the run never retrieved); ``lowest_positive_score`` is the run's score of the query's
    weakest retrieved positive (None if none was).
    """
    check_strategy(strategy)
    if "train" not in dataset.qrels:
        raise InputError("the dataset has no train split", str(Path(dataset.path) / "qrels" / "train.tsv"))
    pool = mining_pool(dataset)
    pool_docs = sorted(pool.documents)
    relevant = annotated_positives(dataset)
    records = []
    for qid in sorted(dataset.qrels["train"]):
        train_positives = tuple(sorted(positives(dataset.qrels["train"][qid])))
        if not train_positives:
            continue
        positive = relevant[qid]
        ranking = _pool_ranking(run, qid, pool)
        scores = [c.score for c in ranking if c.id in positive]
        lowest = min(scores) if scores else None
        rng = random.Random(f"{params.seed}:{qid}")  # per query: independent of the other queries
        chosen = STRATEGIES[strategy](ranking, pool_docs, positive, lowest, params, rng)
        chosen = sorted(chosen, key=lambda c: (c.rank is None, c.rank or 0, c.id))
        records.append(MinedQuery(qid, train_positives, lowest, tuple(chosen)))
    return records


def triplets(records: list[MinedQuery], seed: int) -> list[tuple[str, str, str]]:
    """(query, positive, negative) rows, the shape a sentence-transformers MNRL recipe trains on.

    One row per positive of each mined record, its negative drawn uniformly from the
    record's negatives by one generator seeded with ``seed``, records in file order.
    A record without negatives gives no row (``mine`` reports it as a shortfall).
    """
    rng = random.Random(seed)
    rows = []
    for record in records:
        ids = [n.id for n in record.negatives]
        if ids:
            rows += [(record.query_id, p, rng.choice(ids)) for p in sorted(record.positives)]
    return rows


# ----------------------------------------------------------------------------- the audit


NOTHING_AUDITED = "no query's negatives to audit: an audit of nothing cannot pass"


class Check(Enum):
    """What a failed negative broke; the value is the failure's text."""

    NOT_TRAINING_QUERY = "not a training query"
    UNKNOWN_DOCUMENT = "unknown document"
    ANNOTATED_POSITIVE = "annotated positive of this query"
    OUTSIDE_POOL = "outside the mining pool"
    REPEATED = "repeated negative"


@dataclass(frozen=True)
class Failure:
    check: Check
    query_id: str
    doc_id: str | None
    line: int | None  # of negatives.jsonl; None for records mined in memory
    why: str | None = None  # e.g. why a document is outside the pool

    @property
    def problem(self) -> str:
        return self.check.value + (f" ({self.why})" if self.why else "")

    def to_json(self) -> dict:
        return {"query_id": self.query_id, "doc_id": self.doc_id, "line": self.line, "problem": self.problem}


@dataclass
class Audit:
    """What :func:`audit_negatives` found; ``to_json`` is mining-audit.json."""

    strategy: str | None
    count: int | None
    queries: int
    negatives: int
    false_negatives: int  # negatives that are annotated positives of their query
    failures: list[Failure]
    shortfall: dict[str, int]  # query -> negatives missing below ``count``
    suspicious: list[dict]
    queries_without_positive_score: int
    train_queries_not_mined: list[str]
    pool: Pool
    per_query: dict[str, list[dict]]
    run: str | None = None  # the run the negatives were mined from (mine_to_dir)
    params: MineParams | None = None
    margin_dropped: dict | None = None

    @property
    def passed(self) -> bool:
        return self.queries > 0 and not self.failures  # an empty file shows nothing, so it fails closed

    def checks(self) -> dict:
        return {"all_negatives_in_pool": not any(f.check is Check.OUTSIDE_POOL for f in self.failures),
                "no_annotated_positive": self.false_negatives == 0,
                "false_negative_fraction": self.false_negatives / self.negatives if self.negatives else 0.0}

    def to_json(self) -> dict:
        pool = self.pool
        out = {
            "passed": self.passed,
            "source": self.run,
            "strategy": self.strategy,
            "count": self.count,
            "queries": self.queries,
            "negatives": self.negatives,
            "failures": [f.to_json() for f in self.failures],
            "checks": self.checks(),
            "shortfall": {"queries": len(self.shortfall), "missing_negatives": sum(self.shortfall.values()),
                          "by_query": self.shortfall},
            "suspicious": {"count": len(self.suspicious), "negatives": self.suspicious,
                           "rule": "negative score >= the query's lowest positive score (review by hand)"},
            "queries_without_positive_score": self.queries_without_positive_score,
            "train_queries_not_mined": self.train_queries_not_mined,
            "pool": {"split_mode": pool.split_mode, "documents": len(pool.documents),
                     "excluded": len(pool.excluded), "heldout_families": len(pool.heldout_families)},
            "per_query": self.per_query,
        }
        if self.params is not None:
            p = self.params
            out["params"] = {"seed": p.seed, "source": p.source, "count": p.count, "range_min": p.range_min,
                             "range_max": p.range_max, "margin": p.margin}
        if self.margin_dropped is not None:
            out["margin_dropped"] = self.margin_dropped
        return out


def audit_negatives(negatives: str | Path | list[MinedQuery], dataset: Dataset, count: int | None = None,
                    strategy: str | None = None) -> Audit:
    """Check mined negatives against the dataset, independently of how they were mined.

    Failures (``passed`` false): a negative outside the pool (held-out family or
    relevant to a val/test query), an annotated positive of its query (so the
    false-negative fraction w.r.t. the annotations is 0 exactly when this passes),
    an unknown document, a duplicate, a query that is not a training query.
    Reported, not failed: ``shortfall`` (queries with fewer than ``count``
    negatives) and ``suspicious`` negatives scoring >= the query's lowest positive.
    """
    records = negatives if isinstance(negatives, list) else read_negatives(negatives)
    pool = mining_pool(dataset)
    relevant = annotated_positives(dataset)
    train = dataset.qrels.get("train", {})
    failures, suspicious, shortfall, per_query = [], [], {}, {}
    total = false_negatives = 0
    for record in records:
        qid = record.query_id
        if qid not in train:
            failures.append(Failure(Check.NOT_TRAINING_QUERY, qid, None, record.line))
        seen = set()
        for neg in record.negatives:
            did = neg.id
            total += 1
            if did not in dataset.corpus:
                failures.append(Failure(Check.UNKNOWN_DOCUMENT, qid, did, record.line))
            elif did in relevant.get(qid, set()):
                false_negatives += 1
                failures.append(Failure(Check.ANNOTATED_POSITIVE, qid, did, record.line))
            elif did not in pool.documents:
                failures.append(Failure(Check.OUTSIDE_POOL, qid, did, record.line, pool.excluded[did]))
            if did in seen:
                failures.append(Failure(Check.REPEATED, qid, did, record.line))
            seen.add(did)
            lowest = record.lowest_positive_score
            if lowest is not None and neg.score is not None and neg.score >= lowest:
                suspicious.append({"query_id": qid, "doc_id": did, "rank": neg.rank,
                                   "score": neg.score, "lowest_positive_score": lowest})
        if count is not None and len(record.negatives) < count:
            shortfall[qid] = count - len(record.negatives)
        per_query[qid] = [neg.to_json() for neg in record.negatives]
    return Audit(strategy, count, len(records), total, false_negatives, failures, shortfall, suspicious,
                 sum(1 for r in records if r.lowest_positive_score is None),
                 sorted(set(train) - {r.query_id for r in records}), pool, per_query)


def mine_to_dir(run: Run, dataset: Dataset, params: MineParams, strategy: str, out_dir: str | Path,
                run_path: str | None = None) -> Audit:
    """Mine, audit, and write ``out_dir`` only if the audit passes (else raise MiningAuditError)."""
    records = mine(run, dataset, params, strategy)
    audit = audit_negatives(records, dataset, params.count, strategy)
    audit.run, audit.params = run_path, params
    if strategy == "hard":
        audit.margin_dropped = margin_drops(run, dataset, params)
    if not audit.passed:
        raise MiningAuditError(audit)
    write_mined(out_dir, records, audit.to_json())
    return audit
