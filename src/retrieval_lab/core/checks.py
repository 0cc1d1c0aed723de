"""The rules on the values the library's functions take: one place, so the API refuses what the CLI refuses.

The CLI reads files, and their readers (:func:`runs.read_run`, :func:`data.read_qrels`) refuse a bad
line where it enters; a program calling ``rl.evaluate`` hands over Python objects that no reader
saw. Each exported function checks its arguments here, with the readers' words ("is not finite",
"must be positive"), so a NaN score, a k of 0 or an id a TREC file cannot carry is an
:class:`InputError` whichever way it comes in. A NumPy scalar (``np.float32`` from FAISS, ``np.int64``
from pandas) is a number like any other.

The common case costs one pass in C: the types of a run's scores are collected per query and
their values checked as one array; only a run that fails is walked again, to name the item.
"""

from __future__ import annotations

import math
import numbers
import re
import unicodedata
from collections.abc import Mapping

from .errors import InputError

GRADE_MIN, GRADE_MAX = -(2**31), 2**31 - 1  # a relevance grade: a 32-bit integer, as trec_eval reads it

# Every character str.isspace() accepts, i.e. what str.split() cuts on (tests check the list), and U+FEFF.
_ODD_IN_ID = re.compile("[\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]")
_CONTROL_NAMES = {"\t": "TAB", "\n": "LINE FEED", "\x0b": "LINE TABULATION", "\x0c": "FORM FEED",
                  "\r": "CARRIAGE RETURN", "\x85": "NEXT LINE"}  # unicodedata has no name for controls


def id_problem(text: str) -> str | None:
    """Why ``text`` cannot be one column of a whitespace-separated TREC file (None when it can)."""
    match = _ODD_IN_ID.search(text)
    if match is None:
        return None
    char = match.group()
    if char == "\ufeff":
        return "a byte-order mark (U+FEFF; files joined together?)"
    name = _CONTROL_NAMES.get(char) or unicodedata.name(char, "")
    return f"whitespace (U+{ord(char):04X}{' ' + name if name else ''})"


def positive(value, name: str, field: str | None = None) -> int:
    """``value`` as an int when it is a whole number >= 1 (NumPy's too; not a bool, not 2.0)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{name} must be a whole number, got {value!r}", field=field or name)
    if value < 1:
        raise InputError(f"{name} must be positive, got {value}", field=field or name)
    return int(value)


def identifier(value, what: str, field: str) -> str:
    """A query or document id a TREC file can carry: a non-empty string without whitespace."""
    if not isinstance(value, str):
        raise InputError(f"{what} id {value!r} is not a string", field=field)
    if not value:
        raise InputError(f"{what} id is empty", field=field)
    if problem := id_problem(value):
        raise InputError(f"{what} id {value!r} contains {problem}: TREC runs and qrels cannot carry it",
                         field=field)
    return value


def _mapping(value, what: str, field: str) -> None:
    if not isinstance(value, Mapping):
        raise InputError(f"expected a mapping {what}, got {type(value).__name__}", field=field)


def _real(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Real)


def _ids_ok(key: str, inner: Mapping) -> bool:
    if not isinstance(key, str) or not key or "" in inner:
        return False
    try:
        joined = key + "".join(inner)  # one scan of every id of the entry (a non-string id: TypeError)
    except TypeError:
        return False
    return id_problem(joined) is None


def check_run(run, name: str = "run") -> None:
    """Refuse a run that is not ``{query id: {document id: finite number}}`` with ids a TREC run carries:
    the one line names the query, the document and why (``score nan is not finite``)."""
    _mapping(run, "query id -> {document id: score}", name)
    types: set[type] = set()
    for qid, docs in run.items():
        if not isinstance(docs, Mapping) or not _ids_ok(qid, docs):
            _locate_run(run, name)
        types.update(map(type, docs.values()))
    if not all(not issubclass(t, bool) and issubclass(t, numbers.Real) for t in types):
        _locate_run(run, name)
    import numpy as np

    count = sum(len(docs) for docs in run.values())
    try:
        values = np.fromiter((s for docs in run.values() for s in docs.values()), dtype=np.float64, count=count)
    except (OverflowError, TypeError, ValueError):  # an int beyond a double's range, or an odd Real
        _locate_run(run, name)
    if not np.isfinite(values).all():
        _locate_run(run, name)


def _locate_run(run: Mapping, name: str) -> None:
    """The first bad entry of a run :func:`check_run` refused, as an InputError naming it."""
    for qid, docs in run.items():
        identifier(qid, "query", f"{name}[{qid!r}]")
        _mapping(docs, "document id -> score", f"{name}[{qid!r}]")
        for did, score in docs.items():
            where = f"{name}[{qid!r}][{did!r}]"
            identifier(did, "document", where)
            if not _real(score):
                raise InputError(f"score {score!r} is not a number", field=where)
            try:
                finite = math.isfinite(score)
            except OverflowError:  # an int no double holds
                finite = False
            if not finite:
                raise InputError(f"score {str(score)[:40]} is not finite", field=where)
    raise AssertionError("check_run refused a run _locate_run finds nothing wrong with")  # pragma: no cover


def check_qrels(qrels, name: str = "qrels") -> None:
    """Refuse qrels that are not ``{query id: {document id: integer grade}}`` (trec_eval's C ints)."""
    _mapping(qrels, "query id -> {document id: relevance}", name)
    for qid, judged in qrels.items():
        identifier(qid, "query", f"{name}[{qid!r}]")
        _mapping(judged, "document id -> relevance", f"{name}[{qid!r}]")
        for did, grade in judged.items():
            where = f"{name}[{qid!r}][{did!r}]"
            identifier(did, "document", where)
            if isinstance(grade, bool) or not isinstance(grade, numbers.Integral):
                raise InputError(f"score {grade!r} is not an integer", field=where)
            if not GRADE_MIN <= grade <= GRADE_MAX:
                raise InputError(f"score {grade} is outside {GRADE_MIN}..{GRADE_MAX}", field=where)


def check_measures(measures, field: str = "measures") -> list[str]:
    """A list of measure names (a lone string is refused: its letters would be taken for names); the caller
    parses each (``metrics.parse_measure``, a layer above this one)."""
    if isinstance(measures, str) or not isinstance(measures, (list, tuple)):
        raise InputError(f"expected a list of measure names (e.g. ['nDCG@10']), got {measures!r}", field=field)
    if not measures:
        raise InputError("expected at least one measure", field=field)
    for name in measures:
        if not isinstance(name, str):
            raise InputError(f"measure {name!r} is not a name", field=field)
    return list(measures)


def check_overlap(qrels: Mapping, run: Mapping, run_path=None, qrels_path=None, name: str = "run") -> None:
    """Refuse a run that shares no query with the qrels: it would score 0 on every measure, which reads
    as a terrible retriever when it is the wrong file (or the wrong dictionary)."""
    if not any(qid in qrels for qid in run):
        where = f" {qrels_path}" if qrels_path is not None else ""
        raise InputError(f"the run shares no query with the qrels{where} "
                         f"({len(run)} run queries, {len(qrels)} judged)",
                         None if run_path is None else str(run_path), field=None if run_path is not None else name)


def check_texts(texts, what: str, field: str) -> None:
    """``{id: text}`` (or objects with ``.text``) with ids a TREC file carries and string texts."""
    _mapping(texts, f"{what} id -> text", field)
    for key, value in texts.items():
        identifier(key, what, f"{field}[{key!r}]")
        text = getattr(value, "text", value)
        if not isinstance(text, str):
            raise InputError(f"{what} text {text!r} is not a string", field=f"{field}[{key!r}]")
