"""The library API (``import retrieval_lab as rl``): docs/api.md's example runs and writes the CLI's bytes;
the names load lazily, without torch; the typed results hold hand-checked numbers."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import re
import subprocess
import sys

import pytest
from beir_fixtures import REPO
from command_runner import run_command

import retrieval_lab as rl

PAGE = REPO / "docs" / "api.md"


def _example() -> str:
    """The python block whose doc-test marker names this file: the one the page says a test runs."""
    text = PAGE.read_text(encoding="utf-8")
    marker = r"<!-- doc-test: skip:[^>]*tests/test_api.py::[^>]*-->"
    return re.search(marker + r"\n```python\n(.*?)```", text, re.DOTALL).group(1)


def test_the_pages_example_writes_what_the_commands_print(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # the page's bash step: the small BEIR folder (no params.yaml here: the built-in defaults)
    assert run_command("generate", ["--output", "support"]) == 0
    capsys.readouterr()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        # the repository's own page, the code under test
        exec(compile(_example(), str(PAGE), "exec"), {"__name__": "api_example"})  # noqa: S102
    printed = out.getvalue()

    qrels = "support/qrels/all.tsv"
    assert run_command("score-runs", [qrels, "bm25.trec", "dense.trec", "-m", "nDCG@10", "-m", "R@100",
                                      "-m", "Judged@100", "--json"]) == 0
    cli_scores = capsys.readouterr().out
    assert (tmp_path / "scores.json").read_text(encoding="utf-8") == cli_scores  # byte for byte
    assert run_command("compare-runs", [qrels, "bm25.trec", "dense.trec", "-m", "nDCG@10", "-m", "R@100",
                                        "--json"]) == 0
    cli_comparison = capsys.readouterr().out
    assert (tmp_path / "comparison.json").read_text(encoding="utf-8") == cli_comparison

    # and the numbers are real: an independent mean of the per-query values, and the verdict lines
    scores = json.loads(cli_scores)
    ndcg = [v["nDCG@10"] for v in rl.evaluate(rl.read_qrels(qrels), rl.read_run("bm25.trec"),
                                              ["nDCG@10"]).per_query.values()]
    assert scores["bm25.trec"]["nDCG@10"] == pytest.approx(math.fsum(ndcg) / len(ndcg), abs=1e-12)
    assert scores["bm25.trec"]["queries_evaluated"] == 200 and 0.3 < scores["bm25.trec"]["nDCG@10"] < 0.9
    rows = json.loads(cli_comparison)["measures"]
    for measure in ("nDCG@10", "R@100"):
        line = next(x for x in printed.splitlines() if x.startswith(f"{measure}: "))
        assert line.startswith(f"{measure}: {rows[measure]['mean_difference']:+.4f} ")
    assert "{'no_candidates': " in printed  # the diagnosis counts, every class listed

    assert run_command("diagnose", ["--dataset", "support", "--split", "all", "--run", "bm25.trec", "--json"]) == 0
    diagnosed = json.loads(capsys.readouterr().out)
    counts = {k: v for k, v in diagnosed["summary"].items() if k not in
              ("queries_with_positive", "diagnosed", "near_duplicates")}
    assert printed.splitlines()[-1] == str(counts)


def test_import_is_lazy_and_loads_no_model_library():
    code = ("import sys, retrieval_lab as rl\n"
            "assert 'torch' not in sys.modules and 'retrieval_lab.evaluation' not in sys.modules\n"
            "rl.evaluate; rl.BM25; rl.fuse; rl.compare; rl.diagnose; rl.load_beir\n"
            "assert 'torch' not in sys.modules, 'a lexical API name imported torch'\n"
            "print(sorted(set(rl.__all__) - set(dir(rl))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_library_leaves_the_allocator_to_the_caller_and_the_page_names_the_commands_setting(monkeypatch):
    """docs/api.md: every command keeps freed memory (cli.main), importing and using the library does not, and
    the function it names is the one the commands call."""
    from retrieval_lab import cli
    from retrieval_lab.core import memory

    assert "`retrieval_lab.core.memory.keep_freed_memory()`" in PAGE.read_text(encoding="utf-8")
    assert cli.keep_freed_memory is memory.keep_freed_memory
    calls = []
    monkeypatch.setattr(memory, "keep_freed_memory", lambda: calls.append("keep") or True)
    rows = rl.load_encoder("builtin", "cpu").encode(["cells divide", "a claim"])
    run = rl.BM25().index({"d1": "cells divide"}).search({"q": "cells"}, 1)
    assert rows.shape[0] == 2 and list(run["q"]) == ["d1"]
    assert calls == []


def test_every_public_name_resolves():
    for name in rl.__all__:
        assert getattr(rl, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        rl.nope  # noqa: B018


QRELS = {"q1": {"a": 1, "b": 0}, "q2": {"c": 2, "d": 1}, "q3": {"e": 1}, "q4": {"x": 0}}
RUN = {"q1": {"b": 3.0, "a": 2.0}, "q2": {"c": 1.0}, "q9": {"a": 1.0}}  # q3 absent; q4 has no positive


def test_evaluate_returns_means_counts_and_strata_worked_by_hand():
    # RR: q1 1/2, q2 1, q3 0 (absent) -> 1/2; R(rel=2)@1: only q2 has a judgment >= 2, found at 1 -> 1
    train = {"t1": {"c": 1}}  # c is a training positive: q2 is seen, q1 and q3 unseen
    result = rl.evaluate(QRELS, RUN, ["RR", "R(rel=2)@1"], train_qrels=train)
    assert result.means == {"RR": pytest.approx(0.5), "R(rel=2)@1": 1.0}
    assert result.query_counts == {"RR": 3, "R(rel=2)@1": 1}
    assert (result.coverage.queries_without_positive, result.coverage.judged_queries_absent_from_run,
            result.coverage.run_queries_not_in_qrels) == (1, 1, 1)
    assert (result.strata.seen, result.strata.unseen) == (("q2",), ("q1", "q3"))
    assert result.strata.means["unseen"]["RR"] == pytest.approx(0.25) and result.strata.note is None
    out = result.to_json()
    assert out["queries_evaluated[R(rel=2)@1]"] == 1 and out["seen"] == {"queries": 1, "RR": 1.0,
                                                                         "R(rel=2)@1": 1.0}
    assert "seen" not in rl.evaluate(QRELS, RUN, ["RR"]).to_json()  # no training split: no strata
    with pytest.raises(dataclasses.FrozenInstanceError):  # a result is not edited after the fact
        result.means = {}


def test_bm25_in_memory_is_the_retrieve_commands_run(tmp_path, capsys):
    from beir_fixtures import write_beir

    corpus = [{"_id": "d1", "title": "", "text": "reset the router password"},
              {"_id": "d2", "title": "", "text": "printer offline again"},
              {"_id": "d3", "title": "", "text": "router firmware"}]
    queries = [{"_id": "q1", "text": "router password"}, {"_id": "q2", "text": "printer"}]
    folder = write_beir(tmp_path / "ds", corpus, queries, {"test": [("q1", "d1", 1), ("q2", "d2", 1)]})
    data = rl.load_beir(folder)
    run = rl.BM25().index(data.corpus).search(data.split_queries("test"), k=10)
    assert list(run["q1"]) == ["d1", "d3"] and list(run["q2"]) == ["d2"]  # d2 shares no token with q1
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(folder), "--split", "test",
                                    "--output", str(tmp_path / "cli.trec")]) == 0
    rl.write_run(tmp_path / "api.trec", run, tag="bm25")
    assert (tmp_path / "api.trec").read_bytes() == (tmp_path / "cli.trec").read_bytes()
    texts = rl.BM25().index({d["_id"]: d["text"] for d in corpus}).search({"q": "router"}, k=1)
    assert list(texts["q"]) == ["d3"]  # the shorter document wins on one shared term (length normalisation)


def test_fuse_returns_a_typed_result():
    a, b = {"q": {"x": 2.0, "y": 1.0}}, {"q": {"y": 2.0, "z": 1.0}}
    result = rl.fuse([a, b], "rrf", value=1.0)
    # k = 1: x 1/2, y 1/3 + 1/2, z 1/3
    assert result.run == {"q": {"x": pytest.approx(0.5), "y": pytest.approx(5 / 6), "z": pytest.approx(1 / 3)}}
    assert result.to_json() == {"method": "rrf", "depth": 100, "tuned": False, "reason": "a value was given",
                                "param": "rrf_k", "chosen": 1.0}


def test_all_lists_exactly_the_lazy_names():
    assert sorted(rl.__all__) == sorted(["__version__", *rl._API])
    assert len(rl.__all__) == len(set(rl.__all__))


def test_a_beir_folder_written_reads_back_the_same(tmp_path):
    corpus = {"d1": rl.Doc("d1", "Router", "reset the password"), "d2": rl.Doc("d2", "", "printer offline")}
    queries = {"q1": rl.Query("q1", "router password")}
    qrels = {"test": {"q1": {"d1": 1, "d2": 0}}, "train": {"q1": {"d2": 1}}}
    rl.write_beir(tmp_path / "b", corpus, queries, qrels)
    back = rl.load_beir(tmp_path / "b")
    assert (back.corpus, back.queries, back.qrels) == (corpus, queries, qrels)
    run = {"q1": {"d1": 2.0, "d2": 2.0}}  # a tie: written in trec_eval's order, doc id descending
    rl.write_run(tmp_path / "r.trec", run, tag="t")
    assert list(rl.read_run(tmp_path / "r.trec")["q1"]) == ["d2", "d1"]
