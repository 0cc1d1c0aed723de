from __future__ import annotations

import argparse

from ..core.config import add_params_args, check_paths, params_of

HELP = "encode a BEIR folder's documents and queries with a dense model into an embeddings folder"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="BEIR folder")
    parser.add_argument("--model", help="builtin, a lock file (hashes verified), a Hugging Face model folder "
                        "(fine-tuned or any other) or hub:NAME@REVISION (default: dense.lock)")
    parser.add_argument("--output", required=True, help="embeddings folder to write")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    from ..core.data import empty_documents_note, load_dataset
    from ..encoder import encode_dataset, load

    params = params_of(args)
    model = {"--model": args.model} if args.model else {"dense.lock": params.dense.lock}
    check_paths(args, {"--dataset": args.dataset, **model}, folders={"--output": args.output})
    dataset = load_dataset(args.dataset)  # a bad folder fails before the model loads
    encoder = load(args.model or params.dense.lock, params.dense.device,
                   "--model" if args.model else "dense.lock")
    note = empty_documents_note(dataset.corpus, params.retrieve.fields, "each is encoded as an empty text")
    if note:
        print(f"encode: {note}")
    report = encode_dataset(encoder, dataset, args.output, params.dense, params.retrieve.fields)
    print(f"encode: {report['documents']} documents, {report['queries']} queries on {report['device']} "
          f"in {report['seconds_documents'] + report['seconds_queries']:.1f}s "
          f"({report['docs_per_second']} docs/s) -> {args.output}")
    for kind in ("documents", "queries"):
        if report[f"truncated_{kind}"]:
            print(f"  {report[f'truncated_{kind}']} {kind} cut at {report['max_seq_length']} tokens "
                  "(dense.max_seq_length)")
    return 0
