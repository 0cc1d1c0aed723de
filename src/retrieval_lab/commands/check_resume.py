"""``retrieval-lab check-resume``: an interrupted and resumed run must equal an uninterrupted one."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile

from ..core.guard import FILE, FOLDER, Paths, base_model_input
from ..core.kinds import CHECK_RESUME
from ..core.params import base_model
from ..core.params_cli import add_params_args, params_of

HELP = "train a tiny setting straight and stopped+resumed; check steps, data order, losses, weights (JSON report)"
PATHS = Paths(inputs={"--dataset": FOLDER, "--negatives": FILE}, outputs={"--output": FILE},
              words=("--variant", "--device"), derive=base_model_input, kinds={"--output": CHECK_RESUME})



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="prepared dataset folder")
    parser.add_argument("--negatives", required=True, help="negatives.jsonl from `mine`")
    parser.add_argument("--variant", default="hard", help="train.variants entry (default: hard)")
    parser.add_argument("--steps", type=int, default=4, help="total steps (default 4)")
    parser.add_argument("--stop-after", type=int, help="interrupt at this step (default: steps // 2)")
    parser.add_argument("--batch-size", type=int, default=4, help="queries per batch (default 4)")
    parser.add_argument("--max-length", type=int, default=32, help="tokens per text (default 32)")
    parser.add_argument("--device", default="cpu", help="cpu (bitwise check) | cuda | auto (default cpu)")
    parser.add_argument("--output", required=True, help="JSON report path")
    add_params_args(parser)


def run(args: argparse.Namespace) -> int:
    from ..core.atomic import write_json
    from ..core.data import load_dataset
    from ..encoder import load
    from ..training import TrainSpec, check_resume, training_data

    params = params_of(args)
    model, where = base_model(params)
    spec = TrainSpec.from_params(params.train, args.variant, max_steps=args.steps, batch_size=args.batch_size,
                                 max_seq_length=args.max_length)
    dataset = load_dataset(args.dataset)
    data = training_data(dataset, args.negatives, spec.train.positives_per_query, list(params.retrieve.fields),
                         spec.train.positives_at_least, spec)
    with tempfile.TemporaryDirectory(prefix="check-resume-") as work:
        report = check_resume(lambda: load(model, args.device, where), data, spec,
                              args.stop_after or args.steps // 2, work)
    write_json(args.output, report, kind=CHECK_RESUME)
    print(json.dumps({"passed": report["passed"], **report["checks"],
                      "max_abs_param_diff": report["max_abs_param_diff"]}))
    if not report["passed"]:
        print(f"check-resume FAILED (see {args.output})", file=sys.stderr)
        return 1
    return 0
