from __future__ import annotations

import argparse

from ..core.guard import FILE, FOLDER, Found, Paths, base_model_input
from ..core.kinds import RUN, TIMING
from ..core.params_cli import add_params_args, add_shard_args, params_of, shard_overrides

HELP = ("rank documents for each query with one retriever (bm25, lsa, dense, or your own: external) and write a "
        "TREC run, with its per-query latency (--timing)")


def _derived(args: argparse.Namespace) -> Found:
    """The base model params.yaml names, and an external retriever's files (external.NAME.path)."""
    from pathlib import Path

    found = base_model_input(args)
    if args.external:
        external = params_of(args).external.get(args.external)
        if external is not None:
            found.inputs[f"external.{args.external}.path"] = [(Path(external.path), FILE)]
    return found


PATHS = Paths(inputs={"--dataset": FOLDER, "--embeddings": FOLDER, "--corpus": FOLDER}, outputs={"--output": FILE, "--timing": FILE},
              kinds={"--output": RUN, "--timing": TIMING},
              words=("--retriever", "--split", "--external", "--scheduler"), derive=_derived)



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--retriever", required=True, help="retriever name (bm25, lsa, dense, external)")
    parser.add_argument("--external", metavar="NAME", help="with --retriever external: the retriever params' "
                        "external.NAME declares (docs/own-retriever.md)")
    parser.add_argument("--output", required=True, help="TREC run file to write")
    parser.add_argument("--timing", help="timing file to write (the pipeline: latency/<dataset>/<run>.json, not "
                        "in git; shown by `retrieval-lab latency`): per-query wall times, p50/p95/p99, QPS, the "
                        "machine (built-in retrievers: a second, timed pass query by query); required with "
                        "external, whose failures and counts it names")
    parser.add_argument("--dataset", help="BEIR folder: the corpus for lexical retrievers, the queries "
                        "(and qrels for --split) for all; dense encodes it on the fly without --embeddings")
    parser.add_argument("--embeddings", help="embeddings folder (from `encode` or training), dense only")
    parser.add_argument("--corpus", help="where the documents come from: --dataset itself (the default), or an "
                        "index folder written by `retrieval-lab index` for this retriever (bm25), read memory-mapped "
                        "instead of indexing --dataset's corpus again (its queries and qrels are still read)")
    parser.add_argument("--split", help="only this split's queries (default: every query of the folder)")
    parser.add_argument("--depth", type=int, help="documents per query (default: retrieve.depth)")
    add_shard_args(parser)
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
        from ..core import fingerprint

        # the folder may hold another corpus since it was encoded
        fingerprint.check(source.report.get("corpus"), path, str(args.embeddings), "--embeddings",
                          fingerprint.ENCODE_AGAIN)
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
    import contextlib

    args.overrides = [*args.overrides, *shard_overrides(args, args.retriever)]
    with contextlib.ExitStack() as resources:  # a sharded retriever's cluster, left when the command ends
        return _run(args, resources)


def _progress(args):
    return lambda line: print(f"retrieve {args.retriever}: {line}", flush=True)  # a line per shard done


def _built_by(args, params, cls):
    """``(class, extra arguments)`` that build the retriever from its inputs: the registry's sharded class with a
    progress line per shard when the params ask for shards (``<retriever>.shards`` > 1), ``cls`` otherwise."""
    from .. import retrievers

    sharded = retrievers.sharded(args.retriever)
    if sharded is None or getattr(params, args.retriever).shards == 1:
        return cls, {}
    return sharded, {"progress": _progress(args)}


def _run(args: argparse.Namespace, resources) -> int:
    import contextlib
    import time

    from .. import retrievers
    from ..core.data import LEXICAL_MISS, empty_documents_note, load_dataset
    from ..core.errors import InputError

    params = params_of(args)
    cls = retrievers.get(args.retriever)
    if (args.retriever == "external") != (args.external is not None):
        raise InputError("--external NAME goes with --retriever external, and only with it", field="--external")
    if args.retriever == "external" and args.timing is None:
        raise InputError("an external retriever's failures are written to --timing: give it", field="--timing")
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
    source = ""
    if args.corpus and not _same_folder(args.corpus, args.dataset):
        retriever, queries = _from_index(args, params, resources)
        source = f"index {args.corpus}, "
    else:
        dataset = load_dataset(args.dataset, [args.split] if args.split else None) if args.dataset else None
        if dataset is not None and args.retriever != "external":
            consequence = (LEXICAL_MISS if cls.needs == "dataset"
                           else "each is ranked by the embedding of an empty text")
            note = empty_documents_note(dataset.corpus, params.retrieve.fields, consequence)
            if note:
                print(f"retrieve {args.retriever}: {note}")
        if args.retriever == "external":
            return _external(args, cls, params, dataset, depth, start)
        builder, extra = _built_by(args, params, cls)
        retriever = builder.from_inputs(params, dataset=dataset, embeddings=args.embeddings, **extra)
        if hasattr(retriever, "close"):  # sharded: leave the cluster when done
            resources.callback(retriever.close)
        queries = _queries(args, dataset, retriever)
    result = retriever.search(queries, depth)
    timing = None
    if args.timing:  # a second pass, one query at a time: the run above keeps its batched bytes
        from ..latency import Timing, time_each

        with getattr(retriever, "quiet", contextlib.nullcontext)():  # no progress line per query
            seconds, wall = time_each(lambda qid: retriever.search({qid: queries[qid]}, depth), queries)
        scope = ("search over the query embeddings encoded beforehand" if args.embeddings
                 else "search of one query" + (", its encoding included" if cls.needs == "embeddings" else ""))
        if hasattr(retriever, "shards"):  # sharded: every round trip to the cluster is in a query's time
            scope += f", over {len(retriever.shards)} shards on a Dask cluster (tasks sent, run, merged)"
        timing = Timing(args.retriever, scope, 1, seconds, wall)
    _write(args, result, args.retriever, depth, timing)
    empty = sum(1 for docs in result.values() if not docs)
    print(f"retrieve {args.retriever}: {len(queries)} queries, depth {depth}, "
          f"{empty} queries without any result, {source}{time.perf_counter() - start:.1f}s -> {args.output}")
    if timing is not None:
        _print_latency(args.retriever, timing)
    return 0


def _write(args, result, tag: str, depth: int, timing) -> None:
    """The run, then its timing: everything computed before the first file is written."""
    from ..core.atomic import write_json
    from ..runs import write_run

    write_run(args.output, result, tag=tag, depth=depth)
    if timing is not None:
        write_json(args.timing, timing.to_json(), kind=TIMING)


def _print_latency(name: str, timing) -> None:
    s = timing.summary()
    print(f"  latency {name}: p50 {s['p50_ms']:.2f} ms, p95 {s['p95_ms']:.2f} ms, p99 {s['p99_ms']:.2f} ms, "
          f"{s['qps']:.1f} queries/s at concurrency {s['concurrency']} ({s['scope']}; "
          f"{timing.machine.get('cpu_count')} CPUs, {timing.machine.get('cpu')})")


def _external(args, cls, params, dataset, depth: int, start: float) -> int:
    """The user's retriever (``cls``: retrievers/external.py, through the registry): every query called, failures
    and odd answers counted, the run written only within ``max_failed``."""
    import os
    import time

    # the outputs where the guard checked them, whatever the user's code does with the working folder
    checked = argparse.Namespace(output=os.path.abspath(args.output), timing=os.path.abspath(args.timing))
    retriever = cls.from_inputs(params, dataset=dataset, external=args.external,
                                              depth=depth if args.depth is not None else None)
    queries = _queries(args, dataset, retriever)
    collected = retriever.collect(queries)
    retriever.check(collected)
    _write(checked, collected.run, args.external, retriever.k, collected.timing)
    calls = collected.timing.calls
    print(f"retrieve external {args.external}: {calls['answered']} of {calls['queries']} queries answered, "
          f"{calls['failed']} failed (at most {calls['max_failed']:.1%} allowed), k {retriever.k}, "
          f"{calls['unknown_ids']} ids not in the corpus left out, {calls['queries_scored_by_rank']} queries scored "
          f"by rank, {time.perf_counter() - start:.1f}s -> {args.output}")
    for qid, why in list(calls["failures"].items())[:10]:
        print(f"  failed {qid}: {why}")
    _print_latency(args.external, collected.timing)
    return 0


def _same_folder(a: str, b: str | None) -> bool:
    from pathlib import Path

    return b is not None and Path(a).resolve() == Path(b).resolve()


def _from_index(args, params, resources):
    """A retriever read from its saved index, and the queries to run: the corpus is not read (the index holds
    what it needs of it). A sharded index is loaded by the workers of a Dask cluster, left when the command ends."""
    from .. import retrievers
    from ..core.data import load_dataset
    from ..core.errors import InputError

    if args.retriever not in retrievers.INDEXED:
        raise InputError(f"{args.retriever} has no index on disk (indexed: {', '.join(retrievers.INDEXED)}): "
                         "its --corpus can only be --dataset", str(args.corpus), field="--corpus")
    if not args.dataset:
        raise InputError("--corpus needs --dataset: the BEIR folder whose queries are run", field="--dataset")
    sharded = retrievers.sharded(args.retriever)
    if sharded is not None and sharded.is_index(args.corpus):  # index with shards: searched where they are loaded
        from ..core import fingerprint

        fingerprint.check(fingerprint.read(args.corpus), args.dataset, str(args.corpus), "--corpus",
                          fingerprint.INDEX_AGAIN)  # an index of another corpus ranks documents it does not have
        retriever = sharded.from_index_folder(args.corpus, params, progress=_progress(args))
    else:
        retriever = retrievers.from_index(args.retriever, args.corpus, params, args.dataset)
    if hasattr(retriever, "close"):
        resources.callback(retriever.close)
    dataset = load_dataset(args.dataset, [args.split] if args.split else None, doc_ids=retriever.doc_ids)
    return retriever, _queries(args, dataset, None)
