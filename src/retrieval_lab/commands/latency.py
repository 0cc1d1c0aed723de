"""``retrieval-lab latency``: the wall times ``retrieve --timing`` measured, shown when asked (:mod:`latency`)."""

from __future__ import annotations

import argparse

from ..core.guard import FOLDER, Paths

HELP = ("show the latency retrieve --timing measured (DIR/<run>.json; the pipeline's latency/<dataset>): p50/p95/"
        "p99, QPS, concurrency, machine per run; with --base OTHER_DIR, each run base -> head and head - base")
PATHS = Paths(inputs={"folder": FOLDER, "--base": FOLDER}, words=("runs",))


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", metavar="DIR", help="folder of <run>.json timing files (retrieve --timing)")
    parser.add_argument("runs", metavar="RUN", nargs="*", help="runs to show (default: every <run>.json in DIR)")
    parser.add_argument("--base", metavar="OTHER_DIR", help="another such folder (e.g. a copy kept from the main "
                        "branch): each run's latency base -> head, with head - base and whether both ran on the "
                        "same machine")


def run(args: argparse.Namespace) -> int:
    from ..latency import latency_text

    print(latency_text(args.folder, args.runs, args.base), end="")
    return 0
