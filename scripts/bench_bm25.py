"""BM25 on SciFact: index the corpus, rank the 300 test queries (depth 100), write the run.

Ours (retrievers/bm25.py: our tokenizer and sparse index) against bare bm25s doing the same work
with its own tokenizer (same stopwords and stemmer), and against rank_bm25 (BM25Okapi on
our tokens). Each contender runs in a fresh process per round; the time is its fastest
round, memory its process's peak RSS (base: RSS before the timed work; "added" = peak - base, the
memory the work itself took).
Goals (issue 46), in one run: ours <= 0.9x bare bm25s's time, ours' peak (and added) memory <= bm25s's,
nDCG@10 unchanged (0.6857).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_bm25.py [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import _bench

DEPTH = 100
GOALS = {"seconds": 0.9, "peak_mb": 1.0}  # ours / bm25s in the same run
NDCG = 0.6857  # ours' nDCG@10 before issue 46: the run must not change


def _setup(data: str):
    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.core.params import Params

    dataset = load_dataset(data, ["test"])
    queries = {q: v.text for q, v in dataset.split_queries("test").items()}
    return dataset, queries, Params()


def _finish(name: str, dataset, work, base: float) -> dict:
    from retrieval_lab.metrics import measure_run
    from retrieval_lab.runs import write_run

    def with_write():
        run = work()
        write_run(Path(tempfile.mkdtemp()) / "run.trec", run, name, DEPTH)
        return run

    seconds, run = _bench.timed(with_write)
    return {"contender": name, "seconds": seconds, "peak_mb": _bench.peak_mb(), "base_mb": base,
            "nDCG@10": measure_run(dataset.qrels["test"], run, ["nDCG@10"]).means["nDCG@10"]}


def ours(data: str) -> dict:
    from retrieval_lab.retrievers.bm25 import BM25Retriever

    dataset, queries, params = _setup(data)

    def work():
        bm25 = BM25Retriever(dataset.corpus, params.tokenizer, params.bm25, params.retrieve.fields)
        return bm25.search(queries, DEPTH)

    return _finish("ours", dataset, work, _bench.reset_peak())


def bare_bm25s(data: str) -> dict:
    import bm25s
    import Stemmer

    dataset, queries, params = _setup(data)
    doc_ids, qids = list(dataset.corpus), list(queries)
    texts = [dataset.corpus[d].content(params.retrieve.fields) for d in doc_ids]

    def work():
        stemmer = Stemmer.Stemmer("english")
        index = bm25s.BM25(k1=params.bm25.k1, b=params.bm25.b, method="lucene")
        index.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)
        tokens = bm25s.tokenize([queries[q] for q in qids], stopwords="en", stemmer=stemmer, show_progress=False)
        rows, scores = index.retrieve(tokens, k=DEPTH, show_progress=False)
        return {q: {doc_ids[j]: float(s) for j, s in zip(r, sc) if s > 0} for q, r, sc in zip(qids, rows, scores)}

    return _finish("bm25s", dataset, work, _bench.reset_peak())


def rank_bm25(data: str) -> dict:
    import numpy as np
    from rank_bm25 import BM25Okapi

    from retrieval_lab.retrievers.base import top_k
    from retrieval_lab.tokenizer import Tokenizer

    dataset, queries, params = _setup(data)
    doc_ids = list(dataset.corpus)

    def work():
        tokenize = Tokenizer(params.tokenizer).tokenize
        index = BM25Okapi([tokenize(dataset.corpus[d].content(params.retrieve.fields)) for d in doc_ids],
                          k1=params.bm25.k1, b=params.bm25.b)
        return {q: top_k(np.asarray(index.get_scores(tokenize(t))), doc_ids, DEPTH, positive_only=True)
                for q, t in queries.items()}

    return _finish("rank_bm25", dataset, work, _bench.reset_peak())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(_bench.SCIFACT))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-rank-bm25", action="store_true", help="it is the slow one")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    contenders = [ours, bare_bm25s] + ([] if args.skip_rank_bm25 else [rank_bm25])
    rows = _bench.compete(contenders, (args.data,), args.rounds)
    for row in rows:
        row["x_bm25s"] = row["seconds"] / rows[1]["seconds"]
        row["added_mb"] = row["peak_mb"] - row["base_mb"]
    print(_bench.markdown(rows, ["contender", "seconds", "x_bm25s", "peak_mb", "added_mb", "base_mb", "nDCG@10",
                                 "rounds"]))
    first, peer = rows[0], rows[1]
    ratios = {"seconds": first["x_bm25s"], "peak_mb": first["peak_mb"] / peer["peak_mb"],
              "added_mb": first["added_mb"] / peer["added_mb"]}
    met = {"seconds": ratios["seconds"] <= GOALS["seconds"], "peak_mb": ratios["peak_mb"] <= GOALS["peak_mb"],
           "added_mb": ratios["added_mb"] <= GOALS["peak_mb"],
           "nDCG@10": abs(first["nDCG@10"] - NDCG) < 5e-5}
    print("\nours / bm25s: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items())
          + f" (goals: time <= {GOALS['seconds']}x, memory <= {GOALS['peak_mb']}x); nDCG@10 {first['nDCG@10']:.4f} "
          f"(was {NDCG}): " + ("all met" if all(met.values()) else "NOT met: " + ", ".join(k for k, v in met.items()
                                                                                       if not v)))
    _bench.write_json(args.json, {"rows": rows, "ours_over_bm25s": ratios["seconds"], "ratios": ratios,
                                  "goal": GOALS["seconds"], "goals": GOALS, "met": met})


if __name__ == "__main__":
    main()
