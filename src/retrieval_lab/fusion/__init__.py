"""Fusion registry (``--method NAME``) and grid-search tuning of each method's one parameter.

A method module defines ``fuse(runs, value, depth) -> Run``, ``PARAM`` (what its parameter is
called in reports) and ``check(value) -> None | why``; its parameter's fixed value and tuning grid
are ``fusion.methods.<NAME>`` in params (dvc.yaml fuses once per entry there).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..core.data import Qrels
from ..core.errors import InputError
from ..core.params import FusionMethod, FusionParams
from ..runs import Run

METHODS = ("rrf", "weighted")


def module_of(name: str, field: str = "--method") -> str:
    """The module ``--method NAME`` loads (dvc.yaml must list it as the stage's dependency)."""
    if name not in METHODS:
        raise InputError(f"unknown fusion method {name!r} (choices: {', '.join(METHODS)})", field=field)
    return f"{__name__}.{name}"


def get(name: str) -> ModuleType:
    return importlib.import_module(module_of(name))


def _settings(method: str, params: FusionParams) -> tuple[ModuleType, FusionMethod]:
    """The method's module and its params, every value checked by the module's own rule."""
    module = get(method)
    where = f"fusion.methods.{method}"
    if method not in params.methods:
        raise InputError(f"no params for fusion method {method!r} (given: {', '.join(params.methods) or 'none'})",
                         field=where)
    settings = params.methods[method]
    for key, value in [("value", settings.value), *((f"grid[{i}]", v) for i, v in enumerate(settings.grid))]:
        if (why := module.check(value)) is not None:
            raise InputError(why, field=f"{where}.{key}")
    return module, settings


def tune(method: str, runs: list[Run], qrels: Qrels, params: FusionParams) -> dict:
    """Try every value of the method's grid on ``qrels``; the best ``tune_measure`` mean wins.

    Ties go to the value listed first in the grid. Returns the chosen value and every score.
    """
    from ..metrics import measure_run

    module, settings = _settings(method, params)
    scores = []
    for value in settings.grid:
        fused = module.fuse(runs, value, params.depth)
        scores.append({"value": value,
                       "score": measure_run(qrels, fused, [params.tune_measure]).means[params.tune_measure]})
    best = max(scores, key=lambda row: row["score"])  # max keeps the first of equals
    return {"param": module.PARAM, "chosen": best["value"], "measure": params.tune_measure, "grid": scores}


def fuse(method: str, runs: list[Run], params: FusionParams, qrels: Qrels | None = None) -> tuple[Run, dict]:
    """Fuse with the value tuned on ``qrels`` when given and ``fusion.tune`` is on, else the fixed one."""
    module, settings = _settings(method, params)
    report = {"method": method, "depth": params.depth}
    if qrels is not None and params.tune:
        report.update(tuned=True, **tune(method, runs, qrels, params))
    else:
        why = "no qrels given" if qrels is None else "fusion.tune is false"
        report.update(tuned=False, reason=why, param=module.PARAM, chosen=settings.value)
    return module.fuse(runs, report["chosen"], params.depth), report
