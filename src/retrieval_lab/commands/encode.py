from __future__ import annotations

import argparse

from ..core.guard import FILE, FOLDER, Found, Paths, base_model_input
from ..core.params import base_model
from ..core.params_cli import add_params_args, add_shard_args, params_of, shard_overrides

HELP = "encode a BEIR folder's documents and queries with a dense model into an embeddings folder"
PATHS = Paths(inputs={"--dataset": FOLDER, "--model": FILE}, outputs={"--output": FOLDER}, words=("--scheduler",),
              derive=lambda args: Found() if args.model else base_model_input(args))



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="BEIR folder")
    parser.add_argument("--model", help="builtin, a lock file (hashes verified), a Hugging Face model folder "
                        "(fine-tuned or any other) or hub:NAME@REVISION (default: the model train.base names "
                        "under dense.models)")
    parser.add_argument("--output", required=True, help="embeddings folder to write")
    add_shard_args(parser)
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    """Encode on this process, or, under ``torchrun --nproc-per-node N`` (``--nnodes`` for several machines),
    each rank a shard of the documents and of the queries, rank 0 writing the folder, or, with dense.shards > 1,
    each shard a task of a Dask cluster (CPUs of several machines)."""
    from ..core.data import empty_documents_note, load_dataset
    from ..distributed import end_distributed, init_distributed
    from ..encoder import encode_dataset, load

    args.overrides = [*args.overrides, *shard_overrides(args, "dense")]
    params = params_of(args)
    spec, where = (args.model, "--model") if args.model else base_model(params)
    dataset = load_dataset(args.dataset)  # a bad folder fails before the model loads
    if params.dense.shards > 1:
        return _on_dask(args, params, spec, where, dataset)
    dist_info, device = init_distributed(params.dense.device)
    encoder = load(spec, device, where)
    note = empty_documents_note(dataset.corpus, params.retrieve.fields, "each is encoded as an empty text")
    if note and dist_info.main:
        print(f"encode: {note}")
    report = encode_dataset(encoder, dataset, args.output, params.dense, params.retrieve.fields, dist_info)
    end_distributed(dist_info)
    if not dist_info.main:
        return 0
    on = f"{report['device']} x {dist_info.world} processes" if dist_info.world > 1 else report["device"]
    print(f"encode: {report['documents']} documents, {report['queries']} queries on {on} "
          f"in {report['seconds_documents'] + report['seconds_queries']:.1f}s "
          f"({report['docs_per_second']} docs/s) -> {args.output}")
    _print_truncated(report)
    return 0


def _print_truncated(report: dict) -> None:
    for kind in ("documents", "queries"):
        if report[f"truncated_{kind}"]:
            print(f"  {report[f'truncated_{kind}']} {kind} cut at {report['max_seq_length']} tokens "
                  "(dense.max_seq_length: --set dense.max_seq_length=N raises it, up to the model's limit)")


def _on_dask(args, params, spec: str, where: str, dataset) -> int:
    """dense.shards > 1: the texts' shards encoded by tasks of the Dask cluster dense.scheduler names (a LocalCluster
    when null), a progress line per shard; this process writes the folder."""
    import os

    from ..core.cluster import client_for
    from ..core.data import empty_documents_note
    from ..core.errors import InputError
    from ..encoder import ShardedEncoding, encode_dataset, load

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise InputError("dense.shards > 1 encodes on a Dask cluster: run it once, not under torchrun",
                         field="dense.shards")
    encoder = load(spec, params.dense.device, where)  # checked here first: the workers load the same files
    note = empty_documents_note(dataset.corpus, params.retrieve.fields, "each is encoded as an empty text")
    if note:
        print(f"encode: {note}")
    with client_for(params.dense.scheduler, params.dense.shards, "dense.scheduler") as client:
        sharded = ShardedEncoding(client, spec, where, params.dense.shards,
                                  lambda line: print(f"encode: {line}", flush=True))
        report = encode_dataset(encoder, dataset, args.output, params.dense, params.retrieve.fields, sharded)
    print(f"encode: {report['documents']} documents, {report['queries']} queries in {params.dense.shards} shards "
          f"on a Dask cluster in {report['seconds_documents'] + report['seconds_queries']:.1f}s "
          f"({report['docs_per_second']} docs/s) -> {args.output}")
    _print_truncated(report)
    return 0
