"""scripts/bench_bm25.py on a tiny BEIR folder: every contender, tantivy's field norms, the JSON's goals."""

from __future__ import annotations

import json
import os
import random
import sys

import pytest
from beir_fixtures import load_script, write_beir

WORDS = ["cell", "cells", "gene", "protein", "tumour", "mice", "the", "of", "growth", "immune", "virus", "dose",
         "patients", "trial", "β-cells", "10–20"]


@pytest.fixture(scope="module")
def bench():
    yield from load_script("bench_bm25")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    rng = random.Random(4)
    corpus = [{"_id": f"d{i}", "title": rng.choice(WORDS).title(),
               "text": " ".join(rng.choices(WORDS, k=5 + 7 * i))} for i in range(30)]  # 5 to 208 words
    queries = [{"_id": f"q{i}", "text": " ".join(rng.sample(WORDS, 3))} for i in range(8)]
    qrels = {"test": [(f"q{i}", f"d{(5 * i) % 30}", 1) for i in range(8)]}
    return write_beir(tmp_path_factory.mktemp("beir"), corpus, queries, qrels)


def test_every_contender_ranks_the_same_collection(bench, folder):
    rows = {row["contender"]: row for row in (bench.ours(str(folder)), bench.tantivy_en_stem(str(folder)),
                                               bench.tantivy_stop(str(folder)))}
    assert set(rows) == {"ours", "tantivy_en_stem", "tantivy_stop"}
    for row in rows.values():
        assert row["seconds"] > 0 and row["peak_mb"] >= row["base_mb"] > 0 and 0 < row["nDCG@10"] <= 1


def test_tantivys_field_norms_change_long_documents_only(bench, folder):
    norms = bench.tantivy_field_norms(str(folder))
    # lengths 6 to 209 tokens before stopwords: tantivy keeps a length exactly up to 40, above it a coarser step
    assert norms["exact_up_to"] == 40 and norms["documents"] == 30
    assert 0 < norms["documents_whose_length_changes"] < 30 and 0 < norms["max_relative_length_error"] < 0.15
    assert 0 < norms["nDCG@10_quantised"] <= 1 and norms["queries"] == 8


def test_the_json_holds_the_goals_against_bm25s_and_each_tantivy(bench, folder, tmp_path, monkeypatch):
    bound = []
    monkeypatch.setattr(bench._bench, "isolated", lambda fn, *args, cpu=None: bound.append(cpu) or fn(*args))
    out = tmp_path / "bm25.json"
    monkeypatch.setattr(sys, "argv", ["bench_bm25.py", "--data", str(folder), "--rounds", "2", "--skip-rank-bm25",
                                      "--json", str(out)])
    bench.main()
    result = json.loads(out.read_text())
    rows = {row["contender"]: row for row in result["rows"]}
    assert list(rows) == ["ours", "bm25s", "tantivy_en_stem", "tantivy_stop"]
    assert all(len(row["rounds"]) == 2 for row in rows.values())
    for name in ("tantivy_en_stem", "tantivy_stop"):
        ratios, met = result["tantivy"][name]["ratios"], result["tantivy"][name]["met"]
        assert ratios["seconds"] == rows["ours"]["seconds"] / rows[name]["seconds"]
        assert ratios["peak_mb"] == rows["ours"]["peak_mb"] / rows[name]["peak_mb"]
        assert met == {key: value <= 1.0 for key, value in ratios.items()}  # NaN (nothing to compare): not met
    assert bench._ratio(1.0, 0.0) != bench._ratio(1.0, 0.0) and bench._ratio(3.0, 2.0) == 1.5
    assert result["tantivy_field_norms"]["documents"] == 30 and len(result["load_average"]["start"]) == 3
    # every contender bound to the first usable CPU (the field norms, untimed, to none); CPU seconds recorded
    assert bound == [min(os.sched_getaffinity(0))] * 8 + [None] and result["cpu"] == bound[0]
    assert all(row["cpu_seconds"] > 0 for row in rows.values())


def test_a_contender_leaves_no_run_file_behind(bench, folder, tmp_path, monkeypatch):
    """Each contender writes its run, as a user would, into a scratch folder it removes: the suite once left one
    folder in the system's temporary directory per contender and run."""
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    written = []
    real = bench._bench.timed_cpu

    def spying(fn):
        done = real(fn)
        written.extend((p.name, p.stat().st_size) for p in scratch.rglob("run.trec"))
        return done

    monkeypatch.setattr(bench._bench, "timed_cpu", spying)
    bench.ours(str(folder))
    assert [name for name, _ in written] == ["run.trec"] and written[0][1] > 0
    assert list(scratch.iterdir()) == []
