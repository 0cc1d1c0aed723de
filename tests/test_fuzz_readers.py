"""Property-based fuzz of every reader: any input gives a result or an InputError naming file and line.

Never another exception, and never a result with something left out unreported. Two kinds
of input per reader: bytes built from the fragments that matter (byte-order marks, gzip
magic, tabs, CR, invalid UTF-8, JSON pieces), and well-formed files of records that are wrong
here and there, checked against a small model of what the reader must accept and return.
Seeded (``derandomize``) and small, so CI runs the whole file in well under a minute.
"""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import json
import math
import os
import re
import typing

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval_lab.core.data import read_corpus, read_qrels, read_queries
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import Params
from retrieval_lab.core.params_file import load_params
from retrieval_lab.runs import read_run

# FUZZ_EXAMPLES=5000 FUZZ_SEED=1 searches further by hand; CI keeps the seeded 200 per reader
FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "200")), deadline=None,
                derandomize="FUZZ_SEED" not in os.environ, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

_names = itertools.count()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def _write(folder, data: bytes, packed: bool = False, suffix: str = ".txt"):
    path = folder / f"f{next(_names)}{suffix}{'.gz' if packed else ''}"
    path.write_bytes(gzip.compress(data, mtime=0) if packed else data)
    return path


def _content_lines(data: bytes) -> list[tuple[int, str]] | None:
    """(number, line) of the non-blank lines a reader must account for, found by an independent route;
    None when the bytes are not UTF-8 text."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except Exception:  # noqa: BLE001 - any corrupt stream must be an InputError
            return None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None
    try:
        text = data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError:
        return None
    return [(n, line) for n, line in enumerate(text.split("\n"), start=1) if line.strip()]


def _located(err: InputError, path, lines: int) -> None:
    assert err.path == str(path), err
    assert err.line is not None and 1 <= err.line <= lines + 1, err


# ----------------------------------------------------------------------------- arbitrary bytes

FRAGMENTS = [b"\xef\xbb\xbf", b"\xff\xfe", b"\x1f\x8b", b"\n", b"\r\n", b"\r", b"\t", b" ", b"  ", b"\x00",
             b"\xff", b"\xc3", b"\xc2\xa0", b"\xe2\x80\xa8", b"\xe3\x80\x80", b"\x0b", b"\x1c", b"{", b"}", b"[",
             b"]", b'"', b":", b",", b"\\", b"\\u", b"\\ud800", b"\\ud83d\\ude00", b'"_id"', b'"title"', b'"text"',
             b'"metadata"', b'"family"', b"null", b"true", b"NaN", b"1e999", b"-0", b"query-id", b"corpus-id",
             b"score", b"q1", b"q2", b"d1", b"d2", b"Q0", b"0", b"1", b"2", b"-1", b"1.5", b"nan", b"inf", b"1_0",
             b"\xd9\xa1", b"tag", b'{"_id": "d1", "title": "t", "text": "x"}', b'{"_id": "q1", "text": "x"}',
             b"q1 0 d1 1", b"q1\td1\t1", b"q1 Q0 d1 1 2.5 t", b"query-id\tcorpus-id\tscore", b"[" * 1100,
             b"{a: " * 1100]

noisy_bytes = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=6)), max_size=30).map(b"".join)


def _fuzz_bytes(folder, reader, data: bytes, packed: bool, count) -> None:
    path = _write(folder, data, packed)
    lines = _content_lines(data)
    try:
        result = reader(path)
    except InputError as err:
        _located(err, path, len(data.split(b"\n")))
        return
    assert lines is not None, "not UTF-8 text, yet read"
    assert count(result) == len(lines), "a line was dropped unreported"


def _qrels_rows(lines: list[tuple[int, str]]) -> int:
    header = bool(lines) and lines[0][0] == 1 and lines[0][1].split()[:2] == ["query-id", "corpus-id"]
    return len(lines) - header


@FUZZ
@given(data=noisy_bytes, packed=st.booleans())
def test_corpus_reader_on_any_bytes(folder, data, packed):
    _fuzz_bytes(folder, read_corpus, data, packed, len)


@FUZZ
@given(data=noisy_bytes, packed=st.booleans())
def test_queries_reader_on_any_bytes(folder, data, packed):
    _fuzz_bytes(folder, read_queries, data, packed, len)


@FUZZ
@given(data=noisy_bytes, packed=st.booleans())
def test_qrels_reader_on_any_bytes(folder, data, packed):
    path = _write(folder, data, packed)
    try:
        qrels = read_qrels(path)
    except InputError as err:
        _located(err, path, len(data.split(b"\n")))
        return
    lines = _content_lines(data)
    assert lines is not None, "not UTF-8 text, yet read"
    assert sum(map(len, qrels.values())) == _qrels_rows(lines), "a line was dropped unreported"


@FUZZ
@given(data=noisy_bytes, packed=st.booleans())
def test_run_reader_on_any_bytes(folder, data, packed):
    _fuzz_bytes(folder, read_run, data, packed, lambda run: sum(map(len, run.values())))


# ----------------------------------------------------------------------------- JSONL records, wrong here and there

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6))
values = st.one_of(scalars, st.lists(scalars, max_size=2), st.dictionaries(st.text(max_size=3), scalars, max_size=2))
bad_strings = st.sampled_from(["", "   ", "d 1", " d1", "d1\t", "d\n1", "d\u00a01", "d\u2028", "d\ufeff1", "\ufeffd1"])
good_records = st.fixed_dictionaries(
    {"_id": st.text("dq12", min_size=1, max_size=3), "title": st.text(max_size=8), "text": st.text(max_size=8)},
    optional={"metadata": st.none() | st.fixed_dictionaries({}, optional={"family": st.text(max_size=3)})})


@st.composite
def records(draw):
    """A JSONL record: mostly right, else one field missing, of another type or an odd string."""
    if draw(st.integers(0, 9)) == 0:
        return draw(values)  # not an object
    rec = draw(good_records)
    if draw(st.booleans()):
        key = draw(st.sampled_from(["_id", "title", "text", "metadata", "metadata.family"]))
        wrong = draw(st.sampled_from(["missing", "value", "string"]))
        target = rec
        if key == "metadata.family":
            target = rec["metadata"] = dict(rec.get("metadata") or {})
            key = "family"
        if wrong == "missing":
            target.pop(key, None)
        else:
            target[key] = draw(values if wrong == "value" else bad_strings)
    return rec


def _record_problems(rec, seen: set, fields: tuple[str, ...]) -> set[str]:
    """Fields of ``rec`` a reader must refuse (empty: a good record); "" when it is not a JSON object."""
    if not isinstance(rec, dict):
        return {""}
    problems = set()
    rid = rec.get("_id")
    if (not isinstance(rid, str) or not rid.strip() or rid in seen
            or any(c.isspace() or c == "\ufeff" for c in rid)):
        problems.add("_id")
    meta = rec.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        problems.add("metadata")
    elif isinstance(meta, dict) and meta.get("family") is not None and not isinstance(meta["family"], str):
        problems.add("metadata.family")
    for name in fields:
        value = rec.get(name)
        if not isinstance(value, str) or (name == "text" and fields == ("text",) and not value.strip()):
            problems.add(name)
    return problems


def _fuzz_records(folder, reader, recs: list, ascii_only: bool, bom: bool, fields: tuple[str, ...]) -> None:
    text = "".join(json.dumps(r, ensure_ascii=ascii_only) + "\n" for r in recs)
    path = _write(folder, b"\xef\xbb\xbf" * bom + text.encode("utf-8"), suffix=".jsonl")
    seen: set[str] = set()
    first_bad = None
    for number, rec in enumerate(recs, start=1):
        problems = _record_problems(rec, seen, fields)
        if problems:
            first_bad = first_bad or (number, problems)
        elif isinstance(rec, dict):
            seen.add(rec["_id"])
    try:
        result = reader(path)
    except InputError as err:
        assert first_bad is not None, f"a good file refused: {err}"
        assert err.path == str(path) and err.line == first_bad[0], err
        assert (err.field or "") in first_bad[1] | {""}, err
        return
    assert first_bad is None, f"record on line {first_bad[0]} wrong in {first_bad[1]}, yet read"
    assert list(result) == [r["_id"] for r in recs]
    for rec, item in zip(recs, result.values()):
        assert [getattr(item, name) for name in fields] == [rec[name] for name in fields]
        assert item.family == (rec.get("metadata") or {}).get("family")


@FUZZ
@given(recs=st.lists(records(), max_size=5), ascii_only=st.booleans(), bom=st.booleans())
def test_corpus_reader_on_wrong_records(folder, recs, ascii_only, bom):
    _fuzz_records(folder, read_corpus, recs, ascii_only, bom, ("title", "text"))


@FUZZ
@given(recs=st.lists(records(), max_size=5), ascii_only=st.booleans(), bom=st.booleans())
def test_queries_reader_on_wrong_records(folder, recs, ascii_only, bom):
    _fuzz_records(folder, read_queries, recs, ascii_only, bom, ("text",))


# ----------------------------------------------------------------------------- TREC / BEIR tables, wrong here and there

# a cell: an id-like word, or any text without a line break (whitespace, BOM, non-ASCII digits...)
words = st.sampled_from(["q1", "q2", "d1", "d2", "0", "1", "2", "-1", "+3", "Q0", "1.5", "nan", "inf", "-inf",
                         "1e400", "1_0", "\u0661", "query-id", "corpus-id", "score", "t"])
cells = st.one_of(words, words, st.text(st.characters(blacklist_characters="\n", blacklist_categories=["Cs"]),
                                        max_size=4))
space_cells = cells.filter(lambda c: c and " " not in c)  # runs of spaces are one separator: cells hold none


@st.composite
def tables(draw, widths: tuple[int, ...]):
    """(separator, rows): rows mostly of the reader's widths, some of any other."""
    sep = draw(st.sampled_from(["\t", " ", "  "]))
    cell = cells if sep == "\t" else space_cells
    rows = draw(st.lists(st.integers(0, 7).flatmap(
        lambda n: st.lists(cell, min_size=n, max_size=n) | st.lists(cell, min_size=widths[0], max_size=widths[-1])),
        max_size=5))
    return sep, rows


def _intended(sep: str, cells_: list[str]) -> list[str] | None:
    """The columns a line means, each cell stripped of padding; None: the line is blank.

    Spaces: a run of them is one separator. Tabs: each tab separates, so an empty cell is a
    column, except at either end of the line (a trailing tab is padding)."""
    if not sep.join(cells_).strip():
        return None
    columns = [c.strip() for c in cells_]
    if sep != "\t":
        return [c for c in columns if c]
    while not columns[0]:
        columns.pop(0)
    while not columns[-1]:
        columns.pop()
    return columns


def _good_cell(cell: str) -> bool:
    return bool(cell) and not any(c.isspace() or c == "\ufeff" for c in cell)


def _strict(cells_: list[str]) -> bool:
    """Cells written exactly as they are meant: no padding, no whitespace inside."""
    return all(_good_cell(c) for c in cells_)


def _table_file(folder, sep: str, rows: list[list[str]], bom: bool):
    return _write(folder, b"\xef\xbb\xbf" * bom + "".join(sep.join(r) + "\n" for r in rows).encode("utf-8"))


def _check_table(path, rows, sep, meaning, read) -> None:
    """``meaning(number, columns, state)`` -> value or None (a wrong row); the reader must agree."""
    state: dict = {}
    expected, first_bad, tolerant_ok = [], None, True
    for number, row in enumerate(rows, start=1):
        columns = _intended(sep, row)
        if columns is None:
            continue
        value = meaning(number, columns, state) if all(map(_good_cell, columns)) else None
        strictly = value is not None and _strict(row if sep == "\t" else [c for c in row if c])
        if value is None:
            tolerant_ok = False
        if not strictly and first_bad is None:
            first_bad = number
        if value is not None and value != "header":
            expected.append(value)
    try:
        result = read(path)
    except InputError as err:
        assert first_bad is not None, f"a good file refused: {err}"
        assert err.path == str(path) and first_bad <= err.line <= len(rows), err
        return
    assert tolerant_ok, "a wrong row was read"
    assert result == expected


_INT = re.compile(r"[+-]?[0-9]+")


def _qrels_meaning(number, columns, state):
    if number == 1 and columns[:2] == ["query-id", "corpus-id"]:
        return "header"
    if len(columns) not in (3, 4) or not _INT.fullmatch(columns[-1]):
        return None
    pair = (columns[0], columns[-2])
    if pair in state:
        return None
    state[pair] = True
    return (*pair, int(columns[-1]))


def _run_meaning(number, columns, state):
    if len(columns) != 6:
        return None
    qid, _, did, _, score, _ = columns
    try:
        value = float(score) if score.isascii() and "_" not in score else math.nan
    except ValueError:
        return None
    if not math.isfinite(value) or (qid, did) in state:
        return None
    state[qid, did] = True
    return qid, did, value


@FUZZ
@given(table=tables((3, 4)), bom=st.booleans())
def test_qrels_reader_on_wrong_rows(folder, table, bom):
    sep, rows = table
    path = _table_file(folder, sep, rows, bom)
    _check_table(path, rows, sep, _qrels_meaning,
                 lambda p: [(q, d, r) for q, judged in read_qrels(p).items() for d, r in judged.items()])


@FUZZ
@given(table=tables((6,)), bom=st.booleans())
def test_run_reader_on_wrong_rows(folder, table, bom):
    sep, rows = table
    path = _table_file(folder, sep, rows, bom)
    _check_table(path, rows, sep, _run_meaning,
                 lambda p: [(q, d, s) for q, docs in read_run(p).items() for d, s in docs.items()])


# ----------------------------------------------------------------------------- params files and --set values

SECTIONS = {name: [f.name for f in dataclasses.fields(tp)]
            for name, tp in typing.get_type_hints(Params).items() if dataclasses.is_dataclass(tp)}
yaml_values = st.recursive(st.one_of(scalars, st.sampled_from([".inf", "-.nan", "1e999", "none", "[a-z]+"])),
                           lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner,
                                                                                       max_size=2),
                           max_leaves=4)


@st.composite
def params_documents(draw):
    section = draw(st.sampled_from(sorted(SECTIONS)) | st.text(max_size=4))
    keys = SECTIONS.get(section) or ["x"]
    body = draw(st.dictionaries(st.sampled_from(keys) | st.text(max_size=3), yaml_values, max_size=3))
    return {section: draw(st.just(body) | yaml_values)}


def _load(folder, data: bytes, overrides=()):
    path = _write(folder, data, suffix=".yaml")
    try:
        return path, load_params(path, list(overrides))
    except InputError as err:
        return path, err


@FUZZ
@given(data=noisy_bytes | st.sampled_from([b"a: [", b"\xef\xbb\xbfbm25: {k1: 1}", b"- 1", b"bm25: 3", b"\xff"]))
def test_params_reader_on_any_bytes(folder, data):
    path, out = _load(folder, data)
    assert isinstance(out, Params) or out.path == str(path), out


@FUZZ
@given(doc=params_documents())
def test_params_reader_on_wrong_values(folder, doc):
    path, out = _load(folder, yaml.safe_dump(doc, allow_unicode=True).encode("utf-8"))
    assert isinstance(out, Params) or out.path == str(path), out


@FUZZ
@given(overrides=st.lists(st.tuples(
    st.sampled_from(sorted(f"{s}.{k}" for s, keys in SECTIONS.items() for k in keys)) | st.text(max_size=6),
    st.sampled_from(["", "1", "-1", "0.5", "nan", ".inf", "null", "none", "[a, b]", "{a: 1}", "[", "'x", "[" * 1100,
                     "x" * 300, "a\x00b"])
    | st.text(max_size=6)).map("=".join), min_size=1, max_size=3))
def test_set_values(folder, overrides):
    path, out = _load(folder, b"# defaults\n", overrides)
    assert isinstance(out, Params) or out.field is not None or out.path == str(path), out


# ----------------------------------------------------------------------------- what the fuzzer found, pinned


@pytest.mark.parametrize("data,reason,line", [
    (b"bm25:\n  k1: 1\n  b: \xe9\n", "invalid UTF-8 at byte 19", 3),  # was a UnicodeDecodeError traceback
    (b"\xff\xfebm25: {}", "invalid UTF-8 at byte 0", 1),  # UTF-16
    (b"evaluate: " + b"[" * 1100, "nested too deeply", None),  # was a RecursionError
])
def test_params_file_that_is_not_text_or_too_deep_is_an_input_error(tmp_path, data, reason, line):
    path = tmp_path / "params.yaml"
    path.write_bytes(data)
    with pytest.raises(InputError) as info:
        load_params(path)
    assert (info.value.path, info.value.line) == (str(path), line) and reason in str(info.value)


def test_set_value_nested_too_deeply_is_the_raw_string(tmp_path):
    # YAML that cannot be parsed is taken as the raw string (parse_override), then refused by the schema
    with pytest.raises(InputError) as info:
        load_params(None, ["evaluate.measures=" + "[" * 1100])
    assert info.value.field == "evaluate.measures" and "expected a list" in str(info.value)


@pytest.mark.parametrize("value", ["x" * 300, "a\x00b"])
def test_stopwords_value_that_cannot_be_a_file_name_is_an_input_error(value):
    # tokenizer.stopwords may name a file: a name too long for the OS, or with a NUL, was an OSError
    with pytest.raises(InputError) as info:
        load_params(None, [f"tokenizer.stopwords={value}"])
    assert info.value.field == "tokenizer.stopwords" and "neither a stopword language" in str(info.value)
