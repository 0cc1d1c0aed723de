from __future__ import annotations

import argparse

from ..core.guard import FOLDER, Paths
from ..core.params_cli import add_params_args, params_of

HELP = ("split a BEIR folder into train/val/test (by family, or the given splits), audit it for leakage; "
        "the test qrels go to their own folder")
PATHS = Paths(inputs={"--raw": FOLDER}, outputs={"--output": FOLDER, "--heldout": FOLDER})



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--raw", required=True, help="BEIR folder to split")
    parser.add_argument("--output", required=True,
                        help="prepared dataset folder: corpus, queries, train and val qrels, split.json")
    parser.add_argument("--heldout", required=True,
                        help="folder for the test qrels (qrels/test.tsv) and split_audit.json: only evaluation "
                             "reads it")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    from ..prepare import prepare

    params = params_of(args)
    audit = prepare(args.raw, args.output, args.heldout, params.prepare, log=lambda line: print(f"prepare: {line}"))
    counts = ", ".join(f"{s}: {v['queries']} queries / {v['families']} families"
                       for s, v in audit["splits"].items())
    print(f"prepare ({audit['mode']} split): {counts}; "
          f"{audit['unjudged_queries']} queries without judgments left out; validation: {audit['validation']}")
    for split in ("val", "test"):
        info = audit["splits"][split]
        print(f"  {split}: {info['seen_queries']} of {info['queries']} queries have a positive that is a "
              "training positive (seen)")
    for split, info in audit["splits"].items():
        if info["queries_without_positive"]:
            print(f"  {split}: {len(info['queries_without_positive'])} queries without a positive "
                  "(kept, excluded from means by evaluation)")
    return 0
