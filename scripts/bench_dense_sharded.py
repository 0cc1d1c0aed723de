"""Dense retrieval over shards on a local Dask cluster: each shard's cost, the merge's, and recall@100 of an
approximate factory per shard against one Flat index.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_dense_sharded.py --embeddings EMB [--docs 200000]
        [--shards 1 2 4] [--workers 2] [--json bench-results/dense-sharded.json]

``EMB`` is an ``encode`` folder of SciFact (``retrieval-lab encode --dataset ../shared/data/scifact --output
EMB``): the documents are real-shaped as in ``scripts/bench_faiss.py`` (each a real abstract's embedding moved by
noise drawn with the embeddings' own covariance), the queries SciFact's 1,109 real claims. For each factory and
shard count S the vectors are cut into S contiguous shards, each indexed by a task of a LocalCluster of
``--workers`` processes of one thread (``retrievers/dense_sharded.py``: the tasks ``retrieve --shards`` runs),
every query searched on every shard, and the lists merged on the client (``merge_top``); the shards are cut at
multiples of FAISS's block of 1,024 vectors, as the command cuts them. Each task reports its
seconds and its worker's peak RSS (reset before each build); an index's bytes are its FAISS serialization. The
truth is one Flat index over all the vectors (S = 1, a task on one thread); Flat over S shards is checked against
it rank for rank, bit for bit.
On one 2-core machine the shards share the cores: the per-task seconds are what a shard costs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _bench
import bench_faiss
import bench_scale

RESULT = _bench.JsonResult("scripts/bench_dense_sharded.py", ("documents", "real_documents", "queries", "dim"))
DEPTH = 100
# factory -> search setting (HNSW: efSearch; IVF: nprobe; Flat: exact), as scripts/bench_faiss.py measures them on
# one index of 1M vectors; IVF's 1,024 lists suit the smallest shard measured here (39 training points a list,
# FAISS's minimum: 40,000 of a 50,000-vector shard). One factory string and one search setting serve every shard,
# as dense.faiss_factory and dense.faiss_search do (the setting given to load_shard as its search string)
FACTORIES = [("Flat", None), ("HNSW32,SQ8", 256), ("IVF1024,SQ8", 16)]


def search_string(factory: str, setting) -> str | None:
    """The ``dense.faiss_search`` string of a factory's search setting: efSearch for HNSW, nprobe for IVF."""
    if setting is None:
        return None
    return f"efSearch={setting}" if factory.startswith("HNSW") else f"nprobe={setting}"


def _build(path: str, start: int, end: int, factory: str, seed: int, setting) -> tuple:
    """A shard's index (the task of retrieve --shards, searched with ``setting`` as dense.faiss_search sets it) and
    its cost: a pair, so that the cost travels with the index if the scheduler moves it to another worker."""
    import faiss

    from retrieval_lab.retrievers.dense_sharded import load_shard

    _bench.reset_peak()
    began = time.perf_counter()
    shard = load_shard(path, start, end, factory, seed, search_string(factory, setting))
    seconds = time.perf_counter() - began
    return shard, {"documents": end - start, "build_seconds": seconds,
                   "index_bytes": int(faiss.serialize_index(shard.index).nbytes)}


def _search(built: tuple, queries: np.ndarray, k: int) -> tuple:
    from retrieval_lab.retrievers.dense_sharded import search_shard

    shard, cost = built
    began = time.perf_counter()
    found = search_shard(shard, queries, k)
    return found, {**cost, "search_seconds": time.perf_counter() - began, "worker_peak_mb": _bench.peak_mb()}


def measure(client, path: str, queries: np.ndarray, n: int, factory: str, setting, shards: int, seed: int) -> dict:
    from retrieval_lab.retrievers.dense_sharded import aligned_spans, merge_top

    indexes = [client.submit(_build, path, a, b, factory, seed, setting, pure=False)
               for a, b in aligned_spans(n, shards)]
    results = client.gather([client.submit(_search, i, queries, DEPTH, pure=False) for i in indexes])
    began = time.perf_counter()
    scores, rows = merge_top([found for found, _ in results], DEPTH)
    merge = time.perf_counter() - began
    del indexes
    return {"factory": factory, "setting": setting, "shards": shards, "per_shard": [c for _, c in results],
            "merge_seconds": merge, "scores": scores, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embeddings", required=True, help="an encode folder of SciFact")
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", default=None, help="where a scratch folder of its own holds the vectors")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    RESULT.check(args)  # before any work: a bench may run for hours

    import distributed

    emb = Path(args.embeddings)
    base = np.load(emb / "doc_embeddings.npy").astype(np.float32)
    queries = np.load(emb / "query_embeddings.npy").astype(np.float32)
    scale = bench_faiss.calibrate(base, bench_faiss.nearest_other_cosine(base), args.seed)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-dense-sharded-", dir=args.work_dir) as scratch:
        path = str(Path(scratch) / "docs.npy")
        np.save(path, bench_faiss.real_shaped(base, args.docs, scale, args.seed))
        with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                      dashboard_address=None, worker_dashboard_address=None) as cluster, \
                distributed.Client(cluster) as client:
            truth = None
            for factory, setting in FACTORIES:
                for shards in sorted(set(args.shards) | ({1} if factory == "Flat" else set())):
                    row = measure(client, path, queries, args.docs, factory, setting, shards, args.seed)
                    scores, found = row.pop("scores"), row.pop("rows")
                    if truth is None:  # Flat over one index: every other row is measured against it
                        truth = (scores, found)
                    row["recall@100_vs_flat"] = float(np.mean([len(set(a) & set(b)) / DEPTH
                                                               for a, b in zip(found, truth[1])]))
                    if factory == "Flat":
                        row["scores_identical_to_one_flat_index"] = bool(scores.tobytes() == truth[0].tobytes())
                    rows.append(row)
                    print(f"{factory:>11} x {shards}: recall@100 {row['recall@100_vs_flat']:.3f}, build "
                          f"{max(c['build_seconds'] for c in row['per_shard']):.1f} s, search "
                          f"{max(c['search_seconds'] for c in row['per_shard']):.2f} s, merge "
                          f"{row['merge_seconds'] * 1e3:.1f} ms", flush=True)
    out = {"documents": args.docs, "real_documents": len(base), "queries": len(queries), "dim": int(base.shape[1]),
           "depth": DEPTH, "workers": args.workers, "rows": rows, "machine": bench_scale.machine(),
           "command": f"OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_dense_sharded.py --embeddings EMB --docs "
                      f"{args.docs} --shards {' '.join(map(str, args.shards))} --workers {args.workers} "
                      "--json bench-results/dense-sharded.json"}
    RESULT.write(args.json, out)


if __name__ == "__main__":
    main()
