"""SciFact (BEIR) figures CI can afford: the base dense model reproduces the published nDCG@10.

BM25 is checked in tests/retrievers/test_bm25.py (seconds). This encodes the 5,183 abstracts
with the locked base model and retrieves the 300 test queries through the same commands the
pipeline uses. On a CPU with native bf16 (AVX512-BF16 or AMX) it encodes in bf16, as
``dense.bf16: true`` does, which halves the time; MTEB's figures hold in both precisions within
the same tolerance (measured: fp32 0.6451; bf16 0.6471 with AMX). The encode (about 250 s of
CPU, the suite's largest job) starts in the background before the first test, at the lowest
priority, as the sharded encode (``dense.shards``: one one-thread Dask worker per core, the product's
own path past one process; bf16 on AMD Zen 4: 0.6457 either way), so it ends last and leaves no core
idle (``conftest.py``, ``pipeline_fixtures.py``). Nothing is cached outside the
test's temporary folder. Skipped, with the reason, when ../shared is absent, and on a CPU without native
bf16 unless asked (``--scifact-fp32``): there, in fp32, the encode alone is a third of the suite's CPU and takes
it past 10 minutes (``beir_fixtures.scifact_encode_skip_reason``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from beir_fixtures import REPO, scifact_encode_skip_reason
from command_runner import run_command

import retrieval_lab.encoder
from retrieval_lab.core.data import load_dataset
from retrieval_lab.metrics import measure_run
from retrieval_lab.runs import read_run

pytestmark = [pytest.mark.scifact, pytest.mark.slow]


def test_base_dense_model_matches_mteb(scifact_dir, scifact_base_encoding, tmp_path):
    emb, run_path = scifact_base_encoding, tmp_path / "dense.trec"
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


@pytest.mark.parametrize(("native", "cuda", "asked", "runs"), [
    (True, False, False, True), (False, True, False, True), (False, False, True, True), (False, False, False, False)])
def test_the_encode_is_left_out_only_where_the_cpu_computes_in_fp32_alone_and_nobody_asked(monkeypatch, native, cuda,
                                                                                           asked, runs):
    monkeypatch.setattr(retrieval_lab.encoder, "native_bf16", lambda: native)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    reason = scifact_encode_skip_reason(asked)
    assert (reason is None) == runs
    assert runs or ("no native bf16" in reason and "--scifact-fp32" in reason)


def test_pytest_takes_the_option_the_skip_and_docs_index_name():
    # --collect-only starts no background job: this costs a collection, not the encode
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                           "--scifact-fp32", "tests/test_scifact.py"], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0 and "test_base_dense_model_matches_mteb" in done.stdout, done.stdout + done.stderr
    assert "option `--scifact-fp32`" in (REPO / "docs" / "index.md").read_text()
