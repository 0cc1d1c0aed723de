"""Delete what the pipeline generates (data, runs, metrics, reports, fine-tuned models, dvclive).

``--dry-run`` only lists what would go. Inputs (params.yaml, models/base.lock.json,
the raw SciFact link, code) are never touched; neither is the DVC cache.

    .venv/bin/python scripts/clean.py --scope generated --dry-run
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCOPES = {
    "generated": ["data/raw/support", "data/prepared", "data/embeddings", "data/mined", "runs", "metrics",
                  "reports", "models/finetuned", "dvclive"],
}


def targets(scope: str, root: Path = REPO) -> list[Path]:
    return [root / p for p in SCOPES[scope] if (root / p).exists() or (root / p).is_symlink()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scope", choices=sorted(SCOPES), required=True)
    parser.add_argument("--dry-run", action="store_true", help="list, delete nothing")
    parser.add_argument("--root", default=str(REPO), help=argparse.SUPPRESS)  # tests
    args = parser.parse_args(argv)
    found = targets(args.scope, Path(args.root))
    if not found:
        print("nothing to delete")
    for path in found:
        rel = path.relative_to(args.root)
        if args.dry_run:
            print(f"would delete {rel}")
        else:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
            print(f"deleted {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
