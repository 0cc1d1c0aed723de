"""SciFact (BEIR) figures CI can afford: the base dense model reproduces the published nDCG@10.

BM25 is checked in tests/retrievers/test_bm25.py (seconds). This encodes the 5,183 abstracts
with the locked base model and retrieves the 300 test queries through the same commands the
pipeline uses. On a CPU with native bf16 (AVX512-BF16 or AMX) it encodes in bf16, as
``dense.bf16: true`` does, which halves the time; MTEB's figures hold in both precisions within
the same tolerance (measured: fp32 0.6451; bf16 0.6471 with AMX). While the suite's background
pipeline runs hold the cores it encodes on one thread at low priority (about 250 s of CPU, the
suite's largest test). Nothing is cached outside the test's temporary folder. Skipped, with the reason,
only when ../shared is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from command_runner import run_command
from pipeline_fixtures import LOW_PRIORITY

from retrieval_lab.core.data import load_dataset
from retrieval_lab.encoder import native_bf16
from retrieval_lab.metrics import measure_run
from retrieval_lab.runs import read_run

pytestmark = [pytest.mark.scifact, pytest.mark.slow]


def test_base_dense_model_matches_mteb(scifact_dir, tmp_path, cores_shared):
    emb, run_path = tmp_path / "emb", tmp_path / "dense.trec"
    precision = ["--set", "dense.bf16=true"] if native_bf16() else []
    # the pipeline's own encode command, in a process of its own so that it can yield the cores
    encode = [str(Path(sys.executable).parent / "retrieval-lab"), "encode", "--dataset", str(scifact_dir),
              "--output", str(emb), *precision]
    shared = {"OMP_NUM_THREADS": "1"} if cores_shared else {}
    done = subprocess.run([*(LOW_PRIORITY if cores_shared else []), *encode], env={**os.environ, **shared},
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((emb / "encode_report.json").read_text())
    # abstracts longer than 256 word pieces are truncated, counted, never silently
    assert report["documents"] == 5183 and report["truncated_documents"] > 0
    assert run_command("retrieve", ["--retriever", "dense", "--embeddings", str(emb), "--split", "test",
                                    "--output", str(run_path)]) == 0
    qrels = load_dataset(scifact_dir, ["test"]).qrels["test"]
    means = measure_run(qrels, read_run(run_path), ["nDCG@10", "AP@10", "R@100"]).means
    # MTEB (all-MiniLM-L6-v2, SciFact test): nDCG@10 0.645, MAP@10 0.596, Recall@100 0.925
    assert abs(means["nDCG@10"] - 0.645) <= 0.005, means
    assert abs(means["AP@10"] - 0.596) <= 0.005, means
    assert abs(means["R@100"] - 0.925) <= 0.01, means
