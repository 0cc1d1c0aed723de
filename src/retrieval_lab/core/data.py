"""The data contract: BEIR folders (corpus.jsonl, queries.jsonl, qrels/<split>.tsv), checked line by line.

Every problem is an :class:`InputError` naming file, line and field. Nothing is
dropped silently: what a loader leaves out (queries without a positive, rows
skipped by an explicit option) is counted in the returned report.

Over 400 lines on purpose: one concern, the BEIR reader, whose every field check lives here so that
no other module reads these files.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .atomic import atomic_path
from .checks import (  # id_problem: runs, external read it here
    GRADE_MAX,
    GRADE_MIN,
    check_qrels,
    id_problem,
    identifier,
)
from .errors import InputError
from .guard import QRELS, library_output
from .parse import json_loads

Qrels = dict[str, dict[str, int]]  # query id -> doc id -> graded relevance (<= 0: judged non-relevant)
SPLIT_FILE = "split.json"  # a prepared folder's record of how it was split (mode, validation): no test label


@dataclass(frozen=True)
class Doc:
    id: str
    title: str
    text: str
    family: str | None = None
    metadata: dict = field(default_factory=dict)

    def content(self, fields: list[str] | tuple[str, ...] = ("title", "text")) -> str:
        """The indexed text: the chosen fields joined by one space (blank fields skipped).

        A title-only document's content is its title; a document whose every chosen
        field is blank has the content "" (kept: it may be judged, and is then a miss).
        """
        return " ".join(value for f in fields if (value := getattr(self, f)).strip())


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    family: str | None = None
    metadata: dict = field(default_factory=dict)


@dataclass
class Dataset:
    path: Path
    corpus: dict[str, Doc]
    queries: dict[str, Query]
    qrels: dict[str, Qrels]  # split name -> qrels
    report: dict = field(default_factory=dict)

    def split_queries(self, split: str) -> dict[str, Query]:
        return {q: self.queries[q] for q in self.qrels[split]}


GZIP_MAGIC = b"\x1f\x8b"


def require_file(path: str | Path, hint: str = "") -> Path:
    """``path`` when it is a file to read; else an InputError that says whether it is a folder or missing."""
    path = Path(path)
    if path.is_dir():
        raise InputError("is a folder; expected a file", str(path))
    if not (path.is_file() or _is_stream(path)):
        raise InputError(f"file not found{hint}", str(path))
    return path


def _is_stream(path: Path) -> bool:
    """A pipe or a character device (``/dev/stdin``, ``<(cat run.trec)``): read once, front to back."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def raw_lines(path: str | Path) -> Iterator[tuple[int, bytes]]:
    """Yield (line number, bytes) of a file, gunzipped when it is gzip data (whatever its name).

    The file is opened once (a pipe cannot be read twice): its first bytes are peeked at, not consumed.
    """
    path = require_file(path)
    number = 0
    try:
        with open(path, "rb") as raw_fh:
            compressed = raw_fh.peek(2)[:2] == GZIP_MAGIC
            fh = gzip.GzipFile(fileobj=raw_fh, mode="rb") if compressed else raw_fh
            for number, raw in enumerate(fh, start=1):
                yield number, raw
    except (OSError, EOFError, zlib.error) as exc:  # a truncated or corrupt gzip stream
        raise InputError(f"unreadable gzip data after line {number} ({exc})", str(path), number + 1) from None


_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield (line number, decoded line), naming the line of any invalid UTF-8; gzip is read transparently.

    A byte-order mark opening the file is the encoding mark it is, not text: it is dropped
    (left in, it would become part of the first id).
    """
    for number, raw in raw_lines(path):
        if number == 1:
            if raw.startswith(_UTF16_BOMS):
                raise InputError("UTF-16 text (byte-order mark): save the file as UTF-8", str(path), 1)
            raw = raw.removeprefix(_UTF8_BOM)
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"invalid UTF-8 at byte {exc.start}", str(path), number) from None


def check_id(value: str, path: str | Path, line: int, field: str) -> None:
    """Refuse an id that a TREC run or qrels file could not carry as one column."""
    problem = id_problem(value)
    if problem:
        raise InputError(f"id {value!r} contains {problem}: TREC runs and qrels cannot carry it",
                         str(path), line, field)


_SEPARATOR = re.compile(r"[ \t]+")


def plain_line(line: str) -> bool:
    """The usual line, nothing to doubt: cut by spaces alone (no tab, no control character, no
    other whitespace, no U+FEFF). A hot path: readers test it before calling :func:`columns`."""
    return line.rstrip("\r\n").isprintable()


def columns(line: str, path: str | Path, number: int, names: dict[int, tuple[str, ...]]) -> list[str]:
    """The whitespace-separated columns of one line of a TREC/BEIR table, refusing ambiguous ones.

    ``names`` maps each valid column count to its field names (to name the field at fault).
    Spaces inside a tab-separated cell (``q 1<TAB>d1<TAB>1``), an empty one between two tabs,
    and other whitespace (a no-break space, a carriage return before the line end) or a
    byte-order mark inside a column would cut the line where its writer did not: such a
    line is an error, not a guess. Runs of spaces are one separator (aligned columns).
    """
    parts = line.split()
    if plain_line(line):
        return parts
    body = line.removesuffix("\n").removesuffix("\r")
    if "\t" in body and (" " in body or "\t\t" in body):
        _check_tab_cells(body, path, number, names)
    if not body.replace("\t", " ").isprintable():
        for index, token in enumerate(tokens := _SEPARATOR.split(body.strip())):
            problem = id_problem(token)
            if problem:
                raise InputError(f"column {index + 1} {token!r} contains {problem}", str(path), number,
                                 _field(names, len(tokens), index))
    return parts


def _check_tab_cells(body: str, path: str | Path, number: int, names: dict[int, tuple[str, ...]]) -> None:
    cells = [c.strip(" ") for c in body.strip().split("\t")]  # tabs at either end are padding
    for index, cell in enumerate(cells):
        field = _field(names, len(cells), index)
        if not cell:
            raise InputError(f"tab-separated column {index + 1} is empty", str(path), number, field)
        if " " in cell:
            raise InputError(f"tab-separated column {index + 1} {cell!r} has spaces inside: an id cannot "
                             "hold whitespace, nor can a line mix tab and space separators", str(path), number,
                             field)


def _field(names: dict[int, tuple[str, ...]], count: int, index: int) -> str | None:
    return names[count][index] if count in names else None


def _string(obj: dict, key: str, path: Path, line: int, required: bool = True,
            non_empty: bool = False) -> str | None:
    if key not in obj:
        if required:
            raise InputError("missing field", str(path), line, key)
        return None
    value = obj[key]
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {type(value).__name__}", str(path), line, key)
    if non_empty and not value.strip():
        raise InputError("empty text", str(path), line, key)
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _check_encodable(obj, path: Path, number: int) -> None:
    # "\ud800" alone parses to a lone surrogate, which no UTF-8 output (a run, a corpus) can hold
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise InputError("lone surrogate escape (\\ud800-\\udfff without its pair): not a character",
                         str(path), number) from None


class _RepeatedKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """json.loads' object hook: a key given twice in one object is an error, not the last value silently."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)
    return obj


def json_objects(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) for each non-blank line of a JSONL file of objects."""
    path = Path(path)
    for number, line in text_lines(path):
        if not line.strip():
            continue
        try:
            obj = json_loads(line, str(path), number, object_pairs_hook=_unique_keys)
        except _RepeatedKey as exc:
            raise InputError(f"key {exc.args[0]!r} appears twice in one object (JSON keeps only the last)",
                             str(path), number, exc.args[0]) from None
        except json.JSONDecodeError as exc:
            raise InputError(f"malformed JSON ({exc.msg} at column {exc.colno})", str(path), number) from None
        if _SURROGATE_ESCAPE.search(line):
            _check_encodable(obj, path, number)
        if not isinstance(obj, dict):
            raise InputError(f"expected a JSON object, got {type(obj).__name__}", str(path), number)
        yield number, obj


def read_jsonl_records(path: str | Path, kind: str) -> Iterator[tuple[int, dict]]:
    """Parse a JSONL file of objects with a unique string ``_id``; yields (line, object) as it reads."""
    path = Path(path)
    first_line = {}
    for number, obj in json_objects(path):
        doc_id = _string(obj, "_id", path, number, non_empty=True)
        check_id(doc_id, path, number, "_id")
        if doc_id in first_line:
            raise InputError(f"duplicate {kind} id {doc_id!r} (first on line {first_line[doc_id]})",
                             str(path), number, "_id")
        first_line[doc_id] = number
        metadata = obj.get("metadata", {})
        if metadata is None:
            metadata = {}
        if not isinstance(metadata, dict):
            raise InputError("expected an object", str(path), number, "metadata")
        family = metadata.get("family")
        if family is not None and not isinstance(family, str):
            raise InputError("expected a string", str(path), number, "metadata.family")
        yield number, obj


def iter_corpus(path: str | Path) -> Iterator[Doc]:
    """Each document of a corpus.jsonl (gzipped or not) as it is read: one pass, one document's text held at a
    time (only the ids are remembered, to refuse a duplicate)."""
    path = Path(path)
    for number, obj in read_jsonl_records(path, "document"):
        title = _string(obj, "title", path, number)
        text = _string(obj, "text", path, number)  # may be empty: title-only and empty documents are kept
        metadata = obj.get("metadata") or {}
        yield Doc(obj["_id"], title, text, metadata.get("family"), metadata)


def read_corpus(path: str | Path) -> dict[str, Doc]:
    return {doc.id: doc for doc in iter_corpus(path)}


def corpus_file(folder: str | Path) -> Path:
    """A BEIR folder's corpus.jsonl, or corpus.jsonl.gz when only that exists."""
    return _plain_or_gz(Path(folder) / "corpus.jsonl")


def queries_file(folder: str | Path) -> Path:
    """A BEIR folder's queries.jsonl, or queries.jsonl.gz when only that exists."""
    return _plain_or_gz(Path(folder) / "queries.jsonl")


def read_queries(path: str | Path) -> dict[str, Query]:
    path = Path(path)
    queries = {}
    for number, obj in read_jsonl_records(path, "query"):
        text = _string(obj, "text", path, number, non_empty=True)
        metadata = obj.get("metadata") or {}
        queries[obj["_id"]] = Query(obj["_id"], text, metadata.get("family"), metadata)
    return queries


_QRELS_COLUMNS = {3: ("query-id", "corpus-id", "score"), 4: ("query-id", "iteration", "corpus-id", "score")}
_INTEGER = re.compile(r"[+-]?[0-9]+")


def ascii_integer(text: str) -> int | None:
    """``text`` as an integer when it is one written in ASCII digits (int() would also take "1_0" and
    other scripts' digits), else None."""
    return int(text) if _INTEGER.fullmatch(text) else None


def read_qrels(path: str | Path, queries: dict | None = None, corpus: dict | None = None) -> Qrels:
    """Read BEIR qrels (``query-id corpus-id score`` with header) or TREC qrels (``qid 0 docid rel``).

    Ids are checked against ``queries``/``corpus`` when given; scores must be integers.
    """
    path = Path(path)
    qrels: Qrels = {}
    seen: dict[tuple[str, str], int] = {}
    for number, line in text_lines(path):
        if not line.strip():
            continue
        parts = line.split() if plain_line(line) else columns(line, path, number, _QRELS_COLUMNS)
        if number == 1 and parts[:2] == ["query-id", "corpus-id"]:
            continue
        if len(parts) == 3:
            qid, did, score = parts
        elif len(parts) == 2:  # the last column is the one left out
            raise InputError("missing score: got 2 columns, expected 3 (query-id corpus-id score)", str(path),
                             number, "score")
        elif len(parts) == 4:
            qid, _, did, score = parts
        else:
            raise InputError(f"expected 3 (BEIR) or 4 (TREC) columns, got {len(parts)}", str(path), number)
        rel = ascii_integer(score)
        if rel is None:
            raise InputError(f"score {score!r} is not an integer", str(path), number, "score")
        if not GRADE_MIN <= rel <= GRADE_MAX:  # trec_eval's grades are C ints: larger ones overflowed there
            raise InputError(f"score {score} is outside {GRADE_MIN}..{GRADE_MAX}", str(path), number, "score")
        if queries is not None and qid not in queries:
            raise InputError(f"unknown query id {qid!r}", str(path), number, "query-id")
        if corpus is not None and did not in corpus:
            raise InputError(f"unknown document id {did!r}", str(path), number, "corpus-id")
        if (qid, did) in seen:
            raise InputError(f"pair ({qid}, {did}) judged twice (first on line {seen[qid, did]})",
                             str(path), number, "corpus-id")
        seen[qid, did] = number
        qrels.setdefault(qid, {})[did] = rel
    return qrels


def empty_documents(corpus: dict[str, Doc], fields: list[str] | tuple[str, ...] = ("title", "text")) -> list[str]:
    """Ids of the documents whose content over ``fields`` is empty, in corpus order."""
    return [d for d, doc in corpus.items() if not doc.content(fields)]


LEXICAL_MISS = "lexical retrievers never return them"


def empty_documents_note(corpus: dict[str, Doc], fields: list[str] | tuple[str, ...] = ("title", "text"),
                         consequence: str = LEXICAL_MISS) -> str | None:
    """One line for a stage to print about documents with no text (None when there is none)."""
    empty = empty_documents(corpus, fields)
    if not empty:
        return None
    shown = ", ".join(empty[:5]) + (", ..." if len(empty) > 5 else "")
    noun = "document" if len(empty) == 1 else "documents"
    return f"{len(empty)} {noun} with no text in {'+'.join(fields)} ({shown}): {consequence}"


def positives(judged: dict[str, int], min_rel: int = 1) -> set[str]:
    return {d for d, r in judged.items() if r >= min_rel}


def _plain_or_gz(path: Path) -> Path:
    """``path``, or ``path.gz`` when only that exists (a missing file is named as the plain one)."""
    gz = path.with_name(path.name + ".gz")
    return gz if not path.exists() and gz.exists() else path


def qrels_splits(qrels_dir: Path) -> list[str]:
    """The split names of a qrels folder: ``<split>.tsv`` files, gzipped (``.tsv.gz``) or not."""
    return sorted({p.name.removesuffix(".gz").removesuffix(".tsv")
                   for pattern in ("*.tsv", "*.tsv.gz") for p in qrels_dir.glob(pattern)})


def load_dataset(path: str | Path, splits: list[str] | None = None, doc_ids: list[str] | None = None) -> Dataset:
    """Load and check a BEIR folder; ``splits`` defaults to every ``qrels/*.tsv``.

    Each file may be gzipped in place (``corpus.jsonl.gz``, ``qrels/test.tsv.gz``).
    ``doc_ids`` (an index's, in collection order): the corpus is not read, the qrels are checked
    against these ids, and ``corpus`` is left empty.

    ``report`` counts, per split, judged queries and those without any positive.
    """
    path = Path(path)
    corpus = read_corpus(_plain_or_gz(path / "corpus.jsonl")) if doc_ids is None else dict.fromkeys(doc_ids)
    queries = read_queries(_plain_or_gz(path / "queries.jsonl"))
    qrels_dir = path / "qrels"
    if splits is None:
        splits = qrels_splits(qrels_dir)
        if not splits:
            raise InputError("no qrels/<split>.tsv file", str(qrels_dir))
    qrels, report = {}, {"documents": len(corpus),
                         "documents_without_text": len(empty_documents(corpus)) if doc_ids is None else None,
                         "queries": len(queries), "splits": {}}
    for split in splits:
        qrels[split] = read_qrels(_plain_or_gz(qrels_dir / f"{split}.tsv"), queries, corpus)
        no_positive = sorted(q for q, judged in qrels[split].items() if not positives(judged))
        report["splits"][split] = {
            "judged_queries": len(qrels[split]),
            "queries_without_positive": len(no_positive),
            "queries_without_positive_ids": no_positive[:50],
            "judgments": sum(len(j) for j in qrels[split].values()),
        }
    return Dataset(path, corpus if doc_ids is None else {}, queries, qrels, report)


# ----------------------------------------------------------------------------- writing


def _dump(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=False)


def write_corpus(path: str | Path, corpus: dict[str, Doc]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for doc in corpus.values():
            obj = {"_id": doc.id, "title": doc.title, "text": doc.text}
            if doc.metadata:
                obj["metadata"] = doc.metadata
            fh.write(_dump(obj) + "\n")


def write_queries(path: str | Path, queries: dict[str, Query]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for query in queries.values():
            obj = {"_id": query.id, "text": query.text}
            if query.metadata:
                obj["metadata"] = query.metadata
            fh.write(_dump(obj) + "\n")


def write_qrels(path: str | Path, qrels: Qrels) -> None:
    """BEIR tsv with header, rows in query then document order as given.

    Refused, nothing written (:class:`InputError`): a grade that is not an integer, an id a qrels file
    cannot carry, and a ``path`` that would replace what this writer did not write: qrels never lie inside a
    BEIR folder (one holding corpus.jsonl and queries.jsonl: its judgments are its own) and replace only earlier
    qrels (never a corpus, queries, a run, a pool or a note) — :func:`guard.library_output`.
    """
    check_qrels(qrels)
    library_output(path, "write_qrels", QRELS)
    with atomic_path(path, kind=QRELS) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for qid, judged in qrels.items():
            fh.writelines(f"{qid}\t{did}\t{rel}\n" for did, rel in judged.items())


def is_finite(x: float) -> bool:
    return not (math.isnan(x) or math.isinf(x))


def write_dataset(path: str | Path, corpus: dict[str, Doc], queries: dict[str, Query],
                  qrels: dict[str, Qrels]) -> None:
    """Write a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv for each split of ``qrels``),
    replaced whole: a reader never sees a corpus from one write beside qrels from another.

    Refused, nothing written (:class:`InputError`): ids a TREC file cannot carry, a corpus entry that is not
    the :class:`Doc` of its id, a split name that is not a plain name, a bad grade; a ``path`` inside another
    BEIR folder, and one holding files this library did not write (a raw dataset is never replaced) —
    :func:`guard.library_output`.
    """
    from .rules import NAME

    for kind, items, cls in (("document", corpus, Doc), ("query", queries, Query)):
        for key, item in items.items():
            identifier(key, kind, f"{'corpus' if kind == 'document' else 'queries'}[{key!r}]")
            if not isinstance(item, cls) or item.id != key or not isinstance(item.text, str):
                raise InputError(f"expected the {cls.__name__} of id {key!r}, got {item!r}"[:300],
                                 field=f"{'corpus' if kind == 'document' else 'queries'}[{key!r}]")
    for split, judged in qrels.items():
        if not isinstance(split, str) or not NAME.fullmatch(split):
            raise InputError(f"split name {split!r} is not a name (letters, digits, _ . + -)", field="qrels")
        check_qrels(judged, f"qrels[{split!r}]")
    library_output(path, "write_beir", is_dir=True)
    with atomic_path(path, is_dir=True) as tmp:
        write_corpus(tmp / "corpus.jsonl", corpus)
        write_queries(tmp / "queries.jsonl", queries)
        for split, judged in qrels.items():
            write_qrels(tmp / "qrels" / f"{split}.tsv", judged)
