"""Indexes know their corpus (issue 52, item 4): an index or embeddings folder records the sha256 of the corpus it was
built from, checked whenever it is read with a BEIR folder; a damaged array file is one line, never a traceback."""

from __future__ import annotations

import json

import numpy as np
import pytest
from beir_fixtures import write_beir
from command_runner import run_command

from retrieval_lab.core import fingerprint
from retrieval_lab.encoder import Embeddings, embed_dataset, write_embeddings

CORPUS = [{"_id": f"d{i}", "title": "", "text": f"document {i} about topic {i}"} for i in range(1, 6)]
QUERIES = [{"_id": f"q{i}", "text": f"topic {i}"} for i in range(1, 4)]
QRELS = {"test": [("q1", "d1", 1), ("q2", "d2", 1), ("q3", "d3", 1)]}


@pytest.fixture
def two(tmp_path):
    """A dataset, its BM25 index, and another dataset with the same ids and other texts (its qrels pass)."""
    a = write_beir(tmp_path / "a", CORPUS, QUERIES, QRELS)
    other = [{**d, "text": f"unrelated words {i}"} for i, d in enumerate(CORPUS)]
    b = write_beir(tmp_path / "b", other, QUERIES, QRELS)
    assert run_command("index", ["--retriever", "bm25", "--dataset", str(a), "--output", str(tmp_path / "idx")]) == 0
    return a, b, tmp_path / "idx"


def _retrieve(dataset, index, out) -> int:
    return run_command("retrieve", ["--retriever", "bm25", "--dataset", str(dataset), "--corpus", str(index),
                                    "--output", str(out)])


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_the_index_records_its_corpus_and_serves_it(two, capsys):
    a, _, index = two
    recorded = json.loads((index / fingerprint.FILE).read_text())
    assert recorded == fingerprint.of_dataset(a) and recorded["bytes"] == (a / "corpus.jsonl").stat().st_size
    assert _retrieve(a, index, index.parent / "ok.trec") == 0


def test_an_index_of_another_corpus_is_one_line(two, capsys):
    # before: exit 0, the other dataset's queries ranked over the first one's texts
    _, b, index = two
    capsys.readouterr()
    out = index.parent / "x.trec"
    assert _retrieve(b, index, out) == 2
    err = _one_line(capsys)
    assert f"{index} field '--corpus': was built from another corpus than {b / 'corpus.jsonl'}" in err
    assert not out.exists()


def test_an_index_recording_no_corpus_fails_closed(two, capsys):
    a, _, index = two
    (index / fingerprint.FILE).unlink()
    capsys.readouterr()
    assert _retrieve(a, index, index.parent / "x.trec") == 2
    assert "records no fingerprint of the corpus it was built from" in _one_line(capsys)


@pytest.mark.parametrize("name, fill, says", [
    # rows past the corpus (gaps of 63)
    ("postings.npy", 0x7F, ("postings.npy: postings that do not decode to df.npy's count of rows rising within the "
                            "documents (term 0)")),
    ("postings.npy", 0xFF, "postings.npy: postings that do not decode"),  # a varint that never ends
    ("postings.npy", 0x00, "postings.npy: postings that do not decode"),  # the same row twice (a gap of 0)
    ("offsets.npy", 0x7F, "offsets.npy: offsets do not run from 0 to the postings' size"),
    ("df.npy", 0x00, "postings.npy: postings longer than df.npy says (term 0)"),
    ("df.npy", 0x7F, "postings.npy: postings that do not decode"),  # more postings said than there are
])
def test_a_damaged_array_is_one_line(two, capsys, name, fill, says):
    a, _, index = two
    path = index / name
    data = bytearray(path.read_bytes())
    header = len(data) - np.load(path).nbytes  # the bytes after the .npy header are the values
    data[header:header + 8] = bytes([fill]) * 8
    path.write_bytes(bytes(data))
    capsys.readouterr()
    assert _retrieve(a, index, index.parent / "x.trec") == 2
    err = _one_line(capsys)
    assert f"{index}/{says}" in err and "damaged" in err


# ----------------------------------------------------------------------------- dense embeddings


class _Encoder:
    source, device, dim, last_truncated = {"model_dir": "fake"}, "cpu", 4, 0

    def encode(self, texts, *args):
        out = np.zeros((len(texts), 4), np.float32)
        out[:, 0] = 1.0
        return out


def test_encoding_records_the_corpus(tmp_path):
    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.core.params import DenseParams

    a = write_beir(tmp_path / "a", CORPUS, QUERIES, QRELS)
    emb = embed_dataset(_Encoder(), load_dataset(a), DenseParams(), ["title", "text"])
    assert emb.report["corpus"] == fingerprint.of_dataset(a)


def _embeddings(tmp_path, dataset, corpus=True):
    doc_ids = [d["_id"] for d in CORPUS]
    report = {"dataset": str(dataset), **({"corpus": fingerprint.of_dataset(dataset)} if corpus else {})}
    write_embeddings(Embeddings(doc_ids, np.eye(5, dtype=np.float32), ["q1", "q2", "q3"],
                                np.eye(5, dtype=np.float32)[:3], report), tmp_path / "emb")
    return tmp_path / "emb"


@pytest.mark.parametrize("how", ["--dataset", "--split"])
def test_embeddings_of_another_corpus_are_one_line(tmp_path, capsys, how):
    a = write_beir(tmp_path / "a", CORPUS, QUERIES, QRELS)
    emb = _embeddings(tmp_path, a)
    out = tmp_path / "x.trec"
    argv = ["--retriever", "dense", "--embeddings", str(emb), "--output", str(out)]
    assert run_command("retrieve", [*argv, "--dataset", str(a)]) == 0  # the control
    (a / "corpus.jsonl").write_text((a / "corpus.jsonl").read_text().replace("topic 2", "topic two"))
    extra = ["--dataset", str(a)] if how == "--dataset" else ["--split", "test"]  # --split: the report's folder
    capsys.readouterr()
    out.unlink()
    assert run_command("retrieve", [*argv, *extra]) == 2
    assert f"{emb} field '--embeddings': was built from another corpus than {a / 'corpus.jsonl'}" in _one_line(capsys)
    assert not out.exists()


def test_a_damaged_embeddings_array_is_one_line(tmp_path, capsys):
    a = write_beir(tmp_path / "a", CORPUS, QUERIES, QRELS)
    emb = _embeddings(tmp_path, a)
    path = emb / "doc_embeddings.npy"
    path.write_bytes(path.read_bytes()[:-7])  # cut short
    assert run_command("retrieve", ["--retriever", "dense", "--embeddings", str(emb), "--dataset", str(a),
                                    "--output", str(tmp_path / "x.trec")]) == 2
    assert f"{path}: unreadable array" in _one_line(capsys)
