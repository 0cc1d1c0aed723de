"""Write README.md's result tables from the committed metrics, or check that they match.

    .venv/bin/python scripts/readme_tables.py           # rewrite the marked blocks of README.md
    .venv/bin/python scripts/readme_tables.py --check   # exit 1, naming each stale block

Each block sits between ``<!-- results:NAME:start -->`` and ``<!-- results:NAME:end -->``:

``support``          the evaluate stage's means per run (``metrics/support/<run>.json``)
``support-compare``  the compare stage's table (``metrics/support/compare.json``, rendered by
                     :func:`retrieval_lab.comparison.to_markdown`, as in ``reports/support/compare.md``)

The SciFact table has no committed metrics (that run is not in ``dvc.lock``), so it stays
hand-written. ``tests/scripts/test_readme_tables.py`` fails when README.md and the files differ.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEASURES = ["nDCG@10", "R@10", "R@100", "RR@10", "AP@100", "Success@1"]
# run -> its label in the table, in table order; a run not listed follows under its own name
LABELS = {
    "bm25": "bm25",
    "lsa": "lsa",
    "dense": "dense (base all-MiniLM-L6-v2)",
    "dense-ft-hard": "dense-ft-hard",
    "dense-ft-random": "dense-ft-random",
    "dense-ft-temperature": "dense-ft-temperature (τ = {temperature})",
    "dense-ft-query": "dense-ft-query (query side only)",
    "fused-rrf": "fused-rrf (bm25 + dense-ft-query)",
    "fused-weighted": "fused-weighted",
}


def _run_metrics(folder: Path) -> dict[str, dict]:
    """run name -> the evaluate stage's metrics (files with ``queries_evaluated``; compare.json is not one)."""
    found = {}
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and "queries_evaluated" in data:
            found[path.stem] = data
    if not found:
        raise SystemExit(f"{folder}: no metrics file of the evaluate stage")
    return found


def support_table(folder: Path, params_path: Path) -> str:
    """Markdown table: one row per run, ``MEASURES`` to 4 decimals ('-' where a measure is missing)."""
    from retrieval_lab.core.params_file import load_params

    variants = load_params(params_path).train.variants
    temperature = variants["temperature"].temperature if "temperature" in variants else "?"
    found = _run_metrics(folder)
    runs = [r for r in LABELS if r in found] + sorted(r for r in found if r not in LABELS)
    lines = ["| run | " + " | ".join(MEASURES) + " |", "|---|" + "---:|" * len(MEASURES)]
    for run in runs:
        label = LABELS.get(run, run).format(temperature=temperature)
        values = [f"{found[run][m]:.4f}" if isinstance(found[run].get(m), (int, float)) else "-" for m in MEASURES]
        lines.append(f"| {label} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def compare_block(folder: Path) -> str:
    """The compare stage's table and its notes, without the report's heading."""
    from retrieval_lab.comparison import Comparisons, to_markdown

    text = to_markdown(Comparisons.from_json(json.loads((folder / "compare.json").read_text(encoding="utf-8"))))
    return text.split("\n", 2)[2].strip("\n")  # drop "# Paired comparison on ..." and its blank line


def blocks(metrics: Path, params: Path) -> dict[str, str]:
    return {"support": support_table(metrics, params), "support-compare": compare_block(metrics)}


def _pattern(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- results:{re.escape(name)}:start -->\n)(.*?)(<!-- results:{re.escape(name)}:end -->)",
                      re.DOTALL)


def fill(text: str, generated: dict[str, str], source: str = "README.md") -> str:
    """``text`` with every block replaced by its generated content (each block must appear exactly once)."""
    for name, body in generated.items():
        pattern = _pattern(name)
        if len(pattern.findall(text)) != 1:
            raise SystemExit(f"{source}: expected one <!-- results:{name}:start --> ... "
                             f"<!-- results:{name}:end --> block")
        text = pattern.sub(lambda m, body=body: m.group(1) + body + "\n" + m.group(3), text)
    return text


def stale(text: str, generated: dict[str, str], source: str = "README.md") -> list[str]:
    """Names of the blocks whose content differs from the generated one."""
    filled = fill(text, generated, source)
    return [name for name in generated
            if _pattern(name).search(text).group(2) != _pattern(name).search(filled).group(2)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readme", default=str(ROOT / "README.md"))
    parser.add_argument("--metrics", default=str(ROOT / "metrics" / "support"),
                        help="the support dataset's metrics folder (default: metrics/support)")
    parser.add_argument("--params", default=str(ROOT / "params.yaml"), help="for the temperature variant's label")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a block is stale")
    args = parser.parse_args(argv)
    readme = Path(args.readme)
    text = readme.read_text(encoding="utf-8")
    generated = blocks(Path(args.metrics), Path(args.params))
    if args.check:
        names = stale(text, generated, str(readme))
        for name in names:
            print(f"{readme}: block results:{name} differs from {args.metrics} "
                  f"(run scripts/readme_tables.py)", file=sys.stderr)
        return 1 if names else 0
    filled = fill(text, generated, str(readme))
    if filled != text:
        readme.write_text(filled, encoding="utf-8")
        print(f"{readme}: updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
