"""The pool tsv read back for judging: what `retrieval-lab pool` wrote, checked line by line."""

from __future__ import annotations

import pytest
from beir_fixtures import write_beir
from judge_fixtures import CORPUS, PAIRS, QUERIES, write_tiny_pool

from retrieval_lab.core.data import load_dataset
from retrieval_lab.core.errors import InputError
from retrieval_lab.judging import read_pool


def test_the_pool_reads_back_in_its_order_with_what_judging_hides(tmp_path):
    pool = read_pool(write_tiny_pool(tmp_path / "pool.tsv"))
    assert pool.pairs == tuple(PAIRS) and pool.queries == ("q1", "q2", "q3") and not pool.whole_texts
    first = pool.items[0]
    assert (first.query_text, first.title, first.text, first.best_rank, first.retrievers) == (
        "printer offline", "Printer", "the printer shows offline", 1, ("a", "b"))
    assert "retrievers" not in first.to_json() and first.to_json(reveal=True)["best_rank"] == 1


def test_a_dataset_gives_whole_texts_and_checks_the_ids(tmp_path):
    long = "x " * 400
    corpus = [{"_id": d, "title": doc.title, "text": doc.text + (long if d == "d1" else "")} for d, doc in CORPUS.items()]
    folder = write_beir(tmp_path / "beir", corpus, [{"_id": q, "text": x.text} for q, x in QUERIES.items()],
                        {"test": [("q1", "d1", 1)]})
    data = load_dataset(folder)
    path = write_tiny_pool(tmp_path / "pool.tsv")
    pool = read_pool(path, data.queries, data.corpus)
    assert pool.whole_texts and pool.items[0].text.endswith(long)
    del data.corpus["d6"]
    with pytest.raises(InputError, match=r"pool.tsv:7 field 'doc_id': unknown document id 'd6'"):
        read_pool(path, data.queries, data.corpus)


@pytest.mark.parametrize(("edit", "said"), [
    (lambda lines: [lines[0].replace("query_text", "question")] + lines[1:], ":1: header lacks column(s) query_text"),
    (lambda lines: lines[:2] + [lines[1]], ":3 field 'doc_id': pair (q1, d1) repeated (first on line 2)"),
    (lambda lines: lines[:1] + [lines[1] + "1"], ":2 field 'score': score '1' already filled in"),
    (lambda lines: lines[:1] + [lines[1].replace("\t1\ta,b", "\tfirst\ta,b")], ":2 field 'best_rank'"),
    (lambda lines: lines[:1] + [lines[1].replace("q1", "q 1", 1)], ":2 field 'query_id': id 'q 1' contains"),
    (lambda lines: lines[:1] + [lines[1] + "\textra"], ":2: expected 8 tab-separated columns, got 9"),
    (lambda lines: lines[:1], ":no pair to judge"),
], ids=["header", "repeated", "filled", "rank", "id", "columns", "empty"])
def test_a_bad_pool_is_refused_in_one_line(tmp_path, edit, said):
    path = write_tiny_pool(tmp_path / "pool.tsv")
    path.write_text("\n".join(edit(path.read_text().splitlines())) + "\n")
    with pytest.raises(InputError) as info:
        read_pool(path)
    assert said.lstrip(":") in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("column", ["query_id", "doc_id", "score", "notes"])
def test_a_column_twice_in_the_header_is_refused_in_one_line(tmp_path, column):
    # hostile M9: the first of two query_id columns was read as the ids and the second ignored, without a word
    path = write_tiny_pool(tmp_path / "pool.tsv")
    lines = path.read_text().splitlines()
    path.write_text("\n".join([f"{column}\t{lines[0]}\t{column}" if column == "notes" else f"{column}\t{lines[0]}"]
                              + [f"x\t{line}" + ("\ty" if column == "notes" else "") for line in lines[1:]]) + "\n")
    with pytest.raises(InputError) as info:
        read_pool(path)
    assert f"pool.tsv:1 field '{column}': column '{column}' appears twice in the header (columns 1 and " \
        in str(info.value), str(info.value)
