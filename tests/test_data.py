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
