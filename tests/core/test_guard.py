"""The output guard, tested from the commands' own declarations (``PATHS`` in each command module).

For every command and every output option, an argument list is built from the command's parser and
declaration, its inputs (declared and derived: the params file, the base model, compare's per-query
files, report's result folders) are created, and the output is pointed at every hostile place: an
input, a place inside an input folder, a link to either, a folder holding a same-named file of the
user's, ``.``, ``..``, below a file. Each must be refused by the guard (exit 2, one line naming the
output option) with every byte in the working folder unchanged. A new command or a new output option
gets its cases without a line here; an option left undeclared fails :func:`test_every_option_is_declared`.
"""

from __future__ import annotations

import argparse
import importlib
import os
from pathlib import Path

import pytest
from command_runner import subcommand_parsers
from kind_samples import checkpoint_sample, hostile, make_samples

from retrieval_lab import cli
from retrieval_lab.core import guard, kinds
from retrieval_lab.core.errors import InputError

USER_TEXT = b"the user's own bytes\n"
EXTRA = {"compare": ["--runs", "bm25", "dense"]}  # optional words that bring derived inputs: compare's runs


SUBPARSERS = subcommand_parsers(cli.build_parser())


def _paths(command: str) -> guard.Paths:
    return importlib.import_module(f"retrieval_lab.commands.{cli.COMMANDS[command]}").PATHS


def _value(action: argparse.Action, kinds: dict[str, str], outputs: dict[str, str]) -> list[str]:
    """Command-line words for one option: a path under in/ or out/ for declared ones, a dummy otherwise."""
    name = action.dest
    if name in kinds:
        kind = kinds[name]
        paths = [f"in/{name}{i}" if kind != guard.FILE else f"in/{name}{i}.txt"
                 for i in range(2 if action.nargs in ("+", "*") else 1)]
        return paths
    if name in outputs:
        return [f"out/{name}.out" if outputs[name] == guard.FILE else f"out/{name}"]
    if action.type is int:
        return ["1"]
    if action.type is float:
        return ["0.5"]
    if name == "measures":
        return ["nDCG@10"]
    return ["x"]


def base_argv(command: str) -> list[str]:
    """A parseable argument list giving every declared path option (one of a mutually exclusive group)."""
    parser, paths = SUBPARSERS[command], _paths(command)
    kinds = {guard.dest(o): k for o, k in paths.inputs.items()}
    outputs = {guard.dest(o): k for o, k in paths.outputs.items()}
    groups = {id(a): g for g in parser._mutually_exclusive_groups for a in g._group_actions}
    taken, argv = set(), []
    for action in parser._actions:
        if action.dest in ("help", "params", "overrides") or action.nargs == 0:
            continue
        declared = action.dest in kinds or action.dest in outputs
        if not (declared or action.required):
            continue
        group = groups.get(id(action))
        if group is not None:
            if id(group) in taken:
                continue
            # a group's declared path option first
            choice = next((a for a in group._group_actions if a.dest in kinds or a.dest in outputs), action)
            if choice is not action:
                continue
            taken.add(id(group))
        words = _value(action, kinds, outputs)
        argv += [action.option_strings[0], *words] if action.option_strings else words
    return argv + EXTRA.get(command, [])


def _materialize(f: guard.Found) -> None:
    """Create every input: a file with content, a folder holding a dataset file."""
    for pairs in f.inputs.values():
        for path, kind in pairs:
            if kind == guard.FILE and not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(b"input " + str(path).encode() + b"\n")
            elif kind in (guard.FOLDER, guard.ROOT):
                path.mkdir(parents=True, exist_ok=True)
                if kind == guard.FOLDER and not any(path.iterdir()):
                    (path / "corpus.jsonl").write_bytes(b'{"_id": "d1", "text": "kept"}\n')


def _setup(command: str, argv: list[str] | None = None) -> tuple[list[str], guard.Found]:
    """In the working folder: params.yaml (every section at its default: an input of every stage command)
    and every input of the command's built arguments (or of ``argv``)."""
    Path("params.yaml").write_text("# every section at its default\n", encoding="utf-8")
    argv = base_argv(command) if argv is None else argv
    args = cli.build_parser(command).parse_args([command, *argv])
    f = guard.found(args._paths, args)
    _materialize(f)
    return argv, guard.found(args._paths, args)  # again: an input that is a folder now is one


def _cases() -> list[tuple[str, str]]:
    return [(command, option) for command in cli.COMMANDS for option in _paths(command).outputs]


def _hostile(f: guard.Found, option: str, kind: str, written: tuple[str, ...]) -> dict[str, object]:
    """Label -> the output's value, or a function that makes the place and returns it."""
    places: dict[str, object] = {".": ".", "..": ".."}
    for in_option, pairs in f.inputs.items():
        for i, (path, in_kind) in enumerate(pairs):
            tag = f"{in_option}[{i}]"
            places[f"is {tag}"] = str(path)

            def link(path=path, tag=tag):
                name = Path(f"alias-{tag.strip('-').replace('[', '').replace(']', '')}")
                name.symlink_to(path.resolve())
                return str(name)
            places[f"a link to {tag}"] = link
            if in_kind == guard.FOLDER:
                places[f"inside {tag}"] = str(path / "new-output")
                places[f"a file of {tag}"] = str(path / "corpus.jsonl")

                def through_link(path=path, tag=tag):
                    name = Path(f"dir-alias-{tag.strip('-').replace('[', '').replace(']', '')}")
                    name.symlink_to(path.resolve(), target_is_directory=True)
                    return str(name / "corpus.jsonl")
                places[f"a file of {tag} through a linked folder"] = through_link
            elif in_kind == guard.FILE:
                places[f"below the file {tag}"] = str(path / "sub")

    def user_folder():
        folder = Path("users")
        folder.mkdir()
        for name in (*written, "notes.md", Path(option).name):
            (folder / name).write_bytes(USER_TEXT)
        return str(folder)
    places["a folder of the user's files"] = user_folder

    def below_a_file():
        Path("plain.txt").write_bytes(USER_TEXT)
        return "plain.txt/out"
    places["below a file"] = below_a_file
    return places


def _snapshot(root: Path) -> dict[str, bytes | str]:
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = path.read_bytes()
        else:
            out[rel] = "folder"
    return out


def _all_cases():
    return [(command, option, _paths(command).outputs[option]) for command, option in _cases()]


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_every_option_is_declared(command):
    assert guard.undeclared(SUBPARSERS[command], _paths(command)) == []


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_the_built_arguments_pass_the_guard(command, tmp_path, monkeypatch):
    # the generated cases below mean something only if the same arguments with safe outputs pass
    monkeypatch.chdir(tmp_path)
    _argv, f = _setup(command)
    guard.check(f)


@pytest.mark.parametrize(("command", "option", "kind"), _all_cases())
def test_every_hostile_output_is_refused_and_no_input_changes(command, option, kind, tmp_path, monkeypatch,
                                                              capsys):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    argv, f = _setup(command)
    written = tuple(_paths(command).written.get(option, ()))
    labels = list(_hostile(f, option, kind, written))
    assert len(labels) >= 6
    tried = 0
    for label in labels:
        # each place in a fresh copy of the working folder: one case must not prepare the next
        case = tmp_path / f"case{tried}"
        case.mkdir()
        monkeypatch.chdir(case)
        argv, f = _setup(command)
        place = _hostile(f, option, kind, written)[label]
        value = place() if callable(place) else place
        before = _snapshot(case)
        words = list(argv)
        flag_words = [o for o in SUBPARSERS[command]._option_string_actions if guard.dest(o) == guard.dest(option)]
        at = next(i for i, w in enumerate(words) if w in flag_words)
        words[at + 1] = value
        code = cli.main([command, *words])
        err = capsys.readouterr().err
        assert code == 2, f"{command} {option} at {label} ({value}): exit {code}, {err}"
        assert err.count("\n") == 1 and err.startswith("error: "), err
        assert f"field '{option}'" in err, f"{label}: {err}"
        assert _snapshot(case) == before, f"{command} {option} at {label}: the working folder changed"
        tried += 1
    assert tried == len(labels)


def test_the_generated_cases_cover_every_output_option():
    # the declared outputs the issue names: if one disappears from PATHS, the guard stops seeing it
    cases = set(_cases())
    for expected in [("retrieve", "--output"), ("evaluate", "--metrics"), ("evaluate", "--reports"),
                     ("pool", "--output"), ("compare", "--output"), ("compare", "--markdown"),
                     ("check-resume", "--output"), ("report", "--output"), ("train", "--model-out"),
                     ("table", "--plot"), ("prepare", "--heldout")]:
        assert expected in cases


def test_an_output_inside_a_linked_dataset_folder_is_refused_by_its_real_path(tmp_path):
    col = tmp_path / "col"
    col.mkdir()
    (col / "queries.jsonl").write_text("{}\n")
    (tmp_path / "colalias").symlink_to(col)
    with pytest.raises(InputError, match="lies inside the input --dataset"):
        guard.check_paths({"--dataset": col}, files={"--output": tmp_path / "colalias" / "queries.jsonl"})


# ----------------------------------------------------------------------------- a file output replaces only its kind
# Every file output, declared (PATHS.outputs) or derived, gets five cases, each in a fresh working folder with the
# file found at the output: a file of its own kind (what a previous run wrote: the guard passes it) and four it
# must refuse in one line naming the option, with every byte unchanged: a note, a script, a file of another kind,
# a labelled pool. Arguments beyond the built ones: those that bring a derived output (train's checkpoint), and
# pool's other mode (--merge writes qrels, not a pool).
VARIANTS = {
    "train --checkpoint": ("train", "--checkpoint", ["--checkpoint", "out/state.pt"]),
    "judge --provenance": ("judge", "--provenance", []),  # derived from --export
    "pool --merge": ("pool", "--output", ["--merge", "in/labelled.txt", "--output", "out/output.out"]),
}


def _file_cases() -> dict[str, tuple[str, str, list[str]]]:
    cases = {f"{command} {option}": (command, option, []) for command in cli.COMMANDS
             for option, kind in _paths(command).outputs.items() if kind == guard.FILE}
    return cases | VARIANTS


FILE_CASES = _file_cases()


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    return make_samples(tmp_path_factory.mktemp("samples"))


def _kind_argv(command: str, extra: list[str]) -> list[str] | None:
    if command == "pool" and extra[:1] == ["--merge"]:
        return extra
    return base_argv(command) + extra if extra else None


def test_every_file_output_has_its_cases(tmp_path, monkeypatch):
    # the derived file outputs (none in PATHS.outputs' keys alone) are in VARIANTS: a new one fails here
    monkeypatch.chdir(tmp_path)
    found = set()
    for command, option, extra in FILE_CASES.values():
        _argv, f = _setup(command, _kind_argv(command, extra))
        found |= {(command, o) for o, (_p, k) in f.outputs.items() if k == guard.FILE}
        assert f.kinds.keys() >= {o for o, (_p, k) in f.outputs.items() if k == guard.FILE}
    assert found == {(c, o) for c, o, _ in FILE_CASES.values()}
    assert len(FILE_CASES) >= 22


@pytest.mark.parametrize("case", list(FILE_CASES))
def test_a_file_output_replaces_only_a_file_of_its_own_kind(case, samples, tmp_path, monkeypatch, capsys):
    command, option, extra = FILE_CASES[case]
    monkeypatch.chdir(tmp_path)
    _argv, f = _setup(command, _kind_argv(command, extra))
    kind = f.kinds[option]
    own = checkpoint_sample(tmp_path / "state.pt") if kind == kinds.CHECKPOINT else samples[kind]
    places = {"its own kind": (own.read_bytes(), None), **hostile(samples, kind)}
    for i, (label, (content, words)) in enumerate(places.items()):
        work = tmp_path / f"case{i}"
        work.mkdir()
        monkeypatch.chdir(work)
        argv, f = _setup(command, _kind_argv(command, extra))
        path = f.outputs[option][0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        if words is None:  # what a previous run of this command wrote there: the guard lets it be replaced
            args = cli.build_parser(command).parse_args([command, *argv])
            guard.check(guard.found(args._paths, args))
            continue
        before = _snapshot(work)
        code = cli.main([command, *argv])
        err = capsys.readouterr().err
        assert code == 2, f"{case} over {label}: exit {code}, {err}"
        assert err.count("\n") == 1 and err.startswith(f"error: {path}") and f"field '{option}'" in err, err
        assert words in err and f"choose another {option}" in err, f"{case} over {label}: {err}"
        assert _snapshot(work) == before, f"{case} over {label}: the working folder changed"
