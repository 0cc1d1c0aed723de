"""BM25 on SciFact: index the corpus, rank the 300 test queries (depth 100), write the run.

Ours (retrievers/bm25.py: our tokenizer and sparse index) against bare bm25s doing the same work
with its own tokenizer (same stopwords and stemmer), and against rank_bm25 (BM25Okapi on
our tokens). Each contender runs in a fresh process per round; the time is its fastest
round, memory its process's peak RSS (base: RSS before the timed work).
Goal: ours <= 1.5x bare bm25s.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_bm25.py [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import _bench

DEPTH = 100


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
    print(_bench.markdown(rows, ["contender", "seconds", "x_bm25s", "peak_mb", "base_mb", "nDCG@10", "rounds"]))
    ratio = rows[0]["x_bm25s"]
    print(f"\nours / bm25s = {ratio:.2f}x (goal <= 1.5x): {'met' if ratio <= 1.5 else 'NOT met'}")
    _bench.write_json(args.json, {"rows": rows, "ours_over_bm25s": ratio, "goal": 1.5})


if __name__ == "__main__":
    main()
