"""Issue 42's smaller failures: each a one-line error or the documented behaviour, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from beir_fixtures import write_beir
from test_cli_errors import CORPUS, QRELS, QUERIES, RUN, beir, error_line, params  # noqa: F401  (fixtures)

from retrieval_lab import cli
from retrieval_lab.core.data import read_qrels


def test_a_grade_beyond_a_32_bit_integer_is_a_one_line_error(tmp_path, capsys):
    # was an OverflowError traceback
    qrels = tmp_path / "q.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq2\td2\t99999999999999999999\n")
    run = tmp_path / "r.trec"
    run.write_text(RUN)
    err = error_line(["score-runs", str(qrels), str(run), "-m", "nDCG@10"], capsys)
    assert f"{qrels}:2 field 'score': score 99999999999999999999 is outside -2147483648..2147483647" in err
    qrels.write_text("query-id\tcorpus-id\tscore\nq2\td2\t2147483647\n")
    assert read_qrels(qrels) == {"q2": {"d2": 2147483647}}


def test_a_key_given_twice_in_one_record_is_refused(tmp_path, capsys, params):  # noqa: F811
    # was taken silently: JSON keeps the last "_id"
    corpus = tmp_path / "c" / "corpus.jsonl"
    write_beir(tmp_path / "c", CORPUS, QUERIES, QRELS)
    lines = corpus.read_text().splitlines()
    lines[1] = '{"_id": "d2", "title": "t", "text": "x", "_id": "d9"}'
    corpus.write_text("\n".join(lines) + "\n")
    err = error_line(["retrieve", "--retriever", "bm25", "--dataset", str(tmp_path / "c"), "--split", "test",
                      "--output", str(tmp_path / "o.trec"), "--params", str(params)], capsys)
    assert f"{corpus}:2 field '_id': key '_id' appears twice in one object" in err


def test_runs_and_qrels_from_a_pipe_or_standard_input(tmp_path, beir):  # noqa: F811
    # `<(cat run.trec)` and /dev/stdin were "file not found"
    run = tmp_path / "r.trec"
    run.write_text(RUN)
    qrels = beir / "qrels" / "test.tsv"
    argv = [sys.executable, "-m", "retrieval_lab.cli", "score-runs", str(qrels), "/dev/stdin", "-m", "nDCG@10",
            "--json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with open(run, "rb") as stdin:
        piped = subprocess.run(argv, stdin=stdin, capture_output=True, text=True, env=env, check=False)
    direct = subprocess.run(argv[:5] + [str(run)] + argv[6:], capture_output=True, text=True, env=env, check=False)
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["stdin"] == json.loads(direct.stdout)["r.trec"]
    shell = subprocess.run(["bash", "-c", f"{' '.join(argv[:4])} <(cat {qrels}) <(gzip -c {run}) -m nDCG@10"],
                           capture_output=True, text=True, env=env, check=False)
    assert shell.returncode == 0, shell.stderr  # a pipe, gzip data in it too: read once, never reopened


def test_a_short_write_without_errno_names_the_output(tmp_path, beir, params, monkeypatch, capsys):  # noqa: F811
    # numpy on a full disk: OSError("2304 requested and 224 written"), no errno, no path: the path was lost
    def full(path, array, *a, **k):
        raise OSError("2304 requested and 224 written")

    monkeypatch.setattr(np, "save", full)
    from retrieval_lab import encoder

    fake = encoder.Embeddings(["d1"], np.ones((1, 2), np.float32), ["q1"], np.ones((1, 2), np.float32))
    out = tmp_path / "emb"
    with pytest.raises(OSError) as caught:
        encoder.write_embeddings(fake, out)
    assert cli._os_error(caught.value) == f"{out}: 2304 requested and 224 written"
    assert not out.exists()


def test_the_same_query_text_within_one_split_is_reported(tmp_path, capsys):
    docs = [{"_id": f"d{i}", "title": "", "text": f"doc {i}"} for i in range(4)]
    queries = [{"_id": "q1", "text": "Printer jam"}, {"_id": "q2", "text": "printer  JAM"},
               {"_id": "q3", "text": "other"}, {"_id": "q4", "text": "more"}]
    raw = write_beir(tmp_path / "raw", docs, queries, {"train": [("q3", "d3", 1), ("q4", "d0", 1)],
                                                       "test": [("q1", "d1", 1), ("q2", "d2", 1)]})
    assert cli.main(["prepare", "--raw", str(raw), "--output", str(tmp_path / "out"), "--heldout",
                     str(tmp_path / "held"), "--set", "prepare.val_from_train=0.15"]) == 0
    out = capsys.readouterr().out
    assert "the same query text under ids ['q1', 'q2'] in test" in out
    audit = json.loads((tmp_path / "held" / "split_audit.json").read_text())
    assert audit["leakage"]["same_text_in_one_split"] == [{"text": "printer jam", "split": "test",
                                                           "ids": ["q1", "q2"]}]
    # 0.15 of 2 training queries rounds to 0: said so, not "val_from_train is 0"
    assert audit["validation"] == "none (prepare.val_from_train 0.15 of 2 training queries rounds to 0)"
