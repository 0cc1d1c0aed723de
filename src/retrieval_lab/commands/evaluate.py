"""``retrieval-lab evaluate``: the DVC ``evaluate`` stage (one run, one split)."""

from __future__ import annotations

import argparse

from ..core.guard import FILE, FOLDER, INTO, Paths
from ..core.params_cli import add_params_args, params_of
from ..report_files import EVALUATE

HELP = "the evaluate stage: one run on one split of a prepared dataset -> metrics, per-query values, diagnosis"
PATHS = Paths(inputs={"--dataset": FOLDER, "--run": FILE, "--qrels": FILE},
              outputs={"--metrics": FILE, "--reports": INTO}, written={"--reports": EVALUATE}, words=("--split",))



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="prepared BEIR folder")
    parser.add_argument("--split", default="test", help="qrels split (default: test)")
    parser.add_argument("--qrels", help="the split's qrels file, when it is not the dataset's qrels/<split>.tsv "
                                        "(the pipeline's test qrels live in data/heldout/, out of training's reach)")
    parser.add_argument("--run", required=True, help="TREC run file")
    parser.add_argument("--metrics", required=True, help="metrics JSON to write")
    parser.add_argument("--reports", required=True, help="folder for per_query.json, curves and diagnosis")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    from ..evaluation import run_evaluation

    params = params_of(args)
    out = run_evaluation(args.dataset, args.split, args.run, args.metrics, args.reports, params,
                         log=lambda line: print(f"evaluate: {line}"), qrels_path=args.qrels)
    shown = ", ".join(f"{m} {out[m]:.4f}" for m in params.evaluate.measures)
    print(f"evaluate {args.run} on {args.split}: {out['queries_evaluated']} queries; {shown}")
    for key, n in out.items():
        if key.startswith("queries_evaluated["):
            print(f"  {key[len('queries_evaluated['):-1]} averages {n} of {out['queries_evaluated']} queries")
    if "strata_note" in out:
        print(f"  strata: {out['strata_note']}")
    else:
        main = params.evaluate.measures[0] if "nDCG@10" not in out else "nDCG@10"
        print("  strata: " + "; ".join(f"{name} ({out[name]['queries']} queries) {main} {out[name][main]:.4f}"
                                       for name in ("seen", "unseen")))
    if out["judged_warning"]:
        print(f"WARNING: Judged below {params.evaluate.judged_threshold}: many top documents are unjudged, "
              "so the measures are lower bounds")
    return 0
