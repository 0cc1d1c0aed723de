"""dvc.yaml declares every module a stage runs: an edit to one can never leave a stale result.

Each stage's code is derived from its ``cmd``: the console-script subcommand names its
module under ``retrieval_lab.commands``; from there every ``import`` inside the package,
at module level or inside a function, is followed transitively, plus the module a
registry loads by name (``--retriever bm25`` -> ``retrievers/bm25.py``), plus the package
data those modules read (a string constant naming a file beside the module, as
``generate.CATALOGUE`` names ``generate_catalogue.yaml``). A file is covered when a
dependency is the file itself or a folder holding it. Package
``__init__.py`` files that hold nothing but a docstring and constants cannot change an
output and are not required. ``cli.py`` (the dispatcher: parse, run, map errors to an
exit code) is not a stage's code either.
"""

from __future__ import annotations

import ast
import functools
import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml
from beir_fixtures import REPO

from retrieval_lab import fusion, retrievers
from retrieval_lab.cli import COMMANDS

SRC = REPO / "src"
PACKAGE = "retrieval_lab"
# flag of a subcommand -> the registry that turns its value into the modules it loads (a retriever's own, and the
# one that runs it in shards on Dask: retrievers.SHARDED)
DISPATCH = {("retrieve", "--retriever"): retrievers.modules_of, ("index", "--retriever"): retrievers.modules_of,
            ("fuse", "--method"): lambda name: [fusion.module_of(name)]}


@functools.cache  # each module parsed once for all ~40 stages
def module_file(name: str) -> Path | None:
    path = SRC.joinpath(*name.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


@functools.cache  # each module parsed once for all ~40 stages
def _imports(name: str) -> set[str]:
    """Modules of the package that ``name`` imports anywhere in its source."""
    path = module_file(name)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from . import stats`
    return {m for m in found if m.split(".")[0] == PACKAGE and module_file(m) is not None}


@functools.cache  # each module parsed once for all ~40 stages
def _data_files(name: str) -> set[Path]:
    """Package data ``name`` reads: string constants that name a non-Python file beside it."""
    path = module_file(name)
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and re.fullmatch(r"[\w-]+(/[\w-]+)*\.\w+", node.value) and not node.value.endswith(".py")
                and (path.parent / node.value).is_file()):
            found.add(path.parent / node.value)
    return found


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_closure(roots: list[str]) -> set[str]:
    """Every package module that importing ``roots`` executes (parent packages included)."""
    seen: set[str] = set()
    todo = [m for root in roots for m in [root, *_parents(root)]]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            for imported in _imports(name):
                todo.extend([imported, *_parents(imported)])
    return seen


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True


@functools.cache  # each module parsed once for all ~40 stages
def _inert(path: Path) -> bool:
    """A package __init__ with only a docstring, future imports and literal assignments, or the package
    root's PEP 562 table of lazy names (``import importlib``, ``__getattr__``, ``__dir__``): no stage
    reaches a module through that table, since no module imports the package root
    (tests/test_import_structure.py), so it cannot change an output."""
    if path.name != "__init__.py":
        return False
    root = path.parent.name == PACKAGE
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if isinstance(node, ast.Assign) and (isinstance(node.value, ast.Constant) or root and _literal(node.value)):
            continue
        if root and isinstance(node, ast.Import) and [a.name for a in node.names] == ["importlib"]:
            continue
        if root and isinstance(node, ast.FunctionDef) and node.name in ("__getattr__", "__dir__"):
            continue
        return False
    return True


def stage_code(cmd: str) -> set[str]:
    """Repository-relative files of the modules a stage's command runs."""
    argv = shlex.split(cmd)
    assert argv[0] == "retrieval-lab", f"not a retrieval-lab command: {cmd}"
    command = argv[1]
    roots = [f"{PACKAGE}.commands.{COMMANDS[command]}"]
    for (name, flag), module_of in DISPATCH.items():
        if command == name and flag in argv:
            roots.extend(module_of(argv[argv.index(flag) + 1]))
    modules = import_closure(roots)
    files = {module_file(m) for m in modules if not _inert(module_file(m))}
    files |= {f for m in modules for f in _data_files(m)}
    return {str(f.relative_to(REPO)) for f in files}


def resolved_stages(root: Path) -> dict[str, tuple[str, list[str]]]:
    """stage name -> (cmd, dependency paths), with vars and foreach resolved by DVC itself."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        return {stage.name: (stage.cmd, [str(dep.def_path) for dep in stage.deps])
                for stage in repo.index.stages}


def uncovered(root: Path) -> list[str]:
    """'stage: module' for every module a stage runs that its dependencies do not cover."""
    missing = []
    for name, (cmd, deps) in sorted(resolved_stages(root).items()):
        for module in sorted(stage_code(cmd)):
            if not any(module == dep or module.startswith(dep.rstrip("/") + "/") for dep in deps):
                missing.append(f"{name}: {module}")
    return missing


def test_every_stage_declares_the_code_it_runs():
    assert uncovered(REPO) == []


def test_dvc_lock_holds_exactly_the_stages_of_dvc_yaml():
    """DVC never removes the lock entry of a stage renamed or dropped from dvc.yaml: left there, it reads as a
    result of this pipeline (13 such entries, of stages renamed long ago, were in the committed lock)."""
    locked = set(yaml.safe_load((REPO / "dvc.lock").read_text())["stages"])
    stages = set(resolved_stages(REPO))
    assert stages, "DVC resolved no stage: nothing to compare the lock with"
    assert (sorted(locked - stages), sorted(stages - locked)) == ([], [])


def test_the_closure_follows_function_level_imports_and_registries():
    # retrieve imports retrievers/__init__ at module level; bm25 is loaded by name and imports
    # the tokenizer, which no retriever lists unless the registry is followed
    code = stage_code("retrieval-lab retrieve --retriever bm25 --dataset d --output o")
    assert {"src/retrieval_lab/retrievers/bm25.py", "src/retrieval_lab/tokenizer.py",
            "src/retrieval_lab/runs.py", "src/retrieval_lab/core/data.py"} <= code
    assert "src/retrieval_lab/retrievers/dense.py" not in code
    # the module that runs bm25 in shards, loaded by name too (retrievers.SHARDED), and what it imports
    assert {"src/retrieval_lab/retrievers/bm25_sharded.py", "src/retrieval_lab/core/cluster.py"} <= code
    assert "src/retrieval_lab/retrievers/bm25_sharded.py" not in stage_code("retrieval-lab retrieve --retriever lsa "
                                                                             "--dataset d --output o")
    # the dense retriever imports the encoder inside a function
    assert "src/retrieval_lab/encoder.py" in stage_code("retrieval-lab retrieve --retriever dense --output o")
    assert "src/retrieval_lab/fusion/rrf.py" in stage_code("retrieval-lab fuse --method rrf --runs a b --output o")


def test_the_package_data_a_stage_reads_is_its_code():
    # generate.py reads its catalogue through importlib.resources, not an import
    code = stage_code("retrieval-lab generate --output o")
    assert {"src/retrieval_lab/generate.py", "src/retrieval_lab/generate_catalogue.yaml"} <= code
    assert not any(f.endswith(".yaml") for f in stage_code("retrieval-lab prepare --raw r --output o"))


@pytest.fixture
def pipeline_copy(tmp_path) -> Path:
    """dvc.yaml and params.yaml in a scratch DVC project (no git), enough to resolve stages."""
    from dvc.repo import Repo

    Repo.init(str(tmp_path), no_scm=True).close()
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


def test_a_removed_dependency_is_named(pipeline_copy):
    path = pipeline_copy / "dvc.yaml"
    pipeline = yaml.safe_load(path.read_text(encoding="utf-8"))
    pipeline["stages"]["evaluate"]["do"]["deps"].remove("src/retrieval_lab/runs.py")
    path.write_text(yaml.safe_dump(pipeline, sort_keys=False), encoding="utf-8")
    missing = uncovered(pipeline_copy)
    assert "evaluate@bm25: src/retrieval_lab/runs.py" in missing
    assert all(line.endswith("src/retrieval_lab/runs.py") and line.startswith("evaluate@") for line in missing)
    pipeline["stages"]["generate"]["deps"].remove("src/retrieval_lab/generate_catalogue.yaml")
    path.write_text(yaml.safe_dump(pipeline, sort_keys=False), encoding="utf-8")
    assert "generate: src/retrieval_lab/generate_catalogue.yaml" in uncovered(pipeline_copy)


def test_mine_source_chooses_the_run_that_is_mined(pipeline_copy):
    params = pipeline_copy / "params.yaml"
    stages = resolved_stages(pipeline_copy)
    assert yaml.safe_load(params.read_text(encoding="utf-8"))["mine"]["source"] == "dense"
    assert "--run runs/support/dense.trec" in stages["mine@hard"][0]
    data = yaml.safe_load(params.read_text(encoding="utf-8"))
    data["mine"]["source"] = "bm25"
    params.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    # the value reaches the command through dvc.yaml's names block, checked and written by `names` (issue 52)
    assert resolved_stages(pipeline_copy)["mine@random"][0].count("runs/support/dense.trec") == 1
    from retrieval_lab import cli

    assert cli.main(["names", "--dvc-yaml", str(pipeline_copy / "dvc.yaml"), "--params", str(params)]) == 0
    cmd, deps = resolved_stages(pipeline_copy)["mine@random"]
    assert "--run runs/support/bm25.trec" in cmd and "runs/support/bm25.trec" in deps
    assert not any("dense" in dep for dep in deps)


def test_the_train_stage_declares_every_train_param():
    """Every ``train.*`` field reaches training (the fingerprint holds them all): each one is a param of the
    stage, or changing it would leave a stale model (train.validate_candidates and train.backend once were not)."""
    import dataclasses

    from retrieval_lab.core.params import TrainParams

    declared = set(yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["train"]["do"]["params"])
    fields = {f"train.{f.name}" for f in dataclasses.fields(TrainParams) if f.name != "variants"}
    assert sorted(fields - declared) == [] and "train.variants.${key}" in declared
