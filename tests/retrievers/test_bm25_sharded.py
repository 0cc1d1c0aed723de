"""Sharded BM25 on a local Dask cluster of 2 worker processes: the merged run is the one index's, byte for byte."""

import json
import random

import pytest

from retrieval_lab.core.data import Doc, write_corpus
from retrieval_lab.core.params import Params
from retrieval_lab.retrievers.bm25 import BM25Retriever
from retrieval_lab.retrievers.bm25_sharded import global_plans, merge, search_shard, shard_stats, split_corpus
from retrieval_lab.runs import format_run

distributed = pytest.importorskip("distributed")

FIELDS = ["title", "text"]


def _collection(n_docs: int = 600, n_queries: int = 60):
    """Zipf-ish words (stopwords and inflected forms included), so idf and avgdl differ between shards."""
    rng = random.Random(46)
    words = [f"w{i}" for i in range(300)] + ["the", "of", "and", "running", "runs", "runner", "cells", "cell"]
    weights = [1 / (i + 2) for i in range(len(words))]
    corpus = {}
    for i in range(n_docs):
        text = " ".join(rng.choices(words, weights, k=rng.randint(0, 60)))
        title = " ".join(rng.choices(words, weights, k=rng.randint(0, 6))).title()
        corpus[f"doc{i:04d}"] = Doc(f"doc{i:04d}", title, text)
    queries = {f"q{i}": " ".join(rng.choices(words, weights, k=rng.randint(1, 6))) for i in range(n_queries)}
    queries["unknown"] = "zebra"
    return corpus, queries


def test_three_shards_on_two_local_workers_give_the_single_index_run_byte_for_byte(tmp_path):
    from retrieval_lab.retrievers.bm25_sharded import sharded_search

    corpus, queries = _collection()
    params, depth = Params(), 20
    write_corpus(tmp_path / "corpus.jsonl", corpus)
    shards = split_corpus(tmp_path / "corpus.jsonl", 3, tmp_path / "shards")
    assert [len(p.read_text().splitlines()) for p in shards] == [200, 200, 200]

    single = BM25Retriever(corpus, params.tokenizer, params.bm25, FIELDS).search(queries, depth)
    expected = format_run(single, "bm25")
    assert expected.count("\n") > 1000 and single["unknown"] == {}

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  worker_dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        merged = sharded_search(client, shards, queries, params.tokenizer, params.bm25, FIELDS, depth)
    assert format_run(merged, "bm25") == expected


def test_shard_local_statistics_would_change_the_run_global_ones_do_not(tmp_path):
    """Without step 2 (each shard its own N, df, avgdl) the scores differ: the test above can fail."""
    from retrieval_lab.retrievers.bm25 import BM25Index, query_plan
    from retrieval_lab.tokenizer import Tokenizer

    corpus, queries = _collection(300, 30)
    params, depth = Params(), 10
    docs = list(corpus.values())
    shards = [BM25Index.from_corpus(docs[a:b], params.tokenizer, FIELDS) for a, b in ((0, 100), (100, 300))]
    tokenize = Tokenizer(params.tokenizer).tokenize
    tokens = {q: tokenize(t) for q, t in queries.items()}
    expected = format_run(BM25Retriever(corpus, params.tokenizer, params.bm25, FIELDS).search(queries, depth), "bm25")

    distinct = sorted({t for ts in tokens.values() for t in ts})
    total, plans = global_plans([shard_stats(s, distinct) for s in shards], tokens)
    assert (total.documents, total.total_length) == (300, sum(int(s.lengths.sum()) for s in shards))
    runs = [search_shard(s, plans, total, params.bm25, depth) for s in shards]
    assert format_run(merge(runs, depth), "bm25") == expected
    with pytest.MonkeyPatch.context() as patch:  # shards pruning whatever their size: the same merged run
        import retrieval_lab.retrievers.bm25 as bm25_module

        patch.setattr(bm25_module, "_PRUNE_FROM", 0)
        patch.setattr(bm25_module, "_PRUNE_PER_DEPTH", 0)
        runs = [search_shard(s, plans, total, params.bm25, depth) for s in shards]
    assert format_run(merge(runs, depth), "bm25") == expected

    local_runs = []
    for s in shards:
        own = {q: [(s.terms[t], w, r) for t, w, r in query_plan(s, ts, s.stats)] for q, ts in tokens.items()}
        local_runs.append(search_shard(s, own, s.stats, params.bm25, depth))
    assert format_run(merge(local_runs, depth), "bm25") != expected


def test_split_corpus_keeps_order_and_refuses_zero_shards(tmp_path):
    from retrieval_lab.core.errors import InputError

    corpus, _ = _collection(7, 1)
    write_corpus(tmp_path / "corpus.jsonl", corpus)
    paths = split_corpus(tmp_path / "corpus.jsonl", 3, tmp_path / "out")
    ids = [[json.loads(line)["_id"] for line in p.read_text().splitlines()] for p in paths]
    assert ids == [list(corpus)[:3], list(corpus)[3:5], list(corpus)[5:]]
    with pytest.raises(InputError, match="shards must be positive"):
        split_corpus(tmp_path / "corpus.jsonl", 0, tmp_path / "out2")
