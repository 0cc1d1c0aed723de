from __future__ import annotations

import argparse

from ..core.guard import FOLDER, Paths
from ..core.params_cli import add_params_args, add_shard_args, params_of, shard_overrides

HELP = ("build a lexical retriever's index of a BEIR corpus once, read in one pass (bm25: compact postings, "
        "memory-mapped by retrieve --corpus)")
PATHS = Paths(inputs={"--dataset": FOLDER}, outputs={"--output": FOLDER}, words=("--retriever", "--scheduler"))


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--retriever", required=True, help="retriever name (bm25)")
    parser.add_argument("--dataset", required=True, help="BEIR folder whose corpus.jsonl (or .gz) is indexed")
    parser.add_argument("--output", required=True, help="index folder to write (replaced whole); with bm25.shards "
                        "S > 1 a folder of S shard indexes, each built by a task of a Dask cluster, which retrieve "
                        "--corpus searches there (the same run)")
    add_shard_args(parser)
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from .. import retrievers
    from ..core import fingerprint
    from ..core.atomic import atomic_path
    from ..core.data import LEXICAL_MISS, corpus_file, iter_corpus
    from ..core.errors import InputError

    cls = retrievers.get(args.retriever)  # an unknown name is refused with the registry's choices
    if args.retriever not in retrievers.INDEXED:
        raise InputError(f"{args.retriever} has no index on disk (indexed: {', '.join(retrievers.INDEXED)})",
                         field="--retriever")
    args.overrides = [*args.overrides, *shard_overrides(args, args.retriever)]
    params = params_of(args)
    fields = params.retrieve.fields
    source = corpus_file(args.dataset)
    if getattr(params, args.retriever).shards > 1:
        return _sharded(args, retrievers.sharded(args.retriever), params, source)
    empty: list[str] = []

    def items():
        for doc in iter_corpus(source):
            text = doc.content(fields)
            if not text:
                empty.append(doc.id)
            yield doc.id, text

    start = time.perf_counter()
    corpus = fingerprint.of_dataset(args.dataset)  # retrieve --corpus refuses the index with another dataset
    with atomic_path(args.output, is_dir=True) as tmp:
        index = cls.build_index(items(), Path(tmp), params)
        fingerprint.write(tmp, corpus)
    if empty:
        shown = ", ".join(empty[:5]) + (", ..." if len(empty) > 5 else "")
        print(f"index {args.retriever}: {len(empty)} documents with no text in {'+'.join(fields)} ({shown}): "
              f"{LEXICAL_MISS}")
    size = sum(p.stat().st_size for p in Path(args.output).iterdir()) / 2**20
    print(f"index {args.retriever}: {len(index.doc_ids)} documents, {len(index.vocab)} terms, {index.postings_count} "
          f"postings, {size:.1f} MiB, {time.perf_counter() - start:.1f}s -> {args.output}")
    return 0


def _sharded(args, sharded, params, source) -> int:
    """bm25.shards > 1: the shards' indexes built by tasks of a Dask cluster (``sharded``: the registry's class that
    runs the retriever in shards), a progress line per shard."""
    import time
    from pathlib import Path

    from ..core import fingerprint
    from ..core.atomic import atomic_path
    from ..core.data import LEXICAL_MISS

    start = time.perf_counter()
    corpus = fingerprint.of_dataset(args.dataset)  # retrieve --corpus refuses the index with another dataset
    with atomic_path(args.output, is_dir=True) as tmp:
        report = sharded.build_index_from(source, Path(tmp), params,
                                          lambda line: print(f"index {args.retriever}: {line}", flush=True))
        fingerprint.write(tmp, corpus)
    if report.empty:
        shown = ", ".join(report.empty[:5]) + (", ..." if len(report.empty) > 5 else "")
        print(f"index {args.retriever}: {len(report.empty)} documents with no text in "
              f"{'+'.join(params.retrieve.fields)} ({shown}): {LEXICAL_MISS}")
    size = sum(p.stat().st_size for p in Path(args.output).rglob("*") if p.is_file()) / 2**20
    print(f"index {args.retriever}: {report.documents} documents in {len(report.shards)} shards, {report.postings} "
          f"postings, {size:.1f} MiB, {time.perf_counter() - start:.1f}s -> {args.output}")
    return 0
