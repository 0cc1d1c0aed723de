"""Dense retrieval over shards on Dask: with Flat, the merged top-k is one Flat index's (the run byte for byte)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from retrieval_lab.retrievers.dense import build_index
from retrieval_lab.retrievers.dense_sharded import aligned_spans, index_shard, merge_top, search_shard

pytest.importorskip("distributed")
pytest_plugins = ["dask_fixtures"]  # dask_cluster: a LocalCluster of 2 workers


def _unit(rng, n: int, dim: int) -> np.ndarray:
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _embeddings(folder, docs: np.ndarray, queries: np.ndarray):
    folder.mkdir()
    np.save(folder / "doc_embeddings.npy", docs)
    np.save(folder / "query_embeddings.npy", queries)
    (folder / "doc_ids.txt").write_text("".join(f"d{i:04d}\n" for i in range(len(docs))))
    (folder / "query_ids.txt").write_text("".join(f"q{i}\n" for i in range(len(queries))))
    return folder


def test_merge_keeps_the_k_best_by_score_then_row_and_puts_missing_entries_last():
    shard_a = (np.array([[0.9, 0.5], [0.3, -3.4e38]], np.float32), np.array([[4, 1], [0, -1]]))
    shard_b = (np.array([[0.5, 0.2], [0.7, 0.1]], np.float32), np.array([[7, 9], [8, 5]]))
    scores, rows = merge_top([shard_a, shard_b], 3)
    # query 0: 0.9 (4), then 0.5 twice: row 1 before row 7; query 1: 0.7 (8), 0.3 (0), 0.1 (5); the -1 never comes
    assert rows.tolist() == [[4, 1, 7], [8, 0, 5]]
    assert scores.tolist() == np.array([[0.9, 0.5, 0.5], [0.7, 0.3, 0.1]], np.float32).tolist()


@pytest.fixture
def one_thread():
    """FAISS (and its BLAS) on one thread in this process, as in a LocalCluster's worker: the condition of a bit for
    bit equal Flat (several threads split the products otherwise)."""
    import faiss

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(threads)


def test_shards_are_cut_at_faiss_blocks_of_1024_vectors():
    assert aligned_spans(2600, 3) == [(0, 1024), (1024, 2048), (2048, 2600)]
    assert aligned_spans(200_000, 2) == [(0, 100_352), (100_352, 200_000)]  # 196 blocks, 98 each
    assert aligned_spans(700, 3) == [(0, 700)]  # one block: one shard
    assert aligned_spans(0, 2) == []


def test_sharded_flat_writes_one_flat_index_run_byte_for_byte(tmp_path, dask_cluster, one_thread, capsys):
    from command_runner import run_command

    address, _ = dask_cluster
    rng = np.random.default_rng(55)
    emb = _embeddings(tmp_path / "emb", _unit(rng, 2600, 48), _unit(rng, 45, 48))  # 3 blocks of FAISS's 1,024
    argv = ["--retriever", "dense", "--embeddings", str(emb), "--depth", "30"]
    assert run_command("retrieve", [*argv, "--output", str(tmp_path / "one.trec")]) == 0
    capsys.readouterr()
    assert run_command("retrieve", [*argv, "--output", str(tmp_path / "three.trec"), "--shards", "3",
                                    "--scheduler", address, "--timing", str(tmp_path / "t.json")]) == 0
    assert (tmp_path / "three.trec").read_bytes() == (tmp_path / "one.trec").read_bytes()
    assert (tmp_path / "one.trec").read_bytes().count(b"\n") == 45 * 30
    out = capsys.readouterr().out
    for verb in ("loaded", "searched"):
        assert sorted(re.findall(rf"shard-(\d+) {verb} \(\d of 3", out)) == ["00000", "00001", "00002"], out
    # the timing pass searches one query at a time (FAISS's other path): its run would be the same too
    single = build_index(np.load(emb / "doc_embeddings.npy"))
    query = np.load(emb / "query_embeddings.npy")[:1]
    shards = [index_shard(np.load(emb / "doc_embeddings.npy")[a:b], a, "Flat", 0) for a, b in ((0, 1024), (1024, 2600))]
    merged = merge_top([search_shard(s, query, 30) for s in shards], 30)
    scores, rows = single.search(query, 30)
    assert merged[0].tobytes() == scores.tobytes() and merged[1].tolist() == rows.tolist()


def test_at_a_cut_through_equal_scores_both_keep_the_same_scores_rank_for_rank(one_thread):
    """Documents 10-14 are one vector: a query equal to it scores them all 1.0, and a cut at 3 keeps three of them.
    One index keeps those its heap met in its own order, the merge the lowest rows: the same scores, rank for rank."""
    rng = np.random.default_rng(7)
    docs = _unit(rng, 300, 16)
    docs[10:15] = docs[10]
    queries = np.concatenate([docs[10:11], _unit(rng, 24, 16)])  # 25 queries: the BLAS path
    k = 3
    one_scores, one_rows = build_index(docs).search(queries, k)
    shards = [index_shard(docs[a:b], a, "Flat", 0) for a, b in ((0, 12), (12, 300))]
    scores, rows = merge_top([search_shard(s, queries, k) for s in shards], k)
    assert scores.tobytes() == one_scores.tobytes()  # every score, every rank, bit for bit
    assert rows[0].tolist() == [10, 11, 12] and set(one_rows[0].tolist()) <= set(range(10, 15))
    above = scores > scores[:, -1:]  # above each query's cut: the same documents; at it, tied ones of 10-14
    assert [set(r[a]) for r, a in zip(rows, above)] == [set(r[a]) for r, a in zip(one_rows, above)]
    tied = [q for q in range(len(queries)) if set(rows[q]) != set(one_rows[q])]
    assert tied and all(set(rows[q][~above[q]]) | set(one_rows[q][~above[q]]) <= set(range(10, 15)) for q in tied)


def test_faiss_search_reaches_every_shard_as_it_reaches_one_index(tmp_path, dask_cluster, capsys):
    """IVF4 with nprobe 4 scans every list: one index and 2 shards (each its own lists) both give the exact top k,
    the same run bytes (each score one dot product, wherever it is computed); the default nprobe 1 does not."""
    from command_runner import run_command

    from retrieval_lab.runs import read_run

    address, client = dask_cluster
    rng = np.random.default_rng(21)
    emb = _embeddings(tmp_path / "emb", _unit(rng, 2600, 16), _unit(rng, 12, 16))  # 3 blocks: 2 shards
    argv = ["--retriever", "dense", "--embeddings", str(emb), "--depth", "10", "--set", "dense.faiss_factory=IVF4,Flat",
            "--set", "dense.seed=1"]
    sharded = ["--shards", "2", "--scheduler", address]
    runs = {}
    for name, extra in [("one", ["--set", "dense.faiss_search=nprobe=4"]),
                        ("two", ["--set", "dense.faiss_search=nprobe=4", *sharded]), ("two-default", sharded),
                        ("flat", ["--set", "dense.faiss_factory=Flat"])]:
        assert run_command("retrieve", [*argv, *extra, "--output", str(tmp_path / f"{name}.trec")]) == 0
        runs[name] = (tmp_path / f"{name}.trec").read_bytes()
    assert runs["two"] == runs["one"]
    flat, two, default = (read_run(tmp_path / f"{n}.trec") for n in ("flat", "two", "two-default"))
    assert all(list(two[q]) == list(flat[q]) for q in flat)
    assert sum(list(default[q]) != list(flat[q]) for q in flat) > 6  # nprobe 1 on each shard: approximate
    capsys.readouterr()
    # a name the shards' index lacks: refused by the shard's task, one line naming the param, as one index refuses it
    assert run_command("retrieve", [*argv, *sharded, "--set", "dense.faiss_factory=Flat", "--set",
                                    "dense.faiss_search=nprobe=4", "--output", str(tmp_path / "x.trec")]) == 2
    assert capsys.readouterr().err == ("error: field 'dense.faiss_search': search setting 'nprobe=4' does not "
                                       "apply to 'Flat': could not set parameter nprobe\n")
    assert not (tmp_path / "x.trec").exists()

    # the other path (vectors held here, each shard's rows sent with its task), and a shard moved to another
    # worker: serialized by FAISS, which drops an IVF's max_codes; the setting is applied again where it lands
    import contextlib
    import pickle

    import faiss

    from retrieval_lab.core.params import DenseParams, Params
    from retrieval_lab.encoder import load_embeddings
    from retrieval_lab.retrievers.dense_sharded import ShardedDense

    params = Params(dense=DenseParams(faiss_factory="IVF4,Flat", seed=1, faiss_search="nprobe=4", shards=2))
    dense = ShardedDense.from_embeddings(load_embeddings(emb), params, connected=(contextlib.ExitStack(), client))
    try:
        assert dense.search({f"q{i}": "" for i in range(12)}, 10) == read_run(tmp_path / "one.trec")
    finally:
        dense.close()
    shard = pickle.loads(pickle.dumps(index_shard(_unit(rng, 300, 16), 0, "IVF4,Flat", 1, "nprobe=3,max_codes=50")))
    ivf = faiss.extract_index_ivf(shard.index)
    assert (shard.search, ivf.nprobe, ivf.max_codes) == ("nprobe=3,max_codes=50", 3, 50)
