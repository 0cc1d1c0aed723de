"""The package's import graph, read from the source (no module is imported): no cycle, no module importing
a higher layer, no command importing another. Every import counts, a function's deferred ones too: a
deferred import that closes a cycle still ties two modules into one."""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

from beir_fixtures import REPO

ROOT = REPO / "src" / "retrieval_lab"

# core < data, metrics, retrievers < evaluation, comparison < commands < cli < the package's API (__init__)
LAYERS = [
    ("core",),
    ("pipeline_names", "runs", "report_files", "metrics", "stats", "tokenizer", "diagnosis", "encoder", "runtimes", "model_files", "retrievers",
     "fusion", "losses", "negatives", "distributed", "generate", "prepare", "judgment_pool", "inspection",
     "reproducibility", "mining", "pr_comment", "latency", "machine", "exit_codes"),
    ("evaluation", "comparison", "training", "experiments_table", "reporting", "page", "judging"),
    ("commands",),
    ("cli", "publishing"),  # publishing renders committed results through the CLI's commands
    ("",),  # retrieval_lab itself: names loaded on first use, from any layer
]


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in ROOT.rglob("*.py")}


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[:len(package) - node.level + 1] if node.level else []
    prefix = ".".join(base + ([node.module] if node.module else []))
    return [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in MODULES else prefix for a in node.names]


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports (a name imported from a package counts as the package)."""
    graph = {}
    for module, path in MODULES.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(module, path, node):
                    while target not in MODULES and "." in target:
                        target = target.rsplit(".", 1)[0]
                    if target in MODULES and target != module:
                        deps.add(target)
        graph[module] = deps
    return graph


def layer(module: str) -> int:
    rest = module.removeprefix("retrieval_lab").removeprefix(".")
    top = rest.split(".")[0]
    return next(i for i, names in enumerate(LAYERS) if top in names)


def test_the_graph_is_read_from_the_source():
    # a known edge of each kind: relative, from a package, deferred inside a function
    graph = import_graph()
    assert "retrieval_lab.runs" in graph["retrieval_lab.metrics"]  # from .runs import Run, ranked
    assert "retrieval_lab.core.data" in graph["retrieval_lab.commands.score_runs"]  # inside run()
    assert "retrieval_lab.retrievers.bm25" in graph["retrieval_lab.retrievers.in_memory"]
    assert len(graph) >= 80


def test_no_import_cycle():
    graph = import_graph()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(module):] + [module]))
        if module in done:
            return
        for dep in sorted(graph[module]):
            visit(dep, path + [module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


def test_no_module_imports_a_higher_layer():
    graph = import_graph()
    every = {m: layer(m) for m in graph}  # every module has a layer: a new top-level module must be placed
    upward = [f"{m} ({every[m]}) imports {d} ({every[d]})" for m, deps in graph.items() for d in deps
              if every[d] > every[m]]
    assert not upward, "\n".join(upward)


def test_no_command_imports_another():
    # what several commands share sits in commands/arguments.py (cli.py's rule)
    graph = import_graph()
    shared = {"retrieval_lab.commands", "retrieval_lab.commands.arguments"}
    crossing = [f"{m} imports {d}" for m, deps in graph.items() if m.startswith("retrieval_lab.commands.")
                for d in deps if d.startswith("retrieval_lab.commands") and d not in shared]
    assert not crossing, crossing


def test_a_planted_cycle_and_an_upward_import_are_caught(monkeypatch):
    # the checks can fail: metrics importing evaluation is both
    real = import_graph()
    planted = {**real, "retrieval_lab.metrics": real["retrieval_lab.metrics"] | {"retrieval_lab.evaluation"}}
    assert "retrieval_lab.metrics" in real["retrieval_lab.evaluation"]  # so the planted edge closes a cycle
    monkeypatch.setattr(sys.modules[__name__], "import_graph", lambda: planted)
    for check in (test_no_import_cycle, test_no_module_imports_a_higher_layer):
        try:
            check()
        except AssertionError:
            continue
        raise AssertionError(f"{check.__name__} missed the planted edge")


def test_no_module_reaches_the_package_through_its_lazy_names():
    # ``from retrieval_lab import evaluate`` inside the package would run the API table during a stage;
    # tests/pipeline/test_dependencies.py counts the package root as inert on this condition
    graph = import_graph()
    through_root = sorted(m for m, deps in graph.items() if "retrieval_lab" in deps)
    assert through_root == [], through_root
