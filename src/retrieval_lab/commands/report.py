"""``retrieval-lab report``: the pull-request report, and with ``--fail-on-regression`` a gate."""

from __future__ import annotations

import argparse

from ..core.guard import FILE, FOLDER, ROOT, Found, Paths
from ..core.params_cli import add_params_args, params_of
from ..exit_codes import CANNOT_JUDGE, REGRESSION

HELP = ("markdown report and per-query comparison page (report.html) of what a revision changed: verdict, "
        "simultaneous intervals of the key measures, losses by failure class, plots, metrics diff; "
        "--fail-on-regression exits 1 on a real regression and 3 when it cannot judge (per-query results or "
        "metrics files missing, identical while the metrics changed, or a root that matches nothing)")
# option -> (what it holds, the pipeline's default under <dataset>)
ROOTS = {"--reports-root": ("<retriever>/per_query.json, diagnosis.json, recall_curve.csv", "reports"),
         "--metrics-root": ("<retriever>.json", "metrics"),
         "--dvclive-root": ("<variant>/plots/metrics/train/loss.tsv", "dvclive"),
         "--runs-root": ("<retriever>.trec, the runs whose rankings the page shows", "runs")}


def report_paths(args: argparse.Namespace):
    """Where the report reads: each root given, else dvc.yaml's folder for params.yaml's dataset."""
    from ..reporting.gather import ReportPaths

    default = ReportPaths.defaults(params_of(args).dataset)
    dataset = args.dataset if args.dataset is not None else default.prepared
    qrels = args.qrels or (f"{args.dataset}/qrels/test.tsv" if args.dataset is not None else default.qrels)
    return ReportPaths(args.reports_root or default.reports, args.metrics_root or default.metrics,
                       args.dvclive_root or default.dvclive, args.runs_root or default.runs, dataset, qrels,
                       args.timing_root)


def _result_folders(args: argparse.Namespace) -> Found:
    """The folders inside --repo the workspace revision is read from, and the texts and judgments."""
    from pathlib import Path

    paths = report_paths(args)
    roots = (paths.reports, paths.metrics, paths.dvclive, paths.runs)
    inputs = {flag: [(Path(args.repo) / root, FOLDER)] for flag, root in zip(ROOTS, roots)}
    inputs["--dataset"] = [(Path(args.repo) / paths.prepared, FOLDER)]
    inputs["--qrels"] = [(Path(args.repo) / paths.qrels, FILE)]
    return Found(inputs=inputs)


# --repo holds the output (reports/pr), never is or lies in it; the result folders are inputs
PATHS = Paths(inputs={"--repo": ROOT}, outputs={"--output": FOLDER},
              # the roots, texts, qrels: _result_folders; --timing-root: read at revisions, shown only
              words=("--base", "--head", *ROOTS, "--dataset", "--qrels", "--timing-root"),
              derive=_result_folders)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", required=True, help="git revision to compare against (e.g. main)")
    parser.add_argument("--head", default=None, help="git revision to report on (default: the workspace)")
    parser.add_argument("--output", default="reports/pr", help="folder for report.md, report.html and PNGs")
    parser.add_argument("--repo", default=".", help="repository root")
    for flag, (what, default) in ROOTS.items():
        parser.add_argument(flag, metavar="DIR", help=f"folder inside --repo holding {what} at each revision, in "
                                                      f"git or DVC (default: {default}/<dataset>, as dvc.yaml)")
    parser.add_argument("--dataset", metavar="DIR", help="BEIR folder (in the working tree, relative to --repo) "
                        "whose query and document texts the page shows; it names the collection in the titles "
                        "(default: data/prepared/<dataset>, as dvc.yaml)")
    parser.add_argument("--qrels", metavar="FILE", help="judgments the page shows (default: DIR/qrels/test.tsv of "
                        "--dataset, else data/heldout/<dataset>/qrels/test.tsv)")
    parser.add_argument("--timing-root", metavar="DIR", help="folder inside --repo of <retriever>.json written by "
                        "retrieve --timing: adds each retriever's latency base -> head (shown, never gated); read "
                        "at each revision from git or DVC, so an untracked folder (the pipeline's latency/) "
                        "exists in the working tree only")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help=f"exit {REGRESSION} when a gated retriever's gated measure has its whole interval "
                             f"below -tolerance; exit {CANNOT_JUDGE} when a gated retriever cannot be judged (its "
                             "per-query results or metrics file missing at either revision, identical while its "
                             "metrics changed, sharing no query, or a root matching nothing); exit 2 on bad "
                             "input. A regression seen wins over a blind spot. Which retrievers and measures are "
                             "gated: params gate.retrievers and gate.measures")
    parser.add_argument("--allow-query-change", action="store_true",
                        help="judge a retriever whose judged queries differ between the revisions on the queries "
                             f"both have (and say how many vanished) instead of exiting {CANNOT_JUDGE}; still "
                             f"{CANNOT_JUDGE} when the vanished queries, scored 0 at head, would make a regression")
    parser.add_argument("--tolerance", type=float, default=0.0, metavar="T",
                        help="losses the gate accepts: it fails only when the interval's upper end is below -T "
                             "(a finite number >= 0; default 0)")
    add_params_args(parser)


def _title(args: argparse.Namespace, dataset: str, reports: str) -> str:
    """The collection the titles name: --dataset's folder, params.yaml's dataset in the pipeline's layout,
    else the repository's folder (never a dataset the results do not come from)."""
    from pathlib import Path

    from ..reporting.gather import ReportPaths, normal

    if args.dataset is not None:
        return Path(args.dataset).resolve().name
    if normal(reports) == ReportPaths.defaults(dataset).reports:
        return dataset
    return Path(args.repo).resolve().name


def run(args: argparse.Namespace) -> int:
    from ..reporting import build_report

    params = params_of(args)
    paths = report_paths(args)
    result = build_report(args.base, args.head, args.output, params, repo=args.repo, tolerance=args.tolerance,
                          paths=paths, allow_query_change=args.allow_query_change,
                          title=_title(args, params.dataset, paths.reports))
    print(f"wrote {args.output}/report.md and {result.page} ({len(result.gated)} gated retrievers changed, "
          f"{len(result.reported)} reported only, {len(result.unchanged)} unchanged, {len(result.plots)} plots)")
    for r in result.regressions:
        print(f"REGRESSION: {r['retriever']} {r['measure']} {r['mean_difference']:+.4f} "
              f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}] lies entirely below {(-args.tolerance or 0.0):g}")
    for name, vanished, new, common in result.query_changes:
        print(f"QUERIES CHANGED: {name}: {vanished} vanished at head, {new} new; compared on the {common} in "
              "common (--allow-query-change)")
    for name, why in result.cannot_judge:
        print(f"CANNOT JUDGE: {name}: {why}")
    if not args.fail_on_regression:
        return 0
    return result.gate
