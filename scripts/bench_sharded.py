"""Sharded BM25 on a local Dask cluster: the cost model's terms, measured (time and memory per shard, merge).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_sharded.py [--docs 100000] [--queries 7000] [--depth 1000]
        [--shards 2 4] [--workers 2] [--json bench-results/sharded.json]

An MS MARCO-shaped synthetic collection (scripts/bench_scale.py, ``--shape msmarco``) is cut into S
contiguous shard files; a LocalCluster of ``--workers`` processes (one thread each) builds one index
per shard, sums the statistics (DFS), searches every query on every shard and the client merges
the top-k lists (retrievers/bm25_sharded.py). Each task reports its own seconds and its worker's
peak RSS (VmHWM: a worker process's peak over everything it ran so far); the client times each
phase and the merge. The merged run is compared byte for byte with one index's run of the same
collection (built and searched in this process). On one 2-core machine the shards share the cores:
the wall times are what this machine gives, the per-task seconds what a shard costs.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import _bench
import bench_scale

RESULT = _bench.JsonResult("scripts/bench_sharded.py", ("documents", "queries", "depth", "single_index"))

def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _build(path, tokenizer, fields):
    from retrieval_lab.retrievers.bm25_sharded import build_shard

    start = time.perf_counter()
    index = build_shard(path, tokenizer, fields)
    index.cost = {"build_seconds": time.perf_counter() - start, "postings": index.postings_count,
                  "documents": len(index.doc_ids), "index_mb": sum(a.nbytes for a in (index.offsets, index.postings,
                                                                                     index.df_array, index.lengths)) / 2**20}
    return index


def _search(index, plans, stats, params, depth):
    from retrieval_lab.retrievers.bm25_sharded import search_shard

    start = time.perf_counter()
    run = search_shard(index, plans, stats, params, depth)
    return run, {**index.cost, "search_seconds": time.perf_counter() - start, "worker_peak_mb": _peak_mb()}


def measure(folder: Path, shards: int, workers: int, depth: int) -> dict:
    import distributed

    from retrieval_lab.core.data import read_queries
    from retrieval_lab.core.params import Params
    from retrieval_lab.retrievers.bm25_sharded import global_plans, merge, shard_stats, split_corpus
    from retrieval_lab.runs import format_run
    from retrieval_lab.tokenizer import Tokenizer

    params = Params()
    fields = params.retrieve.fields
    queries = {q: v.text for q, v in read_queries(folder / "queries.jsonl").items()}
    files = split_corpus(folder / "corpus.jsonl", shards, folder / f"shards{shards}")
    phases = {}
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                                  worker_dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        start = time.perf_counter()
        indexes = [client.submit(_build, str(p), params.tokenizer, fields, pure=False) for p in files]
        distributed.wait(indexes)
        phases["build"] = time.perf_counter() - start
        start = time.perf_counter()
        tokenize = Tokenizer(params.tokenizer).tokenize
        tokens = {q: tokenize(t) for q, t in queries.items()}
        distinct = sorted({t for ts in tokens.values() for t in ts})
        stats = client.gather([client.submit(shard_stats, i, distinct, pure=False) for i in indexes])
        total, plans = global_plans(stats, tokens)
        phases["dfs"] = time.perf_counter() - start
        start = time.perf_counter()
        results = client.gather([client.submit(_search, i, plans, total, params.bm25, depth, pure=False)
                                 for i in indexes])
        phases["search"] = time.perf_counter() - start
    start = time.perf_counter()
    merged = merge([run for run, _ in results], depth)
    phases["merge"] = time.perf_counter() - start
    return {"shards": shards, "workers": workers, "phases_seconds": phases, "per_shard": [c for _, c in results],
            "run": format_run(merged, "bm25")}


def single(folder: Path, depth: int) -> dict:
    from retrieval_lab.core.data import corpus_file, iter_corpus, read_queries
    from retrieval_lab.core.params import Params
    from retrieval_lab.retrievers.bm25 import BM25Index, BM25Retriever
    from retrieval_lab.runs import format_run

    params = Params()
    queries = {q: v.text for q, v in read_queries(folder / "queries.jsonl").items()}
    base = _bench.reset_peak()
    start = time.perf_counter()
    index = BM25Index.build(((d.id, d.content(params.retrieve.fields)) for d in iter_corpus(corpus_file(folder))),
                            params.tokenizer, params.retrieve.fields)
    build = time.perf_counter() - start
    start = time.perf_counter()
    run = BM25Retriever.from_index(index, params.bm25).search(queries, depth)
    return {"build_seconds": build, "search_seconds": time.perf_counter() - start, "peak_mb": _bench.peak_mb(),
            "base_mb": base, "run": format_run(run, "bm25")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=7_000)
    parser.add_argument("--depth", type=int, default=1_000)
    parser.add_argument("--shards", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    RESULT.check(args)  # before any work: a bench may run for hours
    with tempfile.TemporaryDirectory(prefix="bench-sharded-") as tmp:
        folder = bench_scale.write_collection(Path(tmp) / "beir", args.docs, args.queries, args.seed,
                                              bench_scale.MSMARCO)
        reference = _bench.isolated(single, folder, args.depth)
        rows = []
        for shards in args.shards:
            row = measure(folder, shards, args.workers, args.depth)
            row["identical_to_single_index"] = row.pop("run") == reference["run"]
            rows.append(row)
            print(f"{shards} shards on {args.workers} workers: phases {row['phases_seconds']}, identical "
                  f"{row['identical_to_single_index']}", flush=True)
    reference.pop("run")
    out = {"documents": args.docs, "queries": args.queries, "depth": args.depth, "single_index": reference,
           "sharded": rows, "machine": bench_scale.machine()}
    print(f"single index: build {reference['build_seconds']:.1f} s, search {reference['search_seconds']:.1f} s, "
          f"peak {reference['peak_mb']:.0f} MiB")
    RESULT.write(args.json, out)


if __name__ == "__main__":
    main()
