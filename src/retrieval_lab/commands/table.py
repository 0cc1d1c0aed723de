"""``retrieval-lab table``: collection x retriever over experiments, seeds pooled, against a baseline."""

from __future__ import annotations

import argparse

from ..core.guard import FILE, ROOT, Paths
from ..core.kinds import TABLE_CSV, TABLE_INPUTS, TABLE_MD, TABLE_PLOT
from ..core.params_cli import add_params_args, params_of

HELP = ("one table over experiments (workspace, git revisions, DVC experiments; none checked out): collection x "
        "retriever, mean ± sd over seeds, simultaneous intervals against a baseline, an average row; markdown, "
        "CSV, PNG")
PATHS = Paths(inputs={"--from-inputs": FILE, "--repo": ROOT},
              outputs={"--markdown": FILE, "--csv": FILE, "--plot": FILE, "--inputs": FILE},
              words=("--experiments", "--runs", "--baseline"),
              kinds={"--markdown": TABLE_MD, "--csv": TABLE_CSV, "--plot": TABLE_PLOT, "--inputs": TABLE_INPUTS})



def configure(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--experiments", nargs="+", metavar="EXP",
                        help="DVC experiment names or refs, git revisions, or 'workspace'")
    source.add_argument("--from-inputs", metavar="JSON", help="render from a file written by --inputs instead")
    parser.add_argument("--repo", default=".", help="the repository holding the experiments (default: .)")
    parser.add_argument("--runs", nargs="+", metavar="NAME",
                        help="retrievers (run names) to read; default: those compare.pairs names")
    parser.add_argument("--baseline", help="the run every other is compared with; default: compare.pairs[0][0]")
    parser.add_argument("--markdown", required=True, help="markdown table to write")
    parser.add_argument("--csv", required=True, help="CSV table to write")
    parser.add_argument("--plot", help="PNG to write (compare.measure)")
    parser.add_argument("--inputs", help="also write what was read (per-query values, params, commits) as JSON")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    import json

    from ..core.atomic import atomic_path, write_json, write_text
    from ..core.data import require_file
    from ..core.errors import InputError
    from ..core.parse import json_loads
    from ..experiments_table import build, check_inputs, gather, plot, to_csv, to_markdown

    params = params_of(args)
    if args.from_inputs:
        try:
            with open(require_file(args.from_inputs), encoding="utf-8") as f:
                inputs = json_loads(f.read(), args.from_inputs)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", args.from_inputs, exc.lineno) from None
        check_inputs(inputs, args.from_inputs)
    else:
        runs = args.runs or list(dict.fromkeys(name for pair in params.compare.pairs for name in pair))
        measures = list(dict.fromkeys([params.compare.measure, *params.compare.key_measures]))
        inputs = gather(args.repo, args.experiments, runs, measures)
    baseline = args.baseline or params.compare.pairs[0][0]
    ev = params.evaluate
    result = build(inputs, baseline, ev.ci_level, ev.permutations, ev.seed)
    text = to_markdown(result)
    if args.inputs:
        write_json(args.inputs, inputs, kind=TABLE_INPUTS)
    write_text(args.markdown, text, kind=TABLE_MD)
    write_text(args.csv, to_csv(result), kind=TABLE_CSV)
    if args.plot:
        with atomic_path(args.plot, kind=TABLE_PLOT) as tmp:
            plot(result, tmp)
    print(text, end="")
    return 0
