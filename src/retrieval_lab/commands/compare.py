"""``retrieval-lab compare``: the DVC ``compare`` stage."""

from __future__ import annotations

import argparse

from ..core.guard import FILE, FOLDER, ROOT, Found, Paths
from ..core.kinds import COMPARISON, COMPARISON_MD, PAGE
from ..core.params_cli import add_params_args, params_of

HELP = ("paired comparison of run pairs (compare.pairs) from their per_query.json: simultaneous randomization "
        "intervals across the pairs, adjusted p, MDE, win/tie/loss")


def _per_query_files(args: argparse.Namespace) -> Found:
    """What compare reads below --reports-root: <run>/per_query.json of the --runs given, else of every run."""
    from pathlib import Path

    from ..report_files import PER_QUERY

    root = Path(args.reports_root)
    files = ([root / name / PER_QUERY for name in args.runs] if args.runs
             else sorted(root.glob(f"*/{PER_QUERY}")) if root.is_dir() else [])
    return Found(inputs={"--reports-root": [(path, FILE) for path in files]})


# the root may hold compare's own outputs (dvc.yaml: reports/<dataset>/compare.md), never be one
PATHS = Paths(inputs={"--reports-root": ROOT, "--runs-root": FOLDER, "--dataset": FOLDER, "--qrels": FILE,
                      "--timing-root": FOLDER},
              outputs={"--output": FILE, "--markdown": FILE, "--html": FILE},
              words=("--runs",), derive=_per_query_files,
              kinds={"--output": COMPARISON, "--markdown": COMPARISON_MD, "--html": PAGE})


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reports-root", required=True, help="folder holding <run name>/per_query.json")
    parser.add_argument("--runs", nargs="+", metavar="NAME",
                        help="the run names compare.pairs may use (dvc.yaml: those its deps list); default: any")
    parser.add_argument("--output", required=True, help="comparison JSON to write")
    parser.add_argument("--markdown", required=True, help="markdown table to write")
    parser.add_argument("--html", metavar="FILE", help="per-query comparison page to write (needs --runs-root, "
                                                       "--dataset, --qrels)")
    parser.add_argument("--runs-root", metavar="DIR", help="folder holding <run name>.trec (for --html)")
    parser.add_argument("--dataset", metavar="DIR", help="prepared dataset: query and document texts (for --html)")
    parser.add_argument("--qrels", metavar="FILE", help="the judgments the runs were evaluated on (for --html)")
    parser.add_argument("--timing-root", metavar="DIR", help="folder of <run>.json written by retrieve --timing "
                        "(the pipeline's latency/<dataset>): adds a latency table (shown, never judged) for the "
                        "pairs whose runs both have one; without it no wall time is read")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    from ..comparison import compare, to_markdown
    from ..core.atomic import write_json, write_text
    from ..core.errors import InputError

    params = params_of(args)
    page_inputs = {"--runs-root": args.runs_root, "--dataset": args.dataset, "--qrels": args.qrels}
    if args.html:
        lacking = [flag for flag, value in page_inputs.items() if not value]
        if lacking:
            raise InputError(f"--html needs {', '.join(lacking)}", field="--html")
    ev = params.evaluate
    result = compare(args.reports_root, params.compare.pairs, params.compare.measure, ev.ci_level,
                     ev.permutations, ev.seed, args.runs, args.timing_root)
    page = None
    if args.html:  # built before anything is written: a bad input leaves no output
        from ..page import compare_page

        page = compare_page(result, args.reports_root, args.runs_root, args.dataset, args.qrels, params)
    write_json(args.output, result.to_json(), kind=COMPARISON)
    text = to_markdown(result)
    write_text(args.markdown, text, kind=COMPARISON_MD)
    if page is not None:
        from ..page import write_page

        write_page(args.html, page)
    print(text, end="")
    return 0
