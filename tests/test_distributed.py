"""Sharded encoding on 2 gloo processes: each rank encodes its contiguous shard, rank 0 gets the rows in order."""

from __future__ import annotations

import socket

import numpy as np
import torch

from retrieval_lab import distributed
from retrieval_lab.core.data import Dataset, Doc, Query
from retrieval_lab.core.params import DenseParams
from retrieval_lab.distributed import Distributed, shard
from retrieval_lab.encoder import embed_dataset


class _RankEncoder:
    """Row of text t on rank r: [len(t), r]; one text in four counts as truncated."""

    def __init__(self, rank: int):
        self.rank, self.dim, self.source, self.device, self.last_truncated = rank, 2, {}, "cpu", 0

    def encode(self, texts, batch_size, max_length, bf16):
        self.last_truncated = sum(1 for t in texts if len(t) % 4 == 0)
        return np.array([[len(t), self.rank] for t in texts], dtype=np.float32).reshape(len(texts), 2)


def _dataset(n_docs: int, n_queries: int) -> Dataset:
    corpus = {f"d{i}": Doc(f"d{i}", "", "x" * (i + 1)) for i in range(n_docs)}  # lengths 1..n_docs
    queries = {f"q{i}": Query(f"q{i}", "y" * (i + 1)) for i in range(n_queries)}
    return Dataset("tiny", corpus, queries, {})


def _worker(rank: int, world: int, port: int, out: str) -> None:
    import os

    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    distributed.GATHER_ROWS = 4  # several gather rounds, the last one partial
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        emb = embed_dataset(_RankEncoder(rank), _dataset(11, 1), DenseParams(), ["text"],
                            Distributed(rank, world))
        torch.save({"rank": rank, "docs": emb.doc_embeddings, "queries": emb.query_embeddings,
                    "report": emb.report}, f"{out}.{rank}")
    finally:
        dist.destroy_process_group()


def test_two_ranks_encode_their_shards_and_rank0_gets_every_row_in_order(tmp_path):
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_worker, args=(2, port, str(tmp_path / "out")), nprocs=2, join=True)
    main = torch.load(tmp_path / "out.0", weights_only=False)
    # 11 documents: rank 0 encodes d0-d5 (shard(11, 2, 0) = (0, 6)), rank 1 d6-d10; rows in document order
    assert main["docs"].tolist() == [[i + 1, 0 if i < 6 else 1] for i in range(11)]
    # 1 query: rank 0 has it, rank 1 an empty shard
    assert main["queries"].tolist() == [[1, 0]]
    # truncated (length divisible by 4): d3 (4) on rank 0, d7 (8) on rank 1 -> summed to 2; queries none
    assert main["report"]["truncated_documents"] == 2 and main["report"]["truncated_queries"] == 0
    assert main["report"]["processes"] == 2
    other = torch.load(tmp_path / "out.1", weights_only=False)
    assert other["docs"] is None and other["queries"] is None  # only rank 0 holds (and writes) the matrix


def test_one_process_is_the_plain_encode():
    emb = embed_dataset(_RankEncoder(0), _dataset(3, 2), DenseParams(), ["text"], Distributed())
    assert emb.doc_embeddings.tolist() == [[1, 0], [2, 0], [3, 0]]
    assert "processes" not in emb.report  # one process writes the report it always wrote


def test_a_rank_spans_its_shard():
    assert Distributed(1, 2).span(11) == shard(11, 2, 1) == (6, 11)
    assert [shard(1, 2, r) for r in range(2)] == [(0, 1), (1, 1)]  # more ranks than items: an empty shard
