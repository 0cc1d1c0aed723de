"""``retrieval-lab report``: the pull-request report, and with ``--fail-on-regression`` a gate."""

from __future__ import annotations

import argparse

from ..core.guard import FOLDER, ROOT, Found, Paths
from ..core.params_cli import add_params_args, params_of
from ..exit_codes import CANNOT_JUDGE, REGRESSION

HELP = ("markdown report and per-query comparison page (report.html) of what a revision changed: verdict, "
        "simultaneous intervals of the key measures, losses by failure class, plots, metrics diff; --fail-on-regression exits 1 on a real regression "
        "and 3 when it cannot judge (per-query results missing, or identical while the metrics changed)")


def _result_folders(args: argparse.Namespace) -> Found:
    """The reports, metrics and dvclive folders inside --repo that the workspace revision is read from."""
    from pathlib import Path

    from ..reporting.gather import ReportPaths

    default = ReportPaths.defaults(params_of(args).dataset)
    roots = (args.reports_root or default.reports, args.metrics_root or default.metrics,
             args.dvclive_root or default.dvclive)
    return Found(inputs={flag: [(Path(args.repo) / root, FOLDER)]
                         for flag, root in zip(("--reports-root", "--metrics-root", "--dvclive-root"), roots)})


# --repo holds the output (reports/pr), never is or lies in it; the result folders are inputs
PATHS = Paths(inputs={"--repo": ROOT}, outputs={"--output": FOLDER}, words=("--base", "--head", "--reports-root", "--metrics-root", "--dvclive-root"),  # the last three: _result_folders
              derive=_result_folders)



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", required=True, help="git revision to compare against (e.g. main)")
    parser.add_argument("--head", default=None, help="git revision to report on (default: the workspace)")
    parser.add_argument("--output", default="reports/pr", help="folder for report.md and PNGs")
    parser.add_argument("--repo", default=".", help="repository root")
    for flag, what, default in (("--reports-root", "<retriever>/per_query.json, diagnosis.json, recall_curve.csv",
                                 "reports"), ("--metrics-root", "<retriever>.json", "metrics"),
                                ("--dvclive-root", "<variant>/plots/metrics/train/loss.tsv", "dvclive")):
        parser.add_argument(flag, metavar="DIR", help=f"folder inside --repo holding {what} (default: "
                                                      f"{default}/<dataset>, as dvc.yaml)")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help=f"exit {REGRESSION} when a retriever's key measure has its whole interval below "
                             f"-tolerance; exit {CANNOT_JUDGE} when a retriever cannot be judged (its per-query "
                             "results missing at either revision, identical while its metrics changed, or "
                             "sharing no query); exit 2 on bad input. A regression seen wins over a blind spot")
    parser.add_argument("--allow-query-change", action="store_true",
                        help="judge a retriever whose judged queries differ between the revisions on the queries "
                             f"both have (and say how many vanished) instead of exiting {CANNOT_JUDGE}")
    parser.add_argument("--tolerance", type=float, default=0.0, metavar="T",
                        help="losses the gate accepts: it fails only when the interval's upper end is below -T "
                             "(a finite number >= 0; default 0)")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    from ..reporting import build_report
    from ..reporting.gather import ReportPaths

    params = params_of(args)
    default = ReportPaths.defaults(params.dataset)
    paths = ReportPaths(args.reports_root or default.reports, args.metrics_root or default.metrics,
                        args.dvclive_root or default.dvclive, default.runs, default.prepared, default.qrels)
    result = build_report(args.base, args.head, args.output, params, repo=args.repo,
                          tolerance=args.tolerance, paths=paths, allow_query_change=args.allow_query_change)
    print(f"wrote {args.output}/report.md and {result['page']} ({len(result['retrievers'])} retrievers changed, "
          f"{len(result['unchanged'])} unchanged, {len(result['plots'])} plots)")
    for r in result["regressions"]:
        print(f"REGRESSION: {r['retriever']} {r['measure']} {r['mean_difference']:+.4f} "
              f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}] lies entirely below {(-args.tolerance or 0.0):g}")
    for r in result["query_changes"]:
        print(f"QUERIES CHANGED: {r['retriever']}: {r['vanished']} vanished at head, {r['new']} new; compared on "
              f"the {r['common']} in common (--allow-query-change)")
    for r in result["cannot_judge"]:
        print(f"CANNOT JUDGE: {r['retriever']}: {r['reason']}")
    if not args.fail_on_regression:
        return 0
    return result["gate"]
