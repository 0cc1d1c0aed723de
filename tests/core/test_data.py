"""The data contract: every bad input names file, line and field; nothing is dropped silently."""

from __future__ import annotations

import json

import pytest
from beir_fixtures import write_beir

from retrieval_lab.core.data import (
    empty_documents,
    empty_documents_note,
    load_dataset,
    read_corpus,
    read_qrels,
    read_queries,
)
from retrieval_lab.core.errors import InputError

DOCS = [{"_id": "d1", "title": "Queue", "text": "restart the worker"},
        {"_id": "d2", "title": "DNS", "text": "flush the resolver cache"}]
QUERIES = [{"_id": "q1", "text": "messages stuck"}, {"_id": "q2", "text": "names do not resolve"}]


def _corpus_with(tmp_path, line: str):
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps(DOCS[0]) + "\n" + line + "\n", encoding="utf-8")
    return path


def _error(fn, *args) -> InputError:
    with pytest.raises(InputError) as info:
        fn(*args)
    return info.value


def test_valid_dataset_loads_with_counts(tmp_path):
    root = write_beir(tmp_path / "ds", DOCS, QUERIES, {"test": [("q1", "d1", 2), ("q2", "d2", 0)]})
    ds = load_dataset(root)
    assert ds.qrels["test"] == {"q1": {"d1": 2}, "q2": {"d2": 0}}
    # q2 has only a judged non-relevant document: counted, not dropped
    assert ds.report["splits"]["test"]["queries_without_positive"] == 1
    assert ds.report["splits"]["test"]["queries_without_positive_ids"] == ["q2"]
    assert ds.corpus["d1"].content() == "Queue restart the worker"


def test_malformed_json_names_line(tmp_path):
    err = _error(read_corpus, _corpus_with(tmp_path, '{"_id": "d2", "title": "x", "text": '))
    assert err.line == 2 and "corpus.jsonl:2" in str(err) and "malformed JSON" in str(err)


@pytest.mark.parametrize("missing", ["_id", "text", "title"])
def test_missing_field(tmp_path, missing):
    doc = {"_id": "d2", "title": "t", "text": "x"}
    del doc[missing]
    err = _error(read_corpus, _corpus_with(tmp_path, json.dumps(doc)))
    assert (err.line, err.field) == (2, missing) and "missing field" in str(err)


def test_non_string_field(tmp_path):
    err = _error(read_corpus, _corpus_with(tmp_path, json.dumps({"_id": "d2", "title": "t", "text": 5})))
    assert (err.line, err.field) == (2, "text") and "expected a string" in str(err)


def test_duplicate_id_names_both_lines(tmp_path):
    err = _error(read_corpus, _corpus_with(tmp_path, json.dumps(DOCS[0])))
    assert (err.line, err.field) == (2, "_id") and "first on line 1" in str(err)


@pytest.mark.parametrize("text", ["", "   \t "])
def test_empty_or_whitespace_text(tmp_path, text):
    path = tmp_path / "queries.jsonl"
    path.write_text(json.dumps({"_id": "q1", "text": text}) + "\n", encoding="utf-8")
    err = _error(read_queries, path)
    assert (err.line, err.field) == (1, "text") and "empty text" in str(err)


def test_invalid_utf8_names_line(tmp_path):
    path = tmp_path / "queries.jsonl"
    path.write_bytes(b'{"_id": "q1", "text": "ok"}\n{"_id": "q2", "text": "caf\xe9"}\n')
    err = _error(read_queries, path)
    assert err.line == 2 and "invalid UTF-8" in str(err)


def test_qrels_unknown_query_and_document(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq9\td1\t1\n", encoding="utf-8")
    err = _error(read_qrels, path, {"q1": 1}, {"d1": 1})
    assert (err.line, err.field) == (3, "query-id") and "unknown query id 'q9'" in str(err)
    path.write_text("query-id\tcorpus-id\tscore\nq1\td7\t1\n", encoding="utf-8")
    err = _error(read_qrels, path, {"q1": 1}, {"d1": 1})
    assert (err.line, err.field) == (2, "corpus-id")


@pytest.mark.parametrize("row,reason", [("q1\td1\t1.5", "not an integer"), ("q1\td1", "columns")])
def test_qrels_bad_score(tmp_path, row, reason):
    path = tmp_path / "test.tsv"
    path.write_text(f"query-id\tcorpus-id\tscore\n{row}\n", encoding="utf-8")
    err = _error(read_qrels, path)
    assert err.line == 2 and reason in str(err)


def test_trec_qrels_format(tmp_path):
    path = tmp_path / "q.txt"
    path.write_text("q1 0 d1 2\nq1 0 d2 0\n", encoding="utf-8")
    assert read_qrels(path) == {"q1": {"d1": 2, "d2": 0}}


def test_missing_file_is_named(tmp_path):
    err = _error(read_corpus, tmp_path / "nope.jsonl")
    assert "nope.jsonl" in str(err) and "not found" in str(err)


def test_title_only_and_empty_documents_are_kept_and_counted(tmp_path):
    docs = [{"_id": "d1", "title": "Wireless adapter", "text": ""},  # title-only (TREC-COVID has many)
            {"_id": "d2", "title": "", "text": ""},  # every field empty (FiQA has some)
            {"_id": "d3", "title": "  ", "text": "\t"},  # blank counts as empty
            {"_id": "d4", "title": "", "text": "flush the cache"}]
    root = write_beir(tmp_path / "ds", docs, QUERIES, {"test": [("q1", "d2", 1)]})
    ds = load_dataset(root)
    assert list(ds.corpus) == ["d1", "d2", "d3", "d4"] and ds.report["documents_without_text"] == 2
    assert [ds.corpus[d].content() for d in ds.corpus] == ["Wireless adapter", "", "", "flush the cache"]
    assert ds.corpus["d1"].content(["text"]) == ""  # content is the indexed fields only
    assert empty_documents(ds.corpus) == ["d2", "d3"]
    assert empty_documents(ds.corpus, ["text"]) == ["d1", "d2", "d3"]
    assert empty_documents_note(ds.corpus, consequence="kept") == \
        "2 documents with no text in title+text (d2, d3): kept"
    assert empty_documents_note({"d4": ds.corpus["d4"]}) is None


def test_gzipped_files_in_a_beir_folder(tmp_path):
    import gzip

    root = write_beir(tmp_path / "ds", DOCS, QUERIES, {"test": [("q1", "d1", 2)]})
    for name in ("corpus.jsonl", "qrels/test.tsv"):
        (root / f"{name}.gz").write_bytes(gzip.compress((root / name).read_bytes().replace(b"\n", b"\r\n")))
        (root / name).unlink()
    ds = load_dataset(root)
    assert list(ds.corpus) == ["d1", "d2"] and ds.qrels == {"test": {"q1": {"d1": 2}}}
    assert ds.corpus["d2"].text == "flush the resolver cache"  # CRLF: no stray "\r"


UTF8_BOM = "\ufeff".encode()


@pytest.mark.parametrize("packed", [False, True])
def test_a_leading_byte_order_mark_is_not_part_of_the_first_id(tmp_path, packed):
    # Notepad and Excel save UTF-8 with a BOM; read as text it would make the first id "\ufeffd1"
    # (and the BEIR qrels header a row whose score is "score")
    import gzip

    root = write_beir(tmp_path / "ds", DOCS, QUERIES, {"test": [("q1", "d1", 2), ("q2", "d2", 1)]})
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        data = UTF8_BOM + (root / name).read_bytes()
        if packed:
            (root / name).unlink()
            (root / f"{name}.gz").write_bytes(gzip.compress(data))
        else:
            (root / name).write_bytes(data)
    ds = load_dataset(root)
    assert list(ds.corpus) == ["d1", "d2"] and list(ds.queries) == ["q1", "q2"]
    assert ds.qrels == {"test": {"q1": {"d1": 2}, "q2": {"d2": 1}}}
    trec = tmp_path / "qrels.txt"
    trec.write_bytes(UTF8_BOM + b"q1 0 d1 2\n")
    assert read_qrels(trec) == {"q1": {"d1": 2}}


def test_a_byte_order_mark_inside_a_file_or_utf16_is_named(tmp_path):
    joined = tmp_path / "joined.txt"  # two BOM-prefixed files concatenated: the second mark is mid-file
    joined.write_bytes(UTF8_BOM + b"q1 0 d1 1\n" + UTF8_BOM + b"q2 0 d2 1\n")
    err = _error(read_qrels, joined)
    assert (err.line, err.field) == (2, "query-id") and "byte-order mark" in str(err)
    utf16 = tmp_path / "utf16.txt"
    utf16.write_bytes("q1 0 d1 1\n".encode("utf-16"))
    err = _error(read_qrels, utf16)
    assert err.line == 1 and "UTF-16" in str(err)


@pytest.mark.parametrize("bad_id,char", [("d 2", "U+0020 SPACE"), ("d\t2", "U+0009 TAB"),
                                         ("d2\n", "U+000A LINE FEED"), (" d2", "U+0020 SPACE"),
                                         ("d\u00a02", "U+00A0 NO-BREAK SPACE"), ("d\x1c2", "U+001C")])
@pytest.mark.parametrize("reader", [read_corpus, read_queries])
def test_ids_with_whitespace_are_refused_where_they_enter(tmp_path, reader, bad_id, char):
    # a TREC run or qrels line is cut at whitespace: "q1 Q0 d 2 1 0.5 t" has 7 columns
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps({"_id": "d1", "title": "", "text": "x"}) + "\n"
                    + json.dumps({"_id": bad_id, "title": "", "text": "y"}) + "\n", encoding="utf-8")
    err = _error(reader, path)
    assert (err.path, err.line, err.field) == (str(path), 2, "_id")
    assert f"{bad_id!r} contains whitespace ({char})" in str(err)


@pytest.mark.parametrize("row,field,reason", [
    ("q 1\td1\t1", "query-id", "has spaces inside"),  # by whitespace: TREC row (q, 1, d1, 1), "q" judged
    ("q1\td 1\t1", "corpus-id", "has spaces inside"),
    ("q1\t0\td 1\t1", "corpus-id", "has spaces inside"),
    ("q1\t0\t\t1", "corpus-id", "column 3 is empty"),  # by whitespace: BEIR row (q1, "0", 1)
    ("q1 0\rd1 1", "corpus-id", "CARRIAGE RETURN"),  # a bare CR inside a line: by whitespace (q1, 0, d1, 1)
])
def test_qrels_columns_that_would_be_guessed_are_refused(tmp_path, row, field, reason):
    path = tmp_path / "test.tsv"
    path.write_text(f"query-id\tcorpus-id\tscore\nq1\td1\t1\n{row}\n", encoding="utf-8", newline="")
    err = _error(read_qrels, path)
    assert (err.line, err.field) == (3, field) and reason in str(err)


@pytest.mark.parametrize("row", ["q\u00a01 d1 1", "q1\u2003d1 1"])  # no-break space, em space
def test_qrels_column_with_unicode_whitespace_is_refused(tmp_path, row):
    # str.split() cuts at U+00A0: "q\u00a01 d1 1" would be read as the TREC row (q, 1, d1, 1)
    path = tmp_path / "q.txt"
    path.write_text(f"q1 0 d1 1\n{row}\n", encoding="utf-8")
    err = _error(read_qrels, path)
    assert err.line == 2 and "contains whitespace" in str(err)


def test_qrels_tab_separated_and_trec_rows_still_read(tmp_path):
    path = tmp_path / "q.txt"
    path.write_text("q1\t0\td1\t2\r\nq1 0 d2 0\n\tq2\t0\td3\t1\t\n", encoding="utf-8")  # tabs, spaces, CRLF
    assert read_qrels(path) == {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}}
    path.write_text("q1 0 d1 2\nq2  0\td3 1\n", encoding="utf-8")  # one line mixes tabs and spaces
    err = _error(read_qrels, path)
    assert (err.line, err.field) == (2, None) and "mix tab and space separators" in str(err)


@pytest.mark.parametrize("score", ["1_0", "\u0661", "２"])  # int() takes all three
def test_qrels_score_must_be_ascii_digits(tmp_path, score):
    path = tmp_path / "q.txt"
    path.write_text(f"q1 0 d1 {score}\n", encoding="utf-8")
    err = _error(read_qrels, path)
    assert (err.line, err.field) == (1, "score") and "not an integer" in str(err)


def test_lone_surrogate_escape_is_refused(tmp_path):
    # json.loads accepts "\ud800", which no UTF-8 output can hold: the run writer would crash later
    path = tmp_path / "queries.jsonl"
    path.write_text('{"_id": "q1", "text": "ok \\ud83d\\ude00"}\n{"_id": "q2", "text": "bad \\ud800"}\n',
                    encoding="utf-8")
    err = _error(read_queries, path)
    assert err.line == 2 and "lone surrogate" in str(err)
    path.write_text('{"_id": "q1", "text": "ok \\ud83d\\ude00"}\n', encoding="utf-8")
    assert read_queries(path)["q1"].text == "ok \U0001f600"  # a pair is one character


def test_deeply_nested_json_is_an_input_error(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("[" * 100_000 + "\n", encoding="utf-8")
    err = _error(read_corpus, path)
    assert err.line == 1 and "malformed JSON" in str(err)


def test_id_check_covers_every_character_str_split_cuts_on():
    import sys

    from retrieval_lab.core.data import id_problem

    flagged = {c for c in map(chr, range(sys.maxunicode + 1)) if id_problem(c)}
    assert flagged == {c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace()} | {"\ufeff"}


def test_prepare_reads_gzipped_qrels_only(tmp_path):
    # README: qrels/<split>.tsv.gz is read when the plain file is absent; prepare must find it too
    import gzip

    from retrieval_lab.core.params import PrepareParams
    from retrieval_lab.prepare import prepare

    root = write_beir(tmp_path / "raw", DOCS, QUERIES, {"train": [("q1", "d1", 1)], "test": [("q2", "d2", 1)]})
    for split in ("train", "test"):
        plain = root / "qrels" / f"{split}.tsv"
        (root / "qrels" / f"{split}.tsv.gz").write_bytes(gzip.compress(plain.read_bytes()))
        plain.unlink()
    audit = prepare(root, tmp_path / "out", tmp_path / "heldout", PrepareParams(), log=lambda line: None)
    assert audit["mode"] == "given"
    assert load_dataset(tmp_path / "out").qrels == {"train": {"q1": {"d1": 1}}, "val": {}}
    assert read_qrels(tmp_path / "heldout" / "qrels" / "test.tsv") == {"q2": {"d2": 1}}
