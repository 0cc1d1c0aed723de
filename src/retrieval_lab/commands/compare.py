"""``retrieval-lab compare``: the DVC ``compare`` stage."""

from __future__ import annotations

import argparse

from ..core.params_cli import add_params_args, check_paths, params_of

HELP = ("paired comparison of run pairs (compare.pairs) from their per_query.json: simultaneous randomization "
        "intervals across the pairs, adjusted p, MDE, win/tie/loss")


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
    check_paths(args, {"--reports-root": args.reports_root}, files={"--output": args.output,
                                                                   "--markdown": args.markdown})
    ev = params.evaluate
    result = compare(args.reports_root, params.compare.pairs, params.compare.measure, ev.ci_level,
                     ev.permutations, ev.seed, args.runs)
    write_json(args.output, result.to_json())
    text = to_markdown(result)
    write_text(args.markdown, text)
    print(text, end="")
    return 0
