from __future__ import annotations

import argparse

from ..core.config import add_params_args, params_of
from .arguments import check_paths

HELP = "split a BEIR folder into train/val/test (by family, or the given splits) and audit it for leakage"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--raw", required=True, help="BEIR folder to split")
    parser.add_argument("--output", required=True, help="prepared dataset folder")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    from ..prepare import prepare

    params = params_of(args)
    check_paths(args, {"--raw": args.raw}, folders={"--output": args.output})
    audit = prepare(args.raw, args.output, params.prepare, log=lambda line: print(f"prepare: {line}"))
    counts = ", ".join(f"{s}: {v['queries']} queries / {v['families']} families"
                       for s, v in audit["splits"].items())
    print(f"prepare ({audit['mode']} split): {counts}; "
          f"{audit['unjudged_queries']} queries without judgments left out")
    for split, info in audit["splits"].items():
        if info["queries_without_positive"]:
            print(f"  {split}: {len(info['queries_without_positive'])} queries without a positive "
                  "(kept, excluded from means by evaluation)")
    return 0
