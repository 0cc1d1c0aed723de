"""``retrieval-lab train``: contrastive fine-tuning of the dense encoder (stage ``train``)."""

from __future__ import annotations

import argparse
import json
import os

from ..core.guard import FILE, FOLDER, Found, Paths, base_model_input
from ..core.kinds import CHECKPOINT
from ..core.params_cli import add_params_args, params_of

HELP = "fine-tune the base encoder on mined negatives; save the model and the dataset's embeddings"


def _derived(args: argparse.Namespace) -> Found:
    """The default checkpoint (with --stop-after), --resume unless it is that checkpoint, the base model."""
    from pathlib import Path

    from ..training.checkpoint import default_checkpoint

    checkpoint = args.checkpoint or (default_checkpoint(args.model_out) if args.stop_after is not None else None)
    # resuming from the checkpoint this run goes on writing is reading back what the stage wrote
    same = args.resume and checkpoint and Path(args.resume).resolve() == Path(checkpoint).resolve()
    base = base_model_input(args)
    inputs = {**base.inputs, **({"--resume": [(Path(args.resume), FILE)]} if args.resume and not same else {})}
    return Found(inputs=inputs, outputs={"--checkpoint": (Path(checkpoint), FILE)} if checkpoint else {},
                 kinds={"--checkpoint": CHECKPOINT} if checkpoint else {})


PATHS = Paths(inputs={"--dataset": FOLDER, "--negatives": FILE, "--base-embeddings": FOLDER},
              outputs={"--model-out": FOLDER, "--embeddings-out": FOLDER, "--live-dir": FOLDER},
              words=("--variant", "--resume", "--checkpoint"),  # the last two: paths that _derived declares
              derive=_derived)



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="prepared dataset folder (data/prepared/<ds>)")
    parser.add_argument("--negatives", required=True, help="negatives.jsonl from `mine`")
    parser.add_argument("--variant", required=True, help="a name under train.variants in params.yaml")
    parser.add_argument("--model-out", required=True, help="fine-tuned model folder (Hugging Face format)")
    parser.add_argument("--embeddings-out", required=True, help="embeddings folder of the dataset")
    parser.add_argument("--base-embeddings", help="the base model's embeddings folder (`encode`): the frozen "
                        "documents of a query-side variant (train.variants.<name>.side: query)")
    parser.add_argument("--live-dir", required=True, help="dvclive folder (loss, lr, validation metrics)")
    parser.add_argument("--stop-after", type=int, metavar="N", help="stop at global step N, leaving a checkpoint")
    parser.add_argument("--resume", metavar="PATH", help="continue from this state.pt")
    parser.add_argument("--checkpoint", metavar="PATH",
                        help="where to write state.pt (each epoch end and at --stop-after; "
                             "default with --stop-after: <model-out>.checkpoint/state.pt)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    from ..training import run_training

    params = params_of(args)
    result = run_training(params, args.dataset, args.negatives, args.variant, args.model_out,
                          args.embeddings_out, args.live_dir, base_embeddings=args.base_embeddings,
                          stop_after=args.stop_after, resume=args.resume,
                          checkpoint=args.checkpoint, progress=not args.no_progress)
    summary = {"steps": result.steps, "total_steps": result.total_steps, "stopped_early": result.stopped_early,
               "first_loss": result.history[0]["loss"] if result.history else None,
               "last_loss": result.history[-1]["loss"] if result.history else None,
               "seconds": round(result.seconds, 1)}
    if result.validation:
        summary["validation"] = result.validation[-1]
    if os.environ.get("RANK", "0") == "0":  # under torchrun, one summary
        print(json.dumps(summary))
    return 0
