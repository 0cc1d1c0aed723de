"""The reproducibility contract's second level: what may differ between two CPUs, and by how much.

Outputs of stages that read only text and integers (``EXACT_STAGES``) must be byte-identical
on any machine. Everything downstream of a neural model differs in its last float bits
between CPUs (instruction sets change summation order), so those outputs are compared
through their measures instead: each measure in ``metrics/<dataset>/*.json`` must stay
within ``MEASURE_TOLERANCE`` of the committed value; a file of an exact stage must match to
the last digit. The tolerance is measured by ``scripts/measure_float_drift.py`` (docs/reproducibility.md).

Wall times are never reproducible, so no output holds one: the retrieve stages write them with
``--timing`` into ``latency/`` (dvc.yaml), which no stage declares and git ignores. Every output the pipeline declares,
metrics JSONs and compare's files included, is the same bytes on a rerun on the same machine.
"""

from __future__ import annotations

import math
from pathlib import Path

from .core.parse import json_loads
from .metrics import parse_measure

# Stages whose outputs depend only on text and integers: equal bytes on every CPU.
EXACT_STAGES = ("generate", "prepare", "retrieve@bm25", "evaluate@bm25")
# Largest drift of a mean measure allowed between two CPUs, downstream of a neural model.
# Measured drift is 0: Intel Xeon (AMX) against AMD EPYC Zen 4, and Zen 4 against itself with
# every kernel capped at AVX2, gave identical measures although 23 outputs changed bytes. The
# bound covers the discrete change that was not seen: a near-tie flipping a mined negative
# changes the training data. Redrawing every dropout mask of training (a larger change) moved
# a per-run measure by at most 0.0286 on the 70 support test queries (Success@10, 2 queries).
MEASURE_TOLERANCE = 0.03
# compare.json: fields that are means of a measure (the rest are counts, p-values and labels).
_COMPARE_MEASURES = ("baseline_mean", "candidate_mean", "mean_difference", "ci_low", "ci_high")


def _is_measure(key: str) -> bool:
    try:
        parse_measure(key)
    except Exception:  # noqa: BLE001 - any name the engine does not know is bookkeeping
        return False
    return True


def measure_values(metrics: dict, name: str) -> dict[str, float]:
    """Flat ``field -> value`` of the measures in one metrics file (``compare.json`` included)."""
    if name == "compare":
        return {f"{pair}.{key}": float(values[key]) for pair, values in metrics.get("pairs", {}).items()
                for key in _COMPARE_MEASURES if isinstance(values.get(key), (int, float))}
    return {key: float(value) for key, value in metrics.items()
            if _is_measure(key) and isinstance(value, (int, float)) and not isinstance(value, bool)}


def exact_metrics() -> set[str]:
    """Metrics files (stem) of exact stages: they must match to the last digit."""
    return {stage.split("@", 1)[1] for stage in EXACT_STAGES if stage.startswith("evaluate@")}


def drift(committed_dir: str | Path, produced_dir: str | Path, tolerance: float = MEASURE_TOLERANCE) -> tuple[list[str], float]:
    """(problems, largest drift) between two ``metrics/<dataset>`` folders.

    A problem names the file, the measure and both values: a measure beyond ``tolerance``
    (beyond 0 for an exact stage's file), or a file or measure present in one folder only.
    """
    committed_dir, produced_dir = Path(committed_dir), Path(produced_dir)
    exact = exact_metrics()
    problems: list[str] = []
    largest = 0.0
    names = sorted({p.stem for p in committed_dir.glob("*.json")} | {p.stem for p in produced_dir.glob("*.json")})
    for name in names:
        paths = committed_dir / f"{name}.json", produced_dir / f"{name}.json"
        if not all(p.exists() for p in paths):
            problems.append(f"{name}.json: only in {committed_dir if paths[0].exists() else produced_dir}")
            continue
        before, after = (measure_values(json_loads(p.read_text(encoding="utf-8"), str(p)), name) for p in paths)
        limit = 0.0 if name in exact else tolerance
        for key in sorted(before.keys() | after.keys()):
            if key not in before or key not in after:
                problems.append(f"{name}.json {key}: only in one of the two")
                continue
            delta = abs(after[key] - before[key])
            if name not in exact:
                largest = max(largest, delta)
            if math.isnan(delta) or delta > limit:
                problems.append(f"{name}.json {key}: committed {before[key]!r}, produced {after[key]!r} "
                                f"(|difference| {delta:.3g} > {limit:g})")
    return problems, largest
