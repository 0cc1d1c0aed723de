"""``retrieval-lab train``: contrastive fine-tuning of the dense encoder (stage ``train``)."""

from __future__ import annotations

import argparse
import json
import os

from ..core.config import add_params_args, params_of

HELP = "fine-tune the base encoder on mined negatives; save the model and the dataset's embeddings"


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

    result = run_training(params_of(args), args.dataset, args.negatives, args.variant, args.model_out,
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
