"""One output guard for every command: each declares its paths once (:class:`Paths`), the CLI checks them
before the command runs, so nothing is written before every output has been found safe.

The rules, on real paths (links followed, the output's own last part both kept and followed):

* an output never is, contains or lies inside an input file or an input folder (a dataset, an
  embeddings folder, a model); a *root* input (``--repo``) may hold outputs, never be or lie in one;
* a file output replaces only a regular file or a link, and only one of the output's own kind
  (:mod:`core.kinds`: a run replaces a run, a pool an unlabelled pool; never a note, a script, another
  kind or a labelled pool); a folder output (replaced whole) only an
  empty folder or one whose :data:`atomic.MARKER` lists every file it holds; an *into* folder
  (files written into it, one by one) only the files its :data:`atomic.WRITTEN` lists;
* no two outputs overlap; no output is the working folder or one above it; no parent is a file.

Each refusal is one line naming the output (its flag) and the path it collides with.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .atomic import _absolute, _exists, _not_working_folder, _within, check_into, check_replaceable
from .errors import InputError
from .kinds import BEIR_FILES, CORPUS, QRELS, QUERIES, RUN, beir_folder, check_kind, recognised  # noqa: F401

FILE, FOLDER, ROOT, INTO = "file", "folder", "root", "into"
INPUT_KINDS, OUTPUT_KINDS = (FILE, FOLDER, ROOT), (FILE, FOLDER, INTO)


@dataclass(frozen=True)
class Found:
    """The paths of one invocation: flag -> [(path, kind)] for inputs, flag -> (path, kind) for outputs."""

    inputs: dict[str, list[tuple[Path, str]]] = field(default_factory=dict)
    outputs: dict[str, tuple[Path, str]] = field(default_factory=dict)
    written: dict[str, tuple[str, ...]] = field(default_factory=dict)  # INTO flag -> the names written there
    kinds: dict[str, str] = field(default_factory=dict)  # FILE output flag -> its kind (core.kinds)


@dataclass(frozen=True)
class Paths:
    """A command's declared paths: which options are inputs and outputs, and of what kind.

    ``inputs``/``outputs``: option (``--dataset``; a positional by its dest, e.g. ``qrels``) -> kind.
    ``written``: per INTO output, the names written there. ``kinds``: per FILE output, its kind
    (:mod:`core.kinds`), or a function of the arguments giving it (``pool``: a pool, or qrels with
    ``--merge``); an existing file of another kind is never replaced. ``words``: string options that are not paths
    (the generated test checks that every option is declared one way or the other). ``derive``: paths
    that follow from the arguments rather than sit in one (a default checkpoint, the base model of
    params.yaml, the per-query files a reports root offers).
    """

    inputs: Mapping[str, str] = field(default_factory=dict)
    outputs: Mapping[str, str] = field(default_factory=dict)
    written: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    words: tuple[str, ...] = ()
    derive: Callable[[argparse.Namespace], Found] | None = None
    kinds: Mapping[str, str | Callable[[argparse.Namespace], str]] = field(default_factory=dict)

    def __post_init__(self):
        assert all(k in INPUT_KINDS for k in self.inputs.values()), self.inputs
        assert all(k in OUTPUT_KINDS for k in self.outputs.values()), self.outputs
        assert set(self.written) <= {f for f, k in self.outputs.items() if k == INTO}, self.written
        # every file output says what it writes: the guard replaces only a file of that kind
        assert set(self.kinds) == {f for f, k in self.outputs.items() if k == FILE}, (self.kinds, self.outputs)


def dest(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def _paths(value) -> list[Path]:
    if value is None:
        return []
    return [Path(v) for v in (value if isinstance(value, (list, tuple)) else [value])]


def found(paths: Paths, args: argparse.Namespace) -> Found:
    """The paths ``args`` gives for ``paths``' options, the params file and what ``derive`` adds."""
    from .params_file import DEFAULT_PARAMS

    out = Found(written=dict(paths.written))
    for option, kind in paths.inputs.items():
        given = _paths(getattr(args, dest(option), None))
        if given:  # an input that is a folder on disk is a folder input, whatever was expected there
            out.inputs[option] = [(p, FOLDER if kind == FILE and p.is_dir() else kind) for p in given]
    if hasattr(args, "params"):
        params = Path(args.params or DEFAULT_PARAMS)
        if args.params or params.exists():
            out.inputs["--params"] = [(params, FILE)]
    for option, kind in paths.outputs.items():
        value = getattr(args, dest(option), None)
        if value is not None:
            out.outputs[option] = (Path(value), kind)
            if kind == FILE:
                file_kind = paths.kinds[option]
                out.kinds[option] = file_kind(args) if callable(file_kind) else file_kind
    if paths.derive is not None:
        extra = paths.derive(args)
        for option, pairs in extra.inputs.items():
            out.inputs.setdefault(option, []).extend((p, FOLDER if k == FILE and p.is_dir() else k)
                                                     for p, k in pairs)
        out.outputs.update(extra.outputs)
        out.written.update(extra.written)
        out.kinds.update(extra.kinds)
    return out


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _forms(path: Path) -> list[Path]:
    """An output's places: its own last part kept (a link there is replaced) and followed (what it reaches)."""
    kept, real = _absolute(path), _real(path)
    return [kept] if kept == real else [kept, real]


def check(f: Found) -> None:
    """Raise one InputError for the first output :mod:`guard`'s rules refuse; nothing is written."""
    outputs = dict(f.outputs)
    # every file an INTO folder receives is a file output of its own: it may not be an input or another output
    files = {option: path for option, (path, kind) in outputs.items() if kind == FILE}
    for option, names in f.written.items():
        if option in outputs:
            files.update({f"{option}/{name}": outputs[option][0] / name for name in names})
    for option, (path, kind) in outputs.items():
        if kind != INTO:
            _not_working_folder(path, option)
        for parent in _absolute(path).parents:
            if _exists(parent) and not parent.is_dir():
                raise InputError(f"its parent {parent} is a file, not a folder", str(path), field=option)
    everything = {**{o: (p, k) for o, (p, k) in outputs.items()}, **{o: (p, FILE) for o, p in files.items()}}
    for option, (path, out_kind) in everything.items():
        for in_option, pairs in f.inputs.items():
            for in_path, kind in pairs:
                _against_input(option, path, in_option, in_path, kind, out_kind)
    _overlaps({o: (p, k) for o, (p, k) in outputs.items()} | {o: (p, FILE) for o, p in files.items()
                                                              if o not in outputs})
    for option, (path, kind) in outputs.items():
        if kind == INTO:
            if _exists(path) and not path.is_dir():
                raise InputError("is a file; expected a folder to write into", str(path), field=option)
            check_into(path, f.written.get(option, ()), option)
        else:
            check_replaceable(path, kind == FOLDER, option)
            if kind == FILE:
                check_kind(path, f.kinds.get(option), option)
    for option, path in files.items():
        if option not in outputs:
            check_replaceable(path, False, option.split("/", 1)[0])


def _against_input(option: str, path: Path, in_option: str, in_path: Path, kind: str,
                   out_kind: str = FILE) -> None:
    real = _real(in_path)
    for out in _forms(path):
        what = None
        if out == real:
            what = "is"
        elif _within(real, out) and not (out_kind == INTO and kind == FILE):
            # an INTO folder replaces only the files it writes (each checked as a file output of its own),
            # so an input file beside them (evaluate reads retrieve's timing.json there) is safe
            what = "contains"
        elif kind != ROOT and _within(out, real):
            what = "lies inside"
        if what:
            raise InputError(f"{what} the input {in_option} ({in_path}); an output never replaces, holds or "
                             "lies inside an input", str(path), field=option.split("/", 1)[0])


def _overlaps(outputs: Mapping[str, tuple[Path, str]]) -> None:
    flags = list(outputs)
    places = {o: _forms(p) for o, (p, _) in outputs.items()}
    for i, a in enumerate(flags):
        for b in flags[i + 1:]:
            if a.split("/", 1)[0] == b.split("/", 1)[0]:
                continue  # an INTO folder and the files written into it
            for pa in places[a]:
                for pb in places[b]:
                    if pa == pb or (outputs[a][1] == FOLDER and _within(pb, pa)) or \
                            (outputs[b][1] == FOLDER and _within(pa, pb)):
                        raise InputError(f"overlaps the output {b.split('/', 1)[0]} ({outputs[b][0]}); each "
                                         "output needs its own path", str(outputs[a][0]),
                                         field=a.split("/", 1)[0])


def base_model_input(args: argparse.Namespace) -> Found:
    """The model params.yaml's ``train.base`` names under ``dense.models``: read when no model is given."""
    from .params import base_model
    from .params_cli import params_of

    spec, where = base_model(params_of(args))
    return Found(inputs={where: [(Path(spec), FILE)]})


def undeclared(parser: argparse.ArgumentParser, paths: Paths) -> list[str]:
    """The options of ``parser`` taking a free string that ``paths`` declares neither a path nor a word."""
    known = {dest(o) for o in [*paths.inputs, *paths.outputs, *paths.words]} | {"help", "params", "overrides"}
    out = []
    for action in parser._actions:
        if action.dest in known or action.type is not None or action.nargs == 0 or action.choices:
            continue
        out.append(action.option_strings[0] if action.option_strings else action.dest)
    return out


def guard(paths: Paths, args: argparse.Namespace) -> None:
    """Check ``args`` against ``paths`` (what ``cli.main`` does before every command)."""
    check(found(paths, args))


def check_paths(inputs: Mapping[str, Iterable | str | os.PathLike | None], *, files=None, folders=None, into=None,
                written=None, kinds: Mapping[str, str] | None = None,
                file_kinds: Mapping[str, str] | None = None) -> None:
    """The guard for code that is not a command (scripts): plain mappings of option -> path(s).

    Inputs are files, or folders where they are folders on disk, unless ``kinds`` says otherwise.
    ``file_kinds``: each file output's kind (:mod:`core.kinds`); one without replaces no existing file.
    """
    f = Found(written={k: tuple(v) for k, v in (written or {}).items()}, kinds=dict(file_kinds or {}))
    for option, value in inputs.items():
        pairs = []
        for p in _paths(value):
            kind = (kinds or {}).get(option) or (FOLDER if p.is_dir() else FILE)
            pairs.append((p, kind))
        if pairs:
            f.inputs[option] = pairs
    for mapping, kind in ((files, FILE), (folders, FOLDER), (into, INTO)):
        for option, value in (mapping or {}).items():
            if value is not None:
                f.outputs[option] = (Path(value), kind)
    check(f)


# ----------------------------------------------------------------------------- the library's own writers
# A command declares its inputs (:class:`Paths`); ``rl.write_run(path, run)`` called from a notebook has none to
# declare. What the library can know is what its readers take as an input: a BEIR folder (a folder holding
# corpus.jsonl and queries.jsonl, gzipped or not), its files and its qrels, and the kind of an existing file
# (:mod:`core.kinds`). Each writer checks its path against that before writing: :func:`library_output`.


def library_output(path, writer: str, kind: str | None = None, is_dir: bool = False) -> None:
    """Refuse (InputError, nothing written) an output of the library writer ``writer`` that would lie inside a
    BEIR folder, or replace what :func:`atomic.check_replaceable` refuses, or (a file output of ``kind``) an
    existing file of another kind or of none (:func:`kinds.check_kind`: a run replaces only a run, ...).

    Writes inside one of the library's own temporary folders (a folder output being built) are the
    writer's own and pass.
    """
    from .atomic import _absolute, _ours, check_replaceable

    target = _absolute(path)
    if any(_ours(parent) for parent in target.parents):
        return  # a part of a folder output under construction: the writer of the whole was checked
    for parent in target.parents:
        if beir_folder(parent):
            raise InputError(f"lies inside the BEIR folder {parent} (it holds {' and '.join(BEIR_FILES)}); "
                             f"{writer} never writes into a dataset", str(path), field="path")
    check_replaceable(path, is_dir, "path")
    if not is_dir:
        check_kind(path, kind, "path", writer)
