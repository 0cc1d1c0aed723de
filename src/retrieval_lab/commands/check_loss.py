"""``retrieval-lab check-loss``: the loss gradient by autograd, by formula and by finite differences."""

from __future__ import annotations

import argparse
import json

from ..core.guard import Paths
from .arguments import check_columns, comma_floats, comma_ints, signed_row

HELP = "check multi_positive_nce's gradient on a small row (autograd vs softmax difference vs finite differences)"
PATHS = Paths()



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scores", type=comma_floats, default=[2.0, 1.0, 0.0, -1.0],
                        help="one row of scores, comma-separated (default: 2,1,0,-1)")
    parser.add_argument("--positives", type=comma_ints, default=[0, 1],
                        help="indices of the positive columns (default: 0,1)")
    parser.add_argument("--eps", type=float, default=1e-6, help="finite-difference step")
    parser.add_argument("--tolerance", type=float, default=1e-6, help="largest accepted absolute difference")


def run(args: argparse.Namespace) -> int:
    import torch

    from ..losses import gradient_check

    check_columns(args.positives, len(args.scores))
    scores = torch.tensor([args.scores], dtype=torch.float64)  # 1 x D
    mask = torch.zeros_like(scores, dtype=torch.bool)
    mask[0, args.positives] = True
    report = gradient_check(scores, mask, eps=args.eps, tolerance=args.tolerance)
    print(f"scores     {signed_row(args.scores)}   positives {args.positives}")
    print(f"loss       {report['loss']:.6f}")
    print(f"autograd   {signed_row(report['autograd'][0])}")
    print(f"analytic   {signed_row(report['analytic'][0])}   softmax(all) - softmax(positives)")
    print(f"finite     {signed_row(report['finite_difference'][0])}   central differences, eps {args.eps:g}")
    print(json.dumps({k: report[k] for k in ("max_abs_diff_analytic", "max_abs_diff_finite_difference",
                                             "tolerance", "ok")}))
    if not report["ok"]:
        print("MISMATCH: autograd disagrees with the analytic or finite-difference gradient")
        return 1
    print("ok: the three gradients agree")
    return 0
