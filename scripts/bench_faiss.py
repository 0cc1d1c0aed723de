"""FAISS factories against Flat on real-shaped embeddings: recall@100, queries/s, build time and memory.

    OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_faiss.py --embeddings EMB [--docs 1000000]
        [--json bench-results/faiss-real.json]

``EMB`` is an ``encode`` folder of a real collection (SciFact's 5,183 abstracts with the base model:
``retrieval-lab encode --dataset ../shared/data/scifact --output EMB``). Encoding a 1M-passage sample
is out of reach on 2 CPU cores (about 80 passages/s: 3.5 hours; docs/scale.md), so the documents are
*real-shaped*, not encodings of text (:func:`real_shaped`): each is one real abstract's embedding
moved by Gaussian noise drawn with the real embeddings' own covariance, renormalised, its scale chosen
so that a synthetic document's cosine to its real origin has the median of a real abstract's cosine to
its nearest other abstract. The queries are the real SciFact claims' embeddings (train and test).
Unlike the Gaussian clusters of ``bench_scale.py``, the spectrum (a few directions carry most of the
variance) and the query-to-document geometry are the model's; the density around each abstract is
not text's. Every factory's recall@100 is against ``Flat`` on the same vectors; each index is built
and searched in its own process, its peak resident memory read from ``/proc``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _bench

RESULT = _bench.JsonResult("scripts/bench_faiss.py", ("documents", "real_documents", "queries", "dim"))
DEPTH = 100
# factory -> the search-time settings tried on one build (HNSW: efSearch; IVF: nprobe); Flat is the truth
FACTORIES = [("Flat", [None]), ("HNSW32", [64, 256]), ("HNSW32,SQ8", [256]), ("IVF4096,Flat", [16, 64]),
             ("IVF4096,SQ8", [64]), ("IVF4096,PQ48", [64])]
TRAIN_PER_LIST = 39  # FAISS's own minimum training points per IVF list


def covariance_root(base: np.ndarray) -> np.ndarray:
    """[d, d] R with z @ R ~ N(0, cov(base)) for z ~ N(0, I): from the SVD of the centred rows / sqrt(n)."""
    _, s, vt = np.linalg.svd((base - base.mean(0)) / np.sqrt(len(base)), full_matrices=False)  # [d], [d, d]
    return (s[:, None] * vt).astype(np.float32)


def real_shaped(base: np.ndarray, n: int, scale: float, seed: int, block: int = 100_000) -> np.ndarray:
    """``n`` unit vectors: row i = normalise(base[j] + scale * z @ cov^(1/2)), j drawn uniformly, z ~ N(0, I).

    ``cov^(1/2)`` is :func:`covariance_root`, so the noise follows the embeddings' anisotropy. The first
    ``len(base)`` rows are ``base`` itself (the real documents stay in).
    """
    rng = np.random.default_rng(seed)
    root = covariance_root(base)
    out = np.empty((n, base.shape[1]), dtype=np.float32)
    out[:len(base)] = base
    for start in range(len(base), n, block):
        m = min(block, n - start)
        rows = base[rng.integers(0, len(base), m)] + scale * (rng.standard_normal((m, base.shape[1]), np.float32) @ root)
        out[start:start + m] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


def nearest_other_cosine(base: np.ndarray) -> float:
    """Median over rows of the cosine to the nearest other row (rows are unit vectors)."""
    sims = base @ base.T
    np.fill_diagonal(sims, -np.inf)
    return float(np.median(sims.max(1)))


def calibrate(base: np.ndarray, target: float, seed: int) -> float:
    """The noise scale whose median cosine between a synthetic row and its origin equals ``target`` (bisection)."""
    lo, hi = 0.0, 20.0
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((len(base), base.shape[1]), np.float32) @ covariance_root(base)
    for _ in range(40):
        mid = (lo + hi) / 2
        rows = base + mid * z
        cos = np.median(np.sum(rows * base, 1) / np.linalg.norm(rows, axis=1))
        lo, hi = (mid, hi) if cos > target else (lo, mid)
    return (lo + hi) / 2


def one_factory(docs_path: str, queries_path: str, factory: str, settings: list[int | None], seed: int) -> list[dict]:
    """Build ``factory`` over the memory-mapped documents, search every query at each setting; top-100 ids, costs."""
    import faiss

    docs = np.load(docs_path, mmap_mode="r")
    queries = np.load(queries_path)
    base = _bench.reset_peak()
    start = time.perf_counter()
    index = faiss.index_factory(docs.shape[1], factory, faiss.METRIC_INNER_PRODUCT)
    if not index.is_trained:
        lists = int(factory.split(",")[0][3:]) if factory.startswith("IVF") else 256
        rng = np.random.default_rng(seed)
        sample = np.sort(rng.choice(len(docs), size=min(len(docs), TRAIN_PER_LIST * lists), replace=False))
        index.train(np.ascontiguousarray(docs[sample]))
    for first in range(0, len(docs), 100_000):  # added in blocks: the matrix is never copied whole
        index.add(np.ascontiguousarray(docs[first:first + 100_000]))
    build = time.perf_counter() - start
    rows = []
    for setting in settings:
        if factory.startswith("HNSW"):
            index.hnsw.efSearch = setting
        elif setting is not None:
            index.nprobe = setting
        start = time.perf_counter()
        _, found = index.search(queries, DEPTH)
        search = time.perf_counter() - start
        rows.append({"factory": factory, "setting": setting, "build_seconds": build, "search_seconds": search,
                     "queries_per_second": len(queries) / search, "peak_mb": _bench.peak_mb(), "base_mb": base,
                     "found": found.tolist()})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embeddings", required=True, help="an encode folder of a real collection")
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", default=None,
                        help="where a scratch folder of its own holds the vectors (removed after; default: the system's)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    RESULT.check(args)  # before any work: a bench may run for hours

    import faiss

    emb = Path(args.embeddings)
    base = np.load(emb / "doc_embeddings.npy").astype(np.float32)
    queries = np.load(emb / "query_embeddings.npy").astype(np.float32)
    target = nearest_other_cosine(base)
    scale = calibrate(base, target, args.seed)
    scratch = tempfile.TemporaryDirectory(prefix="bench-faiss-", dir=args.work_dir)  # ours alone, removed after
    work = Path(scratch.name)
    docs = real_shaped(base, args.docs, scale, args.seed)
    np.save(work / "docs.npy", docs)
    np.save(work / "queries.npy", queries)
    real_nn = float(np.median((docs[len(base):len(base) + 20_000] @ base.T).max(1)))
    del docs
    rows, truth = [], None
    for factory, settings in FACTORIES:
        built = _bench.isolated(one_factory, str(work / "docs.npy"), str(work / "queries.npy"), factory, settings,
                                args.seed)
        for row in built:
            found = np.array(row.pop("found"))
            truth = found if truth is None else truth
            row["recall@100_vs_flat"] = float(np.mean([len(set(a) & set(b)) / DEPTH for a, b in zip(found, truth)]))
            rows.append(row)
            print(f"{factory:>14} {row['setting']!s:>5}: build {row['build_seconds']:7.1f} s, "
                  f"{row['queries_per_second']:8.0f} q/s, recall@100 {row['recall@100_vs_flat']:.3f}, "
                  f"peak {row['peak_mb']:.0f} MB", flush=True)
    out = {"documents": args.docs, "real_documents": len(base), "queries": len(queries), "dim": base.shape[1],
           "depth": DEPTH, "source": str(emb / "encode_report.json"),
           "model": json.loads((emb / "encode_report.json").read_text()).get("model", {}).get("name"),
           "nearest_other_cosine_real": target, "noise_scale": scale,
           "synthetic_to_nearest_real_cosine_median": real_nn, "seed": args.seed, "rows": rows,
           "machine": {"cpu_count": __import__("os").cpu_count(), "faiss": faiss.__version__},
           "command": "OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_faiss.py --embeddings EMB --docs "
                      f"{args.docs} --json bench-results/faiss-real.json"}
    scratch.cleanup()
    RESULT.write(args.json, out)


if __name__ == "__main__":
    main()
