"""Load every training checkpoint (state.pt) under a folder: check its keys, and that its weights load.

Weights are loaded strictly into the base model (the lock, or --model), so a
checkpoint of another architecture or a truncated file is reported. Exit status
1 when any checkpoint fails, 0 otherwise (also when there is none).

    .venv/bin/python scripts/check_checkpoints.py [FOLDER=models/finetuned] [--model models/base.lock.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def check(path: Path, model) -> tuple[bool, str]:
    from retrieval_lab.core.errors import InputError
    from retrieval_lab.training import load_checkpoint

    try:
        state = load_checkpoint(path)
    except (InputError, RuntimeError, EOFError, OSError, ValueError) as exc:  # torch.load raises these
        return False, f"unreadable: {exc}"
    try:
        model.load_state_dict(state["model"], strict=True)  # raises on a missing, extra or misshapen tensor
    except RuntimeError as exc:
        return False, f"weights do not load: {str(exc).splitlines()[0]}"
    fp = state["fingerprint"]
    return True, (f"step {state['step']} epoch {state['epoch']} position {state['position']}, variant "
                  f"{fp.get('variant', {}).get('name')}, {len(state['model'])} tensors")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(REPO / "models" / "finetuned"))
    parser.add_argument("--model", default=str(REPO / "models" / "base.lock.json"),
                        help="lock file or model folder whose architecture the weights must fit")
    args = parser.parse_args()
    if not Path(args.folder).is_dir():  # a mistyped folder would otherwise pass as "nothing to check"
        print(f"error: {args.folder}: no such folder", file=sys.stderr)
        return 2
    paths = sorted(Path(args.folder).rglob("state.pt"))
    if not paths:
        print(f"no state.pt under {args.folder}")
        return 0
    from retrieval_lab.encoder import load

    model = load(args.model, "cpu").model
    failed = 0
    for path in paths:
        ok, message = check(path, model)
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {path}: {message}")
    print(f"{len(paths) - failed}/{len(paths)} checkpoints ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
