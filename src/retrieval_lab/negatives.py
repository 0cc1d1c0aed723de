"""``negatives.jsonl``, the mined negatives file: its records, reader and writer, and the audit's name beside it.

Written by ``mine`` (with ``mining-audit.json``), read by training and by ``mine --audit``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .core.atomic import atomic_path, write_json
from .core.data import json_objects
from .core.errors import InputError
from .core.parse import json_loads

NEGATIVES_FILE = "negatives.jsonl"
AUDIT_FILE = "mining-audit.json"


@dataclass(frozen=True)
class Candidate:
    """A document a query's negatives may be drawn from: its rank in the query's pool ranking and its
    score in the run (both None for a random negative the run never retrieved)."""

    id: str
    rank: int | None
    score: float | None

    def to_json(self) -> dict:
        return {"id": self.id, "rank": self.rank, "score": self.score}


@dataclass(frozen=True)
class MinedQuery:
    """One line of negatives.jsonl: a training query, its positives and its mined negatives."""

    query_id: str
    positives: tuple[str, ...]
    lowest_positive_score: float | None  # the run's score of the weakest retrieved positive
    negatives: tuple[Candidate, ...]
    line: int | None = None  # where read_negatives found it, for error messages; never written

    def to_json(self) -> dict:
        return {"query_id": self.query_id, "positives": list(self.positives),
                "lowest_positive_score": self.lowest_positive_score,
                "negatives": [n.to_json() for n in self.negatives]}


def _number_or_null(value, path: Path, line: int, field: str):
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise InputError("expected a number or null", str(path), line, field)
    return value


def read_negatives(path: str | Path) -> list[MinedQuery]:
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
        candidates = []
        for i, neg in enumerate(negatives):
            if not isinstance(neg, dict) or not isinstance(neg.get("id"), str):
                raise InputError("expected an object with a string id", str(path), number, f"negatives[{i}].id")
            candidates.append(Candidate(neg["id"], _number_or_null(neg.get("rank"), path, number, f"negatives[{i}].rank"),
                                        _number_or_null(neg.get("score"), path, number, f"negatives[{i}].score")))
        records.append(MinedQuery(qid, tuple(obj["positives"]), lowest, tuple(candidates), number))
    return records


def read_strategy(negatives_path: str | Path) -> str | None:
    """The strategy recorded in the audit beside a negatives file (None without an audit)."""
    audit = Path(negatives_path).with_name(AUDIT_FILE)
    if not audit.is_file():
        return None
    try:
        return json_loads(audit.read_text(encoding="utf-8"), str(audit)).get("strategy")
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON ({exc.msg})", str(audit), exc.lineno) from None


def write_mined(out_dir: str | Path, records: list[MinedQuery], audit: dict) -> None:
    """``negatives.jsonl`` + ``mining-audit.json`` (``audit``: its JSON), renamed into place together."""
    with atomic_path(out_dir, is_dir=True) as tmp:
        with open(tmp / NEGATIVES_FILE, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in records)
        write_json(tmp / AUDIT_FILE, audit)
