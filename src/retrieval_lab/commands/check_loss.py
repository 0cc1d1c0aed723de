"""``retrieval-lab check-loss``: the loss gradient by autograd, by formula and by finite differences."""

from __future__ import annotations

import argparse
import json

HELP = "check multi_positive_nce's gradient on a small row (autograd vs softmax difference vs finite differences)"


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",")]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scores", type=_floats, default=[2.0, 1.0, 0.0, -1.0],
                        help="one row of scores, comma-separated (default: 2,1,0,-1)")
    parser.add_argument("--positives", type=_ints, default=[0, 1],
                        help="indices of the positive columns (default: 0,1)")
    parser.add_argument("--eps", type=float, default=1e-6, help="finite-difference step")
    parser.add_argument("--tolerance", type=float, default=1e-6, help="largest accepted absolute difference")


def _row(values: list[float]) -> str:
    return "[" + ", ".join(f"{v:+.6f}" for v in values) + "]"


def run(args: argparse.Namespace) -> int:
    import torch

    from ..losses import gradient_check

    scores = torch.tensor([args.scores], dtype=torch.float64)  # 1 x D
    mask = torch.zeros_like(scores, dtype=torch.bool)
    try:
        mask[0, args.positives] = True
    except IndexError:
        print(f"error: --positives {args.positives} outside 0..{scores.shape[1] - 1}")
        return 2
    report = gradient_check(scores, mask, eps=args.eps, tolerance=args.tolerance)
    print(f"scores     {_row(args.scores)}   positives {args.positives}")
    print(f"loss       {report['loss']:.6f}")
    print(f"autograd   {_row(report['autograd'][0])}")
    print(f"analytic   {_row(report['analytic'][0])}   softmax(all) - softmax(positives)")
    print(f"finite     {_row(report['finite_difference'][0])}   central differences, eps {args.eps:g}")
    print(json.dumps({k: report[k] for k in ("max_abs_diff_analytic", "max_abs_diff_finite_difference",
                                             "tolerance", "ok")}))
    if not report["ok"]:
        print("MISMATCH: autograd disagrees with the analytic or finite-difference gradient")
        return 1
    print("ok: the three gradients agree")
    return 0
