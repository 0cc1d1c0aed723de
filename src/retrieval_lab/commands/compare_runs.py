"""``retrieval-lab compare-runs``: the comparison statistics for two run files, without DVC."""

from __future__ import annotations

import argparse

from ..core.guard import FILE, Paths
from ..core.params_cli import add_params_args, params_of

HELP = ("compare two TREC runs on the same qrels: difference, simultaneous interval across the measures, "
        "adjusted p, MDE, win/tie/loss, verdict")
PATHS = Paths(inputs={"qrels": FILE, "base": FILE, "head": FILE}, words=("measures",))



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("qrels", metavar="QRELS", help="qrels: TREC 4-column or BEIR tsv")
    parser.add_argument("base", metavar="BASE", help="baseline TREC run")
    parser.add_argument("head", metavar="HEAD", help="run to judge against the baseline")
    parser.add_argument("-m", "--measure", dest="measures", action="append", required=True, metavar="MEASURE",
                        help="e.g. nDCG@10, R@100 (repeatable; the measures form one family)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    import json

    from ..comparison import compare_runs, runs_to_text
    from ..core.data import read_qrels
    from ..evaluation import check_overlap
    from ..metrics import parse_measure
    from ..runs import read_run

    for name in args.measures:
        parse_measure(name)  # every name checked before any file is read
    params = params_of(args)
    qrels = read_qrels(args.qrels)
    base, head = read_run(args.base), read_run(args.head)
    check_overlap(qrels, base, args.base, args.qrels)
    check_overlap(qrels, head, args.head, args.qrels)
    ev = params.evaluate
    result = compare_runs(qrels, base, head, args.measures, ev.ci_level, ev.permutations, ev.seed)
    if args.json:
        print(json.dumps({"base": args.base, "head": args.head, **result.to_json()}, indent=2))
    else:
        print(runs_to_text(result, args.base, args.head), end="")
    return 0
