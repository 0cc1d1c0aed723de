"""``retrieval-lab mask-demo``: why the positive mask is built by ID, not as a diagonal."""

from __future__ import annotations

import argparse

from ..core.errors import InputError
from ..core.guard import Paths
from .arguments import check_columns, comma_floats, comma_ints, signed_row

HELP = "show a second positive's gradient flip sign (pushed down) under a diagonal-style mask"
PATHS = Paths()



def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scores", type=comma_floats, default=[2.0, 1.0, 0.0, -1.0],
                        help="one row of scores, comma-separated (default: 2,1,0,-1)")
    parser.add_argument("--positives", type=comma_ints, default=[0, 1],
                        help="positive columns; the diagonal mask keeps only the first (default: 0,1)")


def run(args: argparse.Namespace) -> int:
    import torch

    from ..losses import mask_comparison

    if len(args.positives) < 2:
        raise InputError("needs at least two columns to show the effect", field="--positives")
    check_columns(args.positives, len(args.scores))
    out = mask_comparison(torch.tensor(args.scores), args.positives)
    print(f"scores {signed_row(args.scores)}; relevant documents: columns {args.positives}")
    print("d loss / d score (gradient descent moves each score against its sign):")
    for name in ("multi_positive", "diagonal"):
        part = out[name]
        print(f"  {name:15s} positives {part['positives']!s:8s} loss {part['loss']:.6f} "
              f"gradient {signed_row(part['gradient'])}")
    for j in args.positives[1:]:
        m, d = out["multi_positive"]["gradient"][j], out["diagonal"]["gradient"][j]
        print(f"  column {j}: {m:+.6f} (pulled up) with the multi-positive mask, "
              f"{d:+.6f} ({'pushed down' if d > 0 else 'not pushed down'}) with the diagonal mask")
    if not out["ok"]:
        print("unexpected: no sign flip for the extra positives")
        return 1
    return 0
