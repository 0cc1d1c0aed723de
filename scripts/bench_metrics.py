"""Time and peak memory of retrieval_lab.metrics against pytrec_eval on one large random run.

    .venv/bin/python scripts/bench_metrics.py [--queries 10000] [--depth 1000] [--seed 0] [--json out.json]

Both sides start from the same in-memory qrels and run dicts and produce per-query
values and means for the same nine measures; the values are checked equal. Each side
runs in its own subprocess; its peak memory is the growth of peak RSS (VmHWM, reset
through /proc/self/clear_refs) over the RSS it had with the data already built.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import _bench
import numpy as np

RESULT = _bench.JsonResult("scripts/bench_metrics.py", ("rows", "ratio", "max_abs_diff_means"))
GOAL = 1.0  # time ratio ours / pytrec_eval
OURS_TO_TREC = {
    "Success@1": "success_1", "Success@10": "success_10", "R@10": "recall_10", "R@100": "recall_100",
    "P@10": "P_10", "RR": "recip_rank", "nDCG@10": "ndcg_cut_10", "AP@10": "map_cut_10",
    "AP@100": "map_cut_100",
}


def make_data(queries: int, depth: int, seed: int, judged: int = 20, decimals: int = 4):
    """A run of ``depth`` docs per query (scores rounded: ties happen) and graded qrels,
    half of each query's judgments on retrieved documents, half elsewhere."""
    rng = np.random.default_rng(seed)
    corpus = 20 * depth
    run, qrels = {}, {}
    for q in range(queries):
        docs = rng.choice(corpus, size=depth + judged // 2, replace=False)  # (depth + judged/2,)
        scores = np.round(rng.random(depth), decimals)  # (depth,)
        ids = [f"d{d}" for d in docs.tolist()]
        run[f"q{q}"] = dict(zip(ids[:depth], scores.tolist()))
        picked = ids[:judged // 2] + ids[depth:]  # half retrieved (run order is random), half not
        grades = rng.integers(0, 4, size=len(picked))  # (judged,) graded 0..3
        grades[0] = max(grades[0], 1)  # every query has a positive, as pytrec_eval averages all
        qrels[f"q{q}"] = dict(zip(picked, grades.tolist()))
    return qrels, run


def _status(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def measure_side(side: str, queries: int, depth: int, seed: int) -> dict:
    qrels, run = make_data(queries, depth, seed)
    reset = _reset_peak()
    base = _status("VmRSS")
    start = time.perf_counter()
    if side == "ours":
        from retrieval_lab import metrics

        result = metrics.measure_run(qrels, run, list(OURS_TO_TREC))
        per_query, means = result.per_query, result.means
    else:
        import pytrec_eval

        evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(OURS_TO_TREC.values()))
        trec = evaluator.evaluate(run)
        per_query = {q: {m: v[t] for m, t in OURS_TO_TREC.items()} for q, v in trec.items()}
        means = {m: float(np.mean([v[m] for v in per_query.values()])) for m in OURS_TO_TREC}
    seconds = time.perf_counter() - start
    peak = _status("VmHWM") - base if reset else None
    return {"seconds": seconds, "peak_bytes": peak, "means": means,
            "sample": {q: per_query[q] for q in sorted(per_query)[:: max(1, queries // 200)]},
            "queries": len(per_query)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--side", choices=["ours", "pytrec_eval"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    RESULT.check(args)  # before any work: a bench may run for hours
    if args.side:
        print(json.dumps(measure_side(args.side, args.queries, args.depth, args.seed)))
        return 0
    results = {}
    for side in ("ours", "pytrec_eval"):
        out = subprocess.run([sys.executable, __file__, "--side", side, "--queries", str(args.queries),
                              "--depth", str(args.depth), "--seed", str(args.seed)],
                             check=True, capture_output=True, text=True).stdout
        results[side] = json.loads(out)
    ours, trec = results["ours"], results["pytrec_eval"]
    worst = max(abs(ours["means"][m] - trec["means"][m]) for m in OURS_TO_TREC)
    worst_q = max(abs(ours["sample"][q][m] - trec["sample"][q][m]) for q in trec["sample"] for m in OURS_TO_TREC)
    print(f"{args.queries} queries x {args.depth} docs, {len(OURS_TO_TREC)} measures")
    for side, r in results.items():
        peak = "n/a" if r["peak_bytes"] is None else f"{r['peak_bytes'] / 2**20:.1f} MiB"
        print(f"  {side:12s} {r['seconds']:7.2f} s   peak memory +{peak}")
    print(f"time ratio ours / pytrec_eval: {ours['seconds'] / trec['seconds']:.3f}")
    if ours["peak_bytes"] is not None and trec["peak_bytes"]:
        print(f"peak memory ratio: {ours['peak_bytes'] / trec['peak_bytes']:.3f}")
    print(f"max |difference|: means {worst:.2e}, sampled per-query values {worst_q:.2e}")
    RESULT.write(args.json, {
        "rows": [{"contender": side, "seconds": r["seconds"],
                  "peak_mb": None if r["peak_bytes"] is None else r["peak_bytes"] / 2**20, "means": r["means"]}
                 for side, r in results.items()],
        "ratio": ours["seconds"] / trec["seconds"], "goal": GOAL, "queries": args.queries, "depth": args.depth,
        "seed": args.seed, "max_abs_diff_means": worst, "max_abs_diff_per_query": worst_q})
    return 0 if worst < 1e-12 and worst_q < 1e-12 else 1


if __name__ == "__main__":
    sys.exit(main())
