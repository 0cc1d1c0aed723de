"""``retrieval-lab fuse``: the DVC ``fuse`` stage, a thin file wrapper over :func:`retrieval_lab.fusion.fuse`."""

from __future__ import annotations

import argparse

from ..core.guard import FILE, Paths
from ..core.kinds import FUSION, RUN
from ..core.params_cli import add_params_args, params_of

HELP = "fuse TREC runs (rrf, weighted), tuning the method's parameter on validation qrels"
PATHS = Paths(inputs={"--runs": FILE, "--qrels": FILE}, outputs={"--output": FILE, "--report": FILE},
              words=("--method",), kinds={"--output": RUN, "--report": FUSION})



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--method", required=True, help="fusion method (rrf, weighted)")
    parser.add_argument("--runs", required=True, nargs="+", metavar="RUN", help="TREC runs to fuse")
    parser.add_argument("--output", required=True, help="fused TREC run to write")
    parser.add_argument("--qrels", help="qrels to tune on when fusion.tune is true: the val split's, never the "
                                        "test split's")
    parser.add_argument("--report", help="JSON: chosen value and grid scores")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    from ..core.atomic import write_json
    from ..core.data import read_qrels
    from ..core.errors import InputError
    from ..fusion import fuse
    from ..runs import read_run, write_run

    params = params_of(args).fusion
    if len(args.runs) < 2:
        raise InputError(f"need at least 2 runs, got {len(args.runs)}", field="--runs")
    runs = [read_run(path) for path in args.runs]
    for path, run_ in zip(args.runs, runs):
        if not run_:
            raise InputError("empty run: no ranked line to fuse", str(path))
    qrels = read_qrels(args.qrels) if args.qrels else None
    result = fuse(runs, args.method, params, qrels)
    write_run(args.output, result.run, tag=f"fused-{args.method}", depth=params.depth)
    if args.report:
        write_json(args.report, {**result.to_json(), "runs": list(args.runs), "qrels": args.qrels},
                   kind=FUSION)
    t = result.tuning
    how = (f"tuned on {args.qrels} ({t.measure} {max(g.score for g in t.grid):.4f})"
           if t is not None else f"fixed ({result.reason})")
    print(f"fuse {args.method}: {result.param}={result.chosen} {how}, {len(result.run)} queries -> {args.output}")
    return 0
