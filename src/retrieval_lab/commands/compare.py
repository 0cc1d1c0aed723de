"""``retrieval-lab compare``: the DVC ``compare`` stage."""

from __future__ import annotations

import argparse

from ..core.guard import FILE, ROOT, Found, Paths
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
PATHS = Paths(inputs={"--reports-root": ROOT}, outputs={"--output": FILE, "--markdown": FILE},
              words=("--runs",), derive=_per_query_files)



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reports-root", required=True, help="folder holding <run name>/per_query.json")
    parser.add_argument("--runs", nargs="+", metavar="NAME",
                        help="the run names compare.pairs may use (dvc.yaml: those its deps list); default: any")
    parser.add_argument("--output", required=True, help="comparison JSON to write")
    parser.add_argument("--markdown", required=True, help="markdown table to write")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    from ..comparison import compare, to_markdown
    from ..core.atomic import write_json, write_text

    params = params_of(args)
    ev = params.evaluate
    result = compare(args.reports_root, params.compare.pairs, params.compare.measure, ev.ci_level,
                     ev.permutations, ev.seed, args.runs)
    write_json(args.output, result.to_json())
    text = to_markdown(result)
    write_text(args.markdown, text)
    print(text, end="")
    return 0
