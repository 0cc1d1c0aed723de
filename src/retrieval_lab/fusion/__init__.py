"""Fusion registry (``--method NAME``) and grid-search tuning of each method's one parameter.

A method module defines ``fuse(runs, value, depth) -> Run`` and names the fusion
params it reads: ``PARAM`` (the fixed value) and ``GRID`` (the values tried when tuning).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..core.data import Qrels
from ..core.errors import InputError
from ..core.params import FusionParams
from ..runs import Run

METHODS = ("rrf", "weighted")


def module_of(name: str) -> str:
    """The module ``--method NAME`` loads (dvc.yaml must list it as the stage's dependency)."""
    if name not in METHODS:
        raise InputError(f"unknown fusion method {name!r} (choices: {', '.join(METHODS)})", field="--method")
    return f"{__name__}.{name}"


def get(name: str) -> ModuleType:
    return importlib.import_module(module_of(name))


def tune(method: str, runs: list[Run], qrels: Qrels, params: FusionParams) -> dict:
    """Try every value of the method's grid on ``qrels``; the best ``tune_measure`` mean wins.

    Ties go to the value listed first in the grid. Returns the chosen value and every score.
    """
    from ..metrics import measure_run

    module = get(method)
    grid = getattr(params, module.GRID)
    if not grid:
        raise InputError("empty grid", field=f"fusion.{module.GRID}")
    scores = []
    for value in grid:
        fused = module.fuse(runs, value, params.depth)
        scores.append({"value": value,
                       "score": measure_run(qrels, fused, [params.tune_measure]).means[params.tune_measure]})
    best = max(scores, key=lambda row: row["score"])  # max keeps the first of equals
    return {"param": module.PARAM, "chosen": best["value"], "measure": params.tune_measure, "grid": scores}


def fuse(method: str, runs: list[Run], params: FusionParams, qrels: Qrels | None = None) -> tuple[Run, dict]:
    """Fuse with the value tuned on ``qrels`` when given and ``fusion.tune`` is on, else the fixed one."""
    module = get(method)
    report = {"method": method, "depth": params.depth}
    if qrels is not None and params.tune:
        report.update(tuned=True, **tune(method, runs, qrels, params))
    else:
        why = "no qrels given" if qrels is None else "fusion.tune is false"
        report.update(tuned=False, reason=why, param=module.PARAM, chosen=getattr(params, module.PARAM))
    return module.fuse(runs, report["chosen"], params.depth), report
