"""``retrieval-lab diagnose``: why a run's failed queries failed, on any BEIR folder, printed or written."""

from __future__ import annotations

import argparse
import textwrap

from ..core.guard import FILE, FOLDER, Paths
from ..core.kinds import DIAGNOSIS
from ..core.params_cli import add_params_args, params_of

HELP = ("why each query without a positive in the top k failed (no candidates, vocabulary gap, surface "
        "homonymy, late rank), for any run on any BEIR folder: markdown, or --json")
DESCRIPTION = textwrap.fill(HELP, 95) + """

The classes and their evidence are those the evaluate command writes to diagnosis.md; this
command reads nothing else and writes only --output (or standard output). "unjudged"
beside a top document means the qrels do not judge it: with qrels that list only relevant
documents (most BEIR sets) every wrong document is unjudged, so it may also be a missed
relevant one."""
PATHS = Paths(inputs={"--dataset": FOLDER, "--run": FILE, "--qrels": FILE}, outputs={"--output": FILE},
              words=("--split",), kinds={"--output": DIAGNOSIS})


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--dataset", required=True, help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/")
    parser.add_argument("--run", required=True, help="TREC run file")
    parser.add_argument("--split", default="test", help="qrels split (default: test)")
    parser.add_argument("--qrels", help="qrels file, when it is not the dataset's qrels/<split>.tsv")
    parser.add_argument("-k", type=int, help="a query fails without a positive in its top k "
                                             "(default: evaluate.diagnose_k)")
    parser.add_argument("--json", action="store_true", help="diagnosis.json's object instead of markdown")
    parser.add_argument("--output", help="file to write (default: standard output)")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from ..core.atomic import write_text
    from ..core.data import load_dataset, read_qrels
    from ..core.errors import InputError
    from ..evaluation import check_overlap, diagnose_run
    from ..runs import check_documents, read_run

    params = params_of(args)
    k = params.evaluate.diagnose_k if args.k is None else args.k
    if k < 1:
        raise InputError(f"k must be positive, got {k}", field="-k")
    if args.qrels:
        data = load_dataset(args.dataset, [])
        qrels, source = read_qrels(args.qrels, data.queries, data.corpus), Path(args.qrels)
    else:
        data = load_dataset(args.dataset, [args.split])
        qrels, source = data.qrels[args.split], Path(args.dataset) / "qrels" / f"{args.split}.tsv"
    run_ = read_run(args.run)
    check_overlap(qrels, run_, args.run, source)
    check_documents(run_, data.corpus, args.run)
    result = diagnose_run(qrels, run_, data.queries, data.corpus, k, params)
    text = (json.dumps(result.to_json(), indent=2) + "\n" if args.json
            else result.to_markdown(f"Failure diagnosis: {Path(args.run).name} on {args.split} (k = {k})"))
    if args.output:
        write_text(args.output, text, kind=DIAGNOSIS)
        print(f"diagnose: {len(result.failures)} of {result.queries_with_positive} queries without a positive "
              f"in the top {k} -> {args.output}")
    else:
        print(text, end="" if text.endswith("\n") else "\n")
    return 0
