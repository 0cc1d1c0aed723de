"""Write the worked example of README's "Comparing many experiments" from experiments, or check it.

    python -m retrieval_lab.publishing.experiments --repo CLONE --experiments seed42 seed43 seed44
    python -m retrieval_lab.publishing.experiments --check   # exit 1 when the committed table is stale

The first form reads the experiments (DVC experiment names in the repository CLONE, none checked out)
into ``docs/comparing-experiments/inputs.json`` (per-query values, params, commits) and renders
``table.md``, ``table.csv`` and ``table.png`` beside it with ``retrieval-lab table`` under this
repository's params.yaml. ``--check`` renders the markdown and CSV again from the committed
``inputs.json`` and compares; ``tests/test_experiments_table.py`` runs it. The text must match and
each number may differ by one unit of its last printed digit: sums and interval ends can differ in
their last bits between CPUs, which can move a rounding that lies on the edge.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

from retrieval_lab.publishing import REPO as ROOT

FOLDER = ROOT / "docs" / "comparing-experiments"
BASELINE = "dense"
_NUMBER = re.compile(r"[-+]?\d+\.(\d+)")


def _same_table(committed: str, rendered: str) -> bool:
    """Equal text around the numbers; each number within one unit of its last printed digit."""
    if _NUMBER.sub("#", committed) != _NUMBER.sub("#", rendered):
        return False
    pairs = zip(_NUMBER.finditer(committed), _NUMBER.finditer(rendered))
    return all(
        abs(float(x.group()) - float(y.group())) <= 1.01 * 10.0 ** -len(x.group(1)) for x, y in pairs)


def _table(argv: list[str]) -> None:
    from retrieval_lab import cli

    code = cli.main(["table", "--baseline", BASELINE, "--params", str(ROOT / "params.yaml"), *argv])
    if code:
        raise SystemExit(code)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", help="the repository holding the experiments")
    parser.add_argument("--experiments", nargs="+", help="their names (dvc exp show)")
    parser.add_argument("--folder", default=str(FOLDER), help=f"default: {FOLDER.relative_to(ROOT)}")
    parser.add_argument("--check", action="store_true", help="render from the committed inputs and compare")
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            _table(["--from-inputs", str(folder / "inputs.json"), "--markdown", str(out / "table.md"),
                    "--csv", str(out / "table.csv")])
            stale = [name for name in ("table.md", "table.csv")
                     if not (folder / name).exists()
                     or not _same_table((folder / name).read_text(), (out / name).read_text())]
        for name in stale:
            print(f"{folder / name} differs from what {folder / 'inputs.json'} renders "
                  "(run python -m retrieval_lab.publishing.experiments)", file=sys.stderr)
        return 1 if stale else 0
    if not (args.repo and args.experiments):
        parser.error("--repo and --experiments are needed unless --check")
    folder.mkdir(parents=True, exist_ok=True)
    _table(["--repo", args.repo, "--experiments", *args.experiments, "--inputs", str(folder / "inputs.json"),
            "--markdown", str(folder / "table.md"), "--csv", str(folder / "table.csv"),
            "--plot", str(folder / "table.png")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
