"""Fusion registry (``--method NAME``) and grid-search tuning of each method's one parameter.

A method module defines ``fuse(runs, value, depth) -> Run``, ``PARAM`` (what its parameter is
called in reports) and ``check(value) -> None | why``; its parameter's fixed value and tuning grid
are ``fusion.methods.<NAME>`` in params (dvc.yaml fuses once per entry there).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from types import ModuleType

from ..core.data import Qrels
from ..core.errors import InputError
from ..core.params import FUSION_METHODS, FusionMethod, FusionParams, value_problem
from ..runs import Run

METHODS = FUSION_METHODS  # the registry: one module per method in this folder


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


@dataclass(frozen=True)
class GridPoint:
    value: float
    score: float  # the tune measure's mean on the tuning qrels

    def to_json(self) -> dict:
        return {"value": self.value, "score": self.score}


@dataclass(frozen=True)
class Tuning:
    """The method's parameter chosen on held-apart qrels, with every value tried: a choice made on the
    test queries would flatter the fused run, so the grid is kept to show what was tried where."""

    param: str
    chosen: float
    measure: str
    grid: tuple[GridPoint, ...]


@dataclass(frozen=True)
class FusionResult:
    """A fused run and how its parameter was set: tuned (``tuning``), or fixed and why (``reason``)."""

    run: Run
    method: str
    depth: int
    param: str
    chosen: float
    tuning: Tuning | None = None
    reason: str | None = None  # why the fixed value was used, when not tuned

    @property
    def tuned(self) -> bool:
        return self.tuning is not None

    def to_json(self) -> dict:
        """The fuse stage's report (fusion.json), without the run itself."""
        out: dict = {"method": self.method, "depth": self.depth, "tuned": self.tuned}
        if self.tuning is not None:
            t = self.tuning
            out.update(param=t.param, chosen=t.chosen, measure=t.measure, grid=[g.to_json() for g in t.grid])
        else:
            out.update(reason=self.reason, param=self.param, chosen=self.chosen)
        return out


def tune(method: str, runs: list[Run], qrels: Qrels, params: FusionParams) -> Tuning:
    """Try every value of the method's grid on ``qrels``; the best ``tune_measure`` mean wins.

    Ties go to the value listed first in the grid, so the choice never depends on float noise order.
    """
    from ..metrics import measure_run

    module, settings = _settings(method, params)
    grid = []
    for value in settings.grid:
        fused = module.fuse(runs, value, params.depth)
        grid.append(GridPoint(value, measure_run(qrels, fused, [params.tune_measure]).means[params.tune_measure]))
    best = max(grid, key=lambda point: point.score)  # max keeps the first of equals
    return Tuning(module.PARAM, best.value, params.tune_measure, tuple(grid))


def fuse(runs: list[Run], method: str = "rrf", params: FusionParams | None = None, qrels: Qrels | None = None,
         value: float | None = None) -> FusionResult:
    """Fuse ``runs`` with ``method``: with the value tuned on ``qrels`` when given and ``fusion.tune`` is on,
    else with ``value`` or the fixed ``fusion.methods.<method>.value``.

    ``params`` defaults to params.yaml's built-in defaults; ``value`` is checked by the method's own rule.
    ``qrels`` must not be the qrels the fused run is evaluated on (the validation split's, never the test's).

    Refused (:class:`InputError`), as ``retrieval-lab fuse`` refuses them: fewer than 2 runs, an empty run, a
    score that is not a finite number, an id a TREC run cannot carry, a bad grade in ``qrels``.
    """
    from ..core import checks

    if isinstance(runs, dict) or not isinstance(runs, (list, tuple)) or len(runs) < 2:
        got = len(runs) if isinstance(runs, (list, tuple)) else type(runs).__name__
        raise InputError(f"need at least 2 runs, got {got}", field="runs")
    for i, run in enumerate(runs):
        checks.check_run(run, f"runs[{i}]")
        if not run:
            raise InputError("empty run: no ranked line to fuse", field=f"runs[{i}]")
    if qrels is not None:
        checks.check_qrels(qrels)
    params = params or FusionParams()
    if value is not None:  # the schema's type (a finite number, no bool), then the method's own rule
        if (why := value_problem(value, float) or get(method).check(value)) is not None:
            raise InputError(why, field="value")
        if method not in params.methods:
            raise InputError(f"no params for fusion method {method!r} "
                             f"(given: {', '.join(params.methods) or 'none'})", field=f"fusion.methods.{method}")
        params = replace(params, tune=False, methods={**params.methods,
                                                      method: replace(params.methods[method], value=value)})
    module, settings = _settings(method, params)
    if qrels and params.tune:
        tuning = tune(method, runs, qrels, params)
        return FusionResult(module.fuse(runs, tuning.chosen, params.depth), method, params.depth, tuning.param,
                            tuning.chosen, tuning=tuning)
    # validation qrels that judge no query (a collection with test judgments alone) cannot choose: the fixed value
    why = ("a value was given" if value is not None else "no qrels given" if qrels is None
           else "fusion.tune is false" if not params.tune else "the tuning qrels judge no query")
    return FusionResult(module.fuse(runs, settings.value, params.depth), method, params.depth, module.PARAM,
                        settings.value, reason=why)
