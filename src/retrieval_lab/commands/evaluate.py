"""``retrieval-lab evaluate``: one run on one split of any BEIR folder (the DVC ``evaluate`` stage uses it too)."""

from __future__ import annotations

import argparse
import textwrap

from ..core.guard import FILE, FOLDER, INTO, Paths
from ..core.kinds import METRICS
from ..core.params_cli import add_params_args, params_of
from ..report_files import EVALUATE

HELP = ("measure one run on one split of a BEIR folder (raw or prepared) and diagnose its failed queries: "
        "metrics JSON, per-query values, diagnosis.md")
DESCRIPTION = textwrap.fill(HELP, 95) + """

Any BEIR folder works (corpus.jsonl, queries.jsonl, qrels/<split>.tsv): a folder with only
qrels/test.tsv is measured as it is. With qrels/train.tsv beside it, the means are also split
into seen and unseen queries (a relevant document is a training positive, or none is); without
one there are no strata, which matters only for a model fine-tuned on that split.
The failure diagnosis of every query without a positive in the top evaluate.diagnose_k is
written to REPORTS/diagnosis.md (and .json). Judged@k (always reported) is the share of the top k
that the qrels judge: with qrels that list only relevant documents it is low for every run, and
the measures count unjudged documents as misses. To only measure runs, see score-runs."""
PATHS = Paths(inputs={"--dataset": FOLDER, "--run": FILE, "--qrels": FILE, "--timing": FILE},
              outputs={"--metrics": FILE, "--reports": INTO}, written={"--reports": EVALUATE}, words=("--split",),
              kinds={"--metrics": METRICS})


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--dataset", required=True, help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/")
    parser.add_argument("--split", default="test", help="qrels split (default: test)")
    parser.add_argument("--qrels", help="the split's qrels file, when it is not the dataset's qrels/<split>.tsv "
                                        "(the pipeline's test qrels live in data/heldout/, out of training's reach)")
    parser.add_argument("--run", required=True, help="TREC run file")
    parser.add_argument("--metrics", required=True, help="metrics JSON to write")
    parser.add_argument("--reports", required=True, help="folder for per_query.json, curves and diagnosis")
    parser.add_argument("--timing", help="the run's timing file (retrieve --timing): its latency summary is "
                        "carried into the metrics JSON")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..evaluation import NO_TRAINING_SPLIT, run_evaluation
    from ..report_files import DIAGNOSIS_MD

    params = params_of(args)
    result = run_evaluation(args.dataset, args.split, args.run, args.metrics, args.reports, params,
                            log=lambda line: print(f"evaluate: {line}"), qrels_path=args.qrels,
                            timing_path=args.timing)
    ev = result.evaluation
    evaluated = ev.coverage.queries_evaluated
    shown = ", ".join(f"{m} {ev.means[m]:.4f}" for m in params.evaluate.measures)
    print(f"evaluate {args.run} on {args.split}: {evaluated} queries; {shown}")
    for measure, n in ev.coverage.queries_by_measure.items():
        print(f"  {measure} averages {n} of {evaluated} queries")
    strata = ev.strata
    if strata is None or strata.note is not None:
        print(f"  strata: {NO_TRAINING_SPLIT if strata is None else strata.note}")
    else:
        main = params.evaluate.measures[0] if "nDCG@10" not in ev.means else "nDCG@10"
        print("  strata: " + "; ".join(f"{name} ({len(getattr(strata, name))} queries) {main} "
                                       f"{strata.means[name][main]:.4f}" for name in ("seen", "unseen")))
    failed = len(result.diagnosis.failures)
    print(f"  diagnosis: {failed} queries without a positive in the top {result.diagnosis.k} -> "
          f"{Path(args.reports) / DIAGNOSIS_MD}")
    if result.latency is not None:
        lat = result.latency
        print(f"  latency: p50 {lat['p50_ms']:.2f} ms, p95 {lat['p95_ms']:.2f} ms, p99 {lat['p99_ms']:.2f} ms, "
              f"{lat['qps']:.1f} queries/s at concurrency {lat['concurrency']} (measured {lat['measured_at']})")
    if result.judged_warning:
        print(f"WARNING: Judged below {params.evaluate.judged_threshold}: many top documents are unjudged, "
              "so the measures are lower bounds")
        if result.only_relevant_judged:
            print("  (the qrels list only relevant documents, as most BEIR sets do: every other document is "
                  "unjudged, so a low Judged is expected; compare runs with each other on these qrels)")
    return 0
