"""``retrieval-lab pool``: build a judging pool from runs, or merge its filled labels into qrels."""

from __future__ import annotations

import argparse

from ..core.guard import FILE, FOLDER, Paths
from ..core.kinds import POOL, QRELS
from ..core.params_cli import add_params_args, params_of

HELP = "pool the top K of several runs for judging (--runs), or merge a labelled pool into qrels (--merge)"
PATHS = Paths(inputs={"--runs": FILE, "--merge": FILE, "--dataset": FOLDER, "--qrels": FILE},
              outputs={"--output": FILE}, kinds={"--output": lambda args: QRELS if args.merge else POOL})


def configure(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--runs", nargs="+", metavar="RUN", help="TREC runs to pool (names: file stems)")
    mode.add_argument("--merge", metavar="LABELED.tsv", help="a pool tsv with its score column filled in (a blank "
                      "label is an error: delete a row to leave its pair unjudged)")
    parser.add_argument("--dataset", help="BEIR folder: texts for pooling; id checks for --merge")
    parser.add_argument("--depth", type=int, help="documents per run and query to pool (with --runs)")
    parser.add_argument("--qrels", help="existing judgments: skipped when pooling, kept when merging")
    parser.add_argument("--output", required=True, help="pool tsv (--runs) or merged BEIR qrels tsv (--merge)")
    parser.add_argument("--min-label", type=int, help="smallest valid label (default judge.min_label)")
    parser.add_argument("--max-label", type=int, help="largest valid label (default judge.max_label)")
    add_params_args(parser)


def _load_corpus_and_queries(path: str):

    from ..core.data import corpus_file, queries_file, read_corpus, read_queries

    return read_queries(queries_file(path)), read_corpus(corpus_file(path))  # gzipped or not


def _pool(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..core.data import read_qrels
    from ..core.errors import InputError
    from ..judgment_pool import pool, write_pool
    from ..runs import ranked, read_run

    if args.dataset is None or args.depth is None:
        raise InputError("pooling needs --dataset and --depth", field="--runs")
    stems = [Path(p).stem for p in args.runs]
    if len(set(stems)) != len(stems):
        raise InputError(f"run file stems must differ (they name the retrievers): {stems}", field="--runs")
    queries, corpus = _load_corpus_and_queries(args.dataset)
    judged = read_qrels(args.qrels) if args.qrels else None
    runs = {s: read_run(p) for s, p in zip(stems, args.runs)}
    rows = pool(runs, args.depth, queries, corpus, judged)
    write_pool(args.output, rows)
    skipped = ""
    if judged is not None:  # counted, never silently dropped
        known = {(q, d) for run in runs.values() for q, docs in run.items() for d, _ in ranked(docs)[:args.depth]
                 if d in judged.get(q, {})}
        skipped = f", {len(known)} pairs {args.qrels} judges already left out"
    print(f"pool: {len(rows)} pairs to judge over {len({r.query_id for r in rows})} queries "
          f"(top {args.depth} of {len(stems)} runs{skipped}) -> {args.output}")
    return 0


def _merge(args: argparse.Namespace) -> int:
    from ..core.data import read_qrels, write_qrels
    from ..judgment_pool import merge, read_labels

    judge = params_of(args).judge  # the label range judge uses too: one default, in params.yaml
    low = judge.min_label if args.min_label is None else args.min_label
    high = judge.max_label if args.max_label is None else args.max_label
    queries, corpus = _load_corpus_and_queries(args.dataset) if args.dataset else (None, None)
    labels = read_labels(args.merge, low, high, queries, corpus)
    existing = read_qrels(args.qrels) if args.qrels else {}
    merged, report = merge(existing, labels, args.merge)
    write_qrels(args.output, merged)
    print(f"merge: {report['labelled']} labelled rows ({report['added']} new judgments, "
          f"{report['already_judged_same']} agreeing with existing ones), {report['repeated_same_label']} "
          f"rows repeating an earlier row's label; {report['judgments']} judgments -> {args.output}")
    return 0


def run(args: argparse.Namespace) -> int:
    return _merge(args) if args.merge else _pool(args)
