from __future__ import annotations

import argparse

from ..core.config import add_params_args, params_of

HELP = "markdown report of what a revision changed: metrics diff, bootstrap CIs, moved queries, plots"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", required=True, help="git revision to compare against (e.g. main)")
    parser.add_argument("--head", default=None, help="git revision to report on (default: the workspace)")
    parser.add_argument("--output", default="reports/pr", help="folder for report.md and PNGs")
    parser.add_argument("--repo", default=".", help="repository root")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    from ..reporting import build_report

    result = build_report(args.base, args.head, args.output, params_of(args), repo=args.repo)
    print(f"wrote {args.output}/report.md ({len(result['retrievers'])} retrievers compared, "
          f"{len(result['plots'])} plots)")
    return 0
