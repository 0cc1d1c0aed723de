"""``retrieval-lab page``: the per-query comparison page of two run files, with or without judgments."""

from __future__ import annotations

import argparse

from ..core.guard import FILE, FOLDER, Paths
from ..core.kinds import PAGE
from ..core.params_cli import add_params_args, params_of

HELP = ("self-contained HTML page comparing two TREC runs query by query: rankings side by side, "
        "rank-biased overlap, and with --qrels the measures, intervals and failure classes")
PATHS = Paths(inputs={"base": FILE, "head": FILE, "--qrels": FILE, "--dataset": FOLDER}, outputs={"--output": FILE},
              words=("measures",), kinds={"--output": PAGE})


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", metavar="BASE", help="baseline TREC run")
    parser.add_argument("head", metavar="HEAD", help="run to compare with the baseline")
    parser.add_argument("--output", required=True, metavar="FILE", help="HTML page to write")
    parser.add_argument("--qrels", metavar="FILE", help="judgments (TREC 4-column or BEIR tsv); without them the "
                                                         "queries are contrasted by rank-biased overlap only")
    parser.add_argument("--dataset", metavar="DIR", help="BEIR folder (corpus.jsonl, queries.jsonl) whose texts "
                                                         "the page shows (its qrels are not read: give --qrels)")
    parser.add_argument("-m", "--measure", dest="measures", action="append", metavar="MEASURE",
                        help="measure of the summary (repeatable; default compare.measure and "
                             "compare.key_measures, the table also offering evaluate.measures)")
    parser.add_argument("--depth", type=int, metavar="K", help="ranks kept per query (default: the whole runs)")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    from ..core.errors import InputError
    from ..page import runs_page, write_page

    if args.depth is not None and args.depth < 1:
        raise InputError(f"expected a depth >= 1, got {args.depth}", field="--depth")
    params = params_of(args)
    page = runs_page(args.base, args.head, params, args.qrels, args.dataset, args.measures, args.depth)
    write_page(args.output, page)
    print(f"wrote {args.output} ({len(page.query_ids)} queries, {len(page.doc_ids)} documents)")
    return 0
