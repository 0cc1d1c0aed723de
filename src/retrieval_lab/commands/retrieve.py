from __future__ import annotations

import argparse

from ..core.params import base_model
from ..core.params_cli import add_params_args, check_paths, params_of

HELP = "rank documents for each query with one retriever (bm25, lsa, dense) and write a TREC run"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--retriever", required=True, help="retriever name (bm25, lsa, dense)")
    parser.add_argument("--output", required=True, help="TREC run file to write")
    parser.add_argument("--dataset", help="BEIR folder: the corpus for lexical retrievers, the queries "
                        "(and qrels for --split) for all; dense encodes it on the fly without --embeddings")
    parser.add_argument("--embeddings", help="embeddings folder (from `encode` or training), dense only")
    parser.add_argument("--corpus", help="where the documents come from: --dataset itself (the default), or an "
                        "index folder written by `retrieval-lab index` for this retriever (bm25), read memory-mapped "
                        "instead of indexing --dataset's corpus again (its queries and qrels are still read)")
    parser.add_argument("--split", help="only this split's queries (default: every query of the folder)")
    parser.add_argument("--depth", type=int, help="documents per query (default: retrieve.depth)")
    add_params_args(parser)


def _queries(args, dataset, retriever) -> dict[str, str]:
    from ..core.data import load_dataset
    from ..core.errors import InputError

    if dataset is None and args.split:
        # the embeddings report names the folder it was encoded from
        source = getattr(retriever, "embeddings", None)
        path = source.report.get("dataset") if source is not None else None
        if not path:
            raise InputError("--split needs the queries' BEIR folder: give --dataset", field="--dataset")
        dataset = load_dataset(path, [args.split])
    if dataset is None:
        # every query is already encoded in the embeddings folder; its text is not needed
        return {qid: "" for qid in retriever.embeddings.query_ids}
    queries = dataset.split_queries(args.split) if args.split else dataset.queries
    if args.split and not queries:  # an empty qrels file: an empty run would pass for a real one
        raise InputError(f"split {args.split!r} judges no query: nothing to retrieve",
                         str(dataset.path / "qrels" / f"{args.split}.tsv"), field="--split")
    return {qid: q.text for qid, q in queries.items()}


def run(args: argparse.Namespace) -> int:
    import time

    from .. import retrievers
    from ..core.data import LEXICAL_MISS, empty_documents_note, load_dataset
    from ..core.errors import InputError
    from ..runs import write_run

    params = params_of(args)
    spec, where = base_model(params)
    check_paths(args, {"--dataset": args.dataset, "--embeddings": args.embeddings, "--corpus": args.corpus,
                       where: spec}, files={"--output": args.output})
    cls = retrievers.get(args.retriever)
    if args.depth is not None:
        both = [text for text in args.overrides if text.split("=", 1)[0].strip() in ("retrieve", "retrieve.depth")]
        if both:  # two values for one setting: neither may win silently
            raise InputError(f"--depth {args.depth} and --set {both[0]} both set the depth: give one",
                             field="--depth")
    depth = params.retrieve.depth if args.depth is None else args.depth
    if depth < 1:
        raise InputError(f"depth must be positive, got {depth}", field="--depth")
    if args.embeddings and cls.needs != "embeddings":
        raise InputError(f"{args.retriever} reads a BEIR folder (--dataset), not embeddings", field="--embeddings")
    start = time.perf_counter()
    if args.corpus and not _same_folder(args.corpus, args.dataset):
        return _from_index(args, params, depth, start)
    dataset = load_dataset(args.dataset, [args.split] if args.split else None) if args.dataset else None
    if dataset is not None:
        consequence = (LEXICAL_MISS if cls.needs == "dataset"
                       else "each is ranked by the embedding of an empty text")
        note = empty_documents_note(dataset.corpus, params.retrieve.fields, consequence)
        if note:
            print(f"retrieve {args.retriever}: {note}")
    retriever = cls.from_inputs(params, dataset=dataset, embeddings=args.embeddings)
    queries = _queries(args, dataset, retriever)
    result = retriever.search(queries, depth)
    write_run(args.output, result, tag=args.retriever, depth=depth)
    empty = sum(1 for docs in result.values() if not docs)
    print(f"retrieve {args.retriever}: {len(queries)} queries, depth {depth}, "
          f"{empty} queries without any result, {time.perf_counter() - start:.1f}s -> {args.output}")
    return 0


def _same_folder(a: str, b: str | None) -> bool:
    from pathlib import Path

    return b is not None and Path(a).resolve() == Path(b).resolve()


def _from_index(args, params, depth: int, start: float) -> int:
    """A retriever read from its saved index: the corpus is not read (the index holds what it needs of it)."""
    import time

    from .. import retrievers
    from ..core.data import load_dataset
    from ..core.errors import InputError
    from ..runs import write_run

    if args.retriever not in retrievers.INDEXED:
        raise InputError(f"{args.retriever} has no index on disk (indexed: {', '.join(retrievers.INDEXED)}): "
                         "its --corpus can only be --dataset", str(args.corpus), field="--corpus")
    if not args.dataset:
        raise InputError("--corpus needs --dataset: the BEIR folder whose queries are run", field="--dataset")
    retriever = retrievers.get(args.retriever).from_index_folder(args.corpus, params)
    dataset = load_dataset(args.dataset, [args.split] if args.split else None, doc_ids=retriever.doc_ids)
    queries = _queries(args, dataset, None)
    result = retriever.search(queries, depth)
    write_run(args.output, result, tag=args.retriever, depth=depth)
    empty = sum(1 for docs in result.values() if not docs)
    print(f"retrieve {args.retriever}: {len(queries)} queries, depth {depth}, {empty} queries without any result, "
          f"index {args.corpus}, {time.perf_counter() - start:.1f}s -> {args.output}")
    return 0
