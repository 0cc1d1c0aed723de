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
from pathlib import Path

from .core.atomic import atomic_path, write_json
from .core.data import SPLIT_FILE, Dataset, json_objects, positives
from .core.errors import InputError
from .core.params import MineParams
from .runs import Run, ranked

HELDOUT_SPLITS = ("val",)  # the test qrels live outside the prepared folder
NEGATIVES_FILE = "negatives.jsonl"
AUDIT_FILE = "mining-audit.json"


class MiningAuditError(Exception):
    """A mined negatives file failed its audit (a negative outside the pool or an annotated positive)."""

    def __init__(self, audit: dict):
        self.audit = audit
        first = audit["failures"][0]
        super().__init__(f"mining audit failed: {len(audit['failures'])} problem(s); first: query "
                         f"{first['query_id']!r} document {first.get('doc_id')!r}: {first['problem']}")


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
        mode = json.loads(path.read_text(encoding="utf-8")).get("mode")
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

Candidate = dict  # {"id": str, "rank": int | None, "score": float | None}


def _margin_ceiling(lowest: float | None, params: MineParams) -> float | None:
    """Scores at or above ``(1 - margin) x`` the lowest positive's are too close to be sure negatives."""
    return None if params.margin is None or lowest is None else (1 - params.margin) * lowest


def _window(ranking: list[Candidate], positive: set[str], params: MineParams) -> list[Candidate]:
    return [c for c in ranking if params.range_min <= c["rank"] <= params.range_max and c["id"] not in positive]


def _select_hard(ranking: list[Candidate], pool_docs: list[str], positive: set[str], lowest: float | None,
                 params: MineParams, rng: random.Random) -> list[Candidate]:
    ceiling = _margin_ceiling(lowest, params)
    eligible = [c for c in _window(ranking, positive, params) if ceiling is None or c["score"] < ceiling]
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
        ranking = [{"id": d, "rank": r, "score": s} for r, (d, s) in
                   enumerate((item for item in ranked(run.get(qid, {})) if item[0] in pool.documents), 1)]
        scores = [c["score"] for c in ranking if c["id"] in relevant.get(qid, set())]
        ceiling = _margin_ceiling(min(scores) if scores else None, params)
        dropped = [c for c in _window(ranking, relevant.get(qid, set()), params)
                   if ceiling is not None and c["score"] >= ceiling]
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
    by_id = {c["id"]: c for c in ranking}
    eligible = _LazyDifference(pool_docs, positive)
    # random.sample reads only the items it draws (len(eligible) > count): the same draws as on a list
    chosen = list(eligible) if len(eligible) <= params.count else rng.sample(eligible, params.count)
    return [by_id.get(d, {"id": d, "rank": None, "score": None}) for d in chosen]


STRATEGIES: dict[str, Callable[..., list[Candidate]]] = {"hard": _select_hard, "random": _select_random}


def check_strategy(name: str) -> None:
    if name not in STRATEGIES:
        raise InputError(f"unknown strategy {name!r} (choices: {', '.join(sorted(STRATEGIES))})",
                         field="--strategy")


# ----------------------------------------------------------------------------- mining


def mine(run: Run, dataset: Dataset, params: MineParams, strategy: str) -> list[dict]:
    """One record per training query with a positive: ``{query_id, positives, lowest_positive_score, negatives}``.

    ``negatives`` are ``{id, rank, score}`` sorted by pool rank (rank and score are
    null for a random negative the run never retrieved); ``lowest_positive_score``
    is the run's score of the query's weakest retrieved positive (null if none was).
    """
    check_strategy(strategy)
    if "train" not in dataset.qrels:
        raise InputError("the dataset has no train split", str(Path(dataset.path) / "qrels" / "train.tsv"))
    pool = mining_pool(dataset)
    pool_docs = sorted(pool.documents)
    relevant = annotated_positives(dataset)
    records = []
    for qid in sorted(dataset.qrels["train"]):
        train_positives = sorted(positives(dataset.qrels["train"][qid]))
        if not train_positives:
            continue
        positive = relevant[qid]
        ranking = [{"id": d, "rank": r, "score": s} for r, (d, s) in
                   enumerate((item for item in ranked(run.get(qid, {})) if item[0] in pool.documents), 1)]
        scores = [c["score"] for c in ranking if c["id"] in positive]
        lowest = min(scores) if scores else None
        rng = random.Random(f"{params.seed}:{qid}")  # per query: independent of the other queries
        chosen = STRATEGIES[strategy](ranking, pool_docs, positive, lowest, params, rng)
        chosen = sorted(chosen, key=lambda c: (c["rank"] is None, c["rank"] or 0, c["id"]))
        records.append({"query_id": qid, "positives": train_positives, "lowest_positive_score": lowest,
                        "negatives": chosen})
    return records


def triplets(records: list[dict], seed: int) -> list[tuple[str, str, str]]:
    """(query, positive, negative) rows, the shape a sentence-transformers MNRL recipe trains on.

    One row per positive of each mined record, its negative drawn uniformly from the
    record's negatives by one generator seeded with ``seed``, records in file order.
    A record without negatives gives no row (``mine`` reports it as a shortfall).
    """
    rng = random.Random(seed)
    rows = []
    for record in records:
        ids = [n["id"] for n in record["negatives"]]
        if ids:
            rows += [(record["query_id"], p, rng.choice(ids)) for p in sorted(record["positives"])]
    return rows


# ----------------------------------------------------------------------------- the file


def read_negatives(path: str | Path) -> list[dict]:
    """Read negatives.jsonl, checking every line's fields (errors name file, line and field)."""
    path = Path(path)
    records, seen = [], {}
    for number, obj in json_objects(path):
        qid = obj.get("query_id")
        if not isinstance(qid, str) or not qid:
            raise InputError("expected a non-empty string", str(path), number, "query_id")
        if qid in seen:
            raise InputError(f"query {qid!r} repeated (first on line {seen[qid]})", str(path), number, "query_id")
        seen[qid] = number
        if not isinstance(obj.get("positives"), list) or not all(isinstance(d, str) for d in obj["positives"]):
            raise InputError("expected a list of document ids", str(path), number, "positives")
        lowest = obj.get("lowest_positive_score")
        if lowest is not None and not isinstance(lowest, (int, float)):
            raise InputError("expected a number or null", str(path), number, "lowest_positive_score")
        negatives = obj.get("negatives")
        if not isinstance(negatives, list):
            raise InputError("expected a list", str(path), number, "negatives")
        for i, neg in enumerate(negatives):
            if not isinstance(neg, dict) or not isinstance(neg.get("id"), str):
                raise InputError("expected an object with a string id", str(path), number, f"negatives[{i}].id")
            for key in ("rank", "score"):
                value = neg.get(key)
                if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                    raise InputError("expected a number or null", str(path), number, f"negatives[{i}].{key}")
        obj["line"] = number
        records.append(obj)
    return records


def read_strategy(negatives_path: str | Path) -> str | None:
    """The strategy recorded in the audit beside a negatives file (None without an audit)."""
    audit = Path(negatives_path).with_name(AUDIT_FILE)
    if not audit.is_file():
        return None
    try:
        return json.loads(audit.read_text(encoding="utf-8")).get("strategy")
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON ({exc.msg})", str(audit), exc.lineno) from None


def write_mined(out_dir: str | Path, records: list[dict], audit: dict) -> None:
    """``negatives.jsonl`` + ``mining-audit.json``, renamed into place together."""
    with atomic_path(out_dir, is_dir=True) as tmp:
        with open(tmp / NEGATIVES_FILE, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps({k: v for k, v in r.items() if k != "line"}, ensure_ascii=False) + "\n"
                          for r in records)
        write_json(tmp / AUDIT_FILE, audit)


# ----------------------------------------------------------------------------- the audit


def audit_negatives(negatives: str | Path | list[dict], dataset: Dataset, count: int | None = None,
                    strategy: str | None = None) -> dict:
    """Check mined negatives against the dataset, independently of how they were mined.

    Failures (``passed`` false): a negative outside the pool (held-out family or
    relevant to a val/test query), an annotated positive of its query (so the
    false-negative fraction w.r.t. the annotations is 0 exactly when this passes),
    an unknown document, a duplicate, a query that is not a training query.
    Reported, not failed: ``shortfall`` (queries with fewer than ``count``
    negatives) and ``suspicious`` negatives scoring >= the query's lowest positive.
    """
    source = str(negatives) if not isinstance(negatives, list) else "<records>"
    records = negatives if isinstance(negatives, list) else read_negatives(negatives)
    pool = mining_pool(dataset)
    relevant = annotated_positives(dataset)
    train = dataset.qrels.get("train", {})
    failures, suspicious, shortfall, per_query = [], [], {}, {}
    total = false_negatives = 0

    def fail(record, did, problem):
        failures.append({"query_id": record["query_id"], "doc_id": did, "line": record.get("line"),
                         "problem": problem})

    for record in records:
        qid = record["query_id"]
        if qid not in train:
            fail(record, None, "not a training query")
        seen = set()
        for neg in record["negatives"]:
            did = neg["id"]
            total += 1
            if did not in dataset.corpus:
                fail(record, did, "unknown document")
            elif did in relevant.get(qid, set()):
                false_negatives += 1
                fail(record, did, "annotated positive of this query")
            elif did not in pool.documents:
                fail(record, did, f"outside the mining pool ({pool.excluded[did]})")
            if did in seen:
                fail(record, did, "repeated negative")
            seen.add(did)
            lowest = record.get("lowest_positive_score")
            if lowest is not None and neg.get("score") is not None and neg["score"] >= lowest:
                suspicious.append({"query_id": qid, "doc_id": did, "rank": neg.get("rank"),
                                   "score": neg["score"], "lowest_positive_score": lowest})
        if count is not None and len(record["negatives"]) < count:
            shortfall[qid] = count - len(record["negatives"])
        per_query[qid] = [{k: neg.get(k) for k in ("id", "rank", "score")} for neg in record["negatives"]]
    mined = {r["query_id"] for r in records}
    return {
        "passed": not failures,
        "source": source,
        "strategy": strategy,
        "count": count,
        "queries": len(records),
        "negatives": total,
        "failures": failures,
        "checks": {
            "all_negatives_in_pool": not any("outside the mining pool" in f["problem"] for f in failures),
            "no_annotated_positive": false_negatives == 0,
            "false_negative_fraction": false_negatives / total if total else 0.0,
        },
        "shortfall": {"queries": len(shortfall), "missing_negatives": sum(shortfall.values()),
                      "by_query": shortfall},
        "suspicious": {"count": len(suspicious), "negatives": suspicious,
                       "rule": "negative score >= the query's lowest positive score (review by hand)"},
        "queries_without_positive_score": sum(1 for r in records if r.get("lowest_positive_score") is None),
        "train_queries_not_mined": sorted(set(train) - mined),
        "pool": {"split_mode": pool.split_mode, "documents": len(pool.documents),
                 "excluded": len(pool.excluded), "heldout_families": len(pool.heldout_families)},
        "per_query": per_query,
    }


def mine_to_dir(run: Run, dataset: Dataset, params: MineParams, strategy: str, out_dir: str | Path,
                run_path: str | None = None) -> dict:
    """Mine, audit, and write ``out_dir`` only if the audit passes (else raise MiningAuditError)."""
    records = mine(run, dataset, params, strategy)
    audit = audit_negatives(records, dataset, params.count, strategy)
    audit["source"] = run_path
    audit["params"] = {"seed": params.seed, "source": params.source, "count": params.count,
                       "range_min": params.range_min, "range_max": params.range_max, "margin": params.margin}
    if strategy == "hard":
        audit["margin_dropped"] = margin_drops(run, dataset, params)
    if not audit["passed"]:
        raise MiningAuditError(audit)
    write_mined(out_dir, records, audit)
    return audit
