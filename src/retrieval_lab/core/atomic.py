"""Atomic outputs: write to a temporary sibling, rename into place on success.

DVC caches whatever sits at an output path when a stage ends; a stage killed
midway must therefore leave nothing there, not half a file.

An output replaces only what a stage wrote: a file output replaces a file (or a
link, never what it points to), a folder output replaces an empty folder or one
holding :data:`MARKER`, which every folder output carries. Anything else, and an
output that is, or contains, one of the command's inputs, is refused with an
:class:`InputError` before any work (:func:`check_outputs`) and again at the rename.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from .errors import InputError

HOLD_ENV = "RETRIEVAL_LAB_HOLD_BEFORE_RENAME"  # seconds to wait, output complete, before renaming
MARKER = ".retrieval-lab-output"  # inside every folder output: this folder may be replaced whole
MARKER_TEXT = "retrieval-lab wrote this folder and replaces it whole when the stage runs again.\n"

PathArg = str | os.PathLike


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _umask() -> int:
    """The process umask, read without setting it where Linux allows (os.umask is process-wide)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _absolute(path: PathArg) -> Path:
    """Absolute, its folder's links resolved, the last part kept (a link at an output is replaced, not
    followed)."""
    path = Path(os.path.abspath(path))
    return path.parent.resolve() / path.name if path.name else path


def _within(path: Path, folder: Path) -> bool:
    """``path`` is ``folder`` or lies below it (both absolute and resolved)."""
    return path == folder or folder in path.parents


def _not_working_folder(target: PathArg, field: str | None) -> None:
    if _within(Path(os.getcwd()).resolve(), _absolute(target)):
        raise InputError("is the working folder or one above it; refusing to replace it", str(target),
                         field=field)


def check_replaceable(target: PathArg, is_dir: bool = False, field: str | None = None) -> None:
    """Raise InputError unless an output at ``target`` would replace only what a stage wrote there.

    A file output may replace nothing, a regular file or a link; a folder output nothing, a link,
    an empty folder or a folder holding :data:`MARKER`. Never the working folder or one above it.
    """
    where = str(target)
    path = _absolute(target)
    _not_working_folder(target, field)
    for parent in path.parents:
        if _exists(parent) and not parent.is_dir():
            raise InputError(f"its parent {parent} is a file, not a folder", where, field=field)
    if not _exists(path) or path.is_symlink():  # replacing a link keeps what it points to
        return
    if is_dir:
        if not path.is_dir():
            raise InputError("is a file, not a folder retrieval-lab wrote; refusing to replace it",
                             where, field=field)
        if (path / MARKER).is_file() or not any(path.iterdir()):
            return
        raise InputError(f"is a folder holding files retrieval-lab did not write (no {MARKER}); "
                         "refusing to replace it", where, field=field)
    if path.is_dir():
        raise InputError("is a folder, and this output is a file; refusing to replace it", where, field=field)
    if not path.is_file():
        raise InputError("is not a regular file (a device, pipe or socket); refusing to replace it",
                         where, field=field)


def check_outputs(inputs: Mapping[str, PathArg | list[PathArg] | None],
                  files: Mapping[str, PathArg | None] | None = None,
                  folders: Mapping[str, PathArg | None] | None = None,
                  into: Mapping[str, PathArg | None] | None = None,
                  written: Mapping[str, Iterable[str]] | None = None) -> None:
    """Refuse, before any work, outputs that would destroy an input or something no stage wrote.

    Each mapping goes from a command-line flag to its path (``None``: not given; an input may have a
    list of paths). ``files`` and ``folders`` are replaced whole (:func:`atomic_path`); ``into`` are
    folders that files are written into, and ``written`` names, per ``into`` flag, the files written
    there: each is checked as a file output, so that none replaces an input, another output or a folder.
    An output may not be an input, contain one, or overlap another output; files and folders must
    pass :func:`check_replaceable`.
    """
    def given(mapping):
        return {flag: Path(path) for flag, path in (mapping or {}).items() if path is not None}

    files, folders, into = given(files), given(folders), given(into)
    files.update({f"{flag}/{name}": into[flag] / name
                  for flag, names in (written or {}).items() if flag in into for name in names})
    # inputs followed through links; an output's own last part not (replacing a link keeps its target)
    ins = [(flag, Path(p), Path(p).resolve()) for flag, paths in inputs.items() if paths is not None
           for p in (paths if isinstance(paths, list) else [paths])]
    resolved = {flag: _absolute(path) for flag, path in {**files, **folders, **into}.items()}
    for flag, path in {**files, **folders}.items():
        _not_working_folder(path, flag)
    for flag, path in {**files, **folders}.items():
        for in_flag, in_path, real in ins:
            if _within(real, resolved[flag]):
                what = "is" if real == resolved[flag] else "contains"
                raise InputError(f"{what} the input {in_flag} ({in_path}); an output never replaces an input",
                                 str(path), field=flag)
    for flag, path in into.items():
        for in_flag, in_path, real in ins:
            if real == resolved[flag]:
                raise InputError(f"is the input {in_flag} ({in_path}); outputs are never written into an "
                                 "input", str(path), field=flag)
    outputs = [*files, *folders, *into]
    for i, flag in enumerate(outputs):
        for other in outputs[i + 1:]:
            a, b = resolved[flag], resolved[other]
            if a == b or (flag in folders and _within(b, a)) or (other in folders and _within(a, b)):
                raise InputError(f"overlaps the output {other} ({b}); each output needs its own path",
                                 str({**files, **folders, **into}[flag]), field=flag)
    for flag, path in files.items():
        check_replaceable(path, False, flag)
    for flag, path in folders.items():
        check_replaceable(path, True, flag)
    for flag, path in into.items():
        if path.exists() and not path.is_dir():
            raise InputError("is a file; expected a folder to write into", str(path), field=flag)


def _sweep(target: Path, kind: str) -> None:
    """Remove ``.NAME.<kind>-*`` siblings: what a run killed by SIGKILL left (no finally block ran)."""
    prefix = f".{target.name}.{kind}-"
    for stale in [p for p in target.parent.iterdir() if p.name.startswith(prefix)]:
        _remove(stale)


def _name_target(exc: OSError, target: Path, tmp: Path | None) -> None:
    """Make an OSError about a temporary sibling (or about no file) name the output the user asked for."""
    if exc.errno is None:  # OSError("message"): no file to name, and str() would turn into "[Errno None]"
        return
    ours = f"{target.parent / ('.' + target.name)}."

    def named(filename):
        name = None if filename is None else os.fsdecode(filename)
        if name is None:
            return None
        if tmp is not None and (name == str(tmp) or name.startswith(str(tmp) + os.sep)):
            return str(target) + name[len(str(tmp)):]  # a file inside a folder output keeps its own name
        return str(target) if name.startswith(ours) else name

    first, second = named(exc.filename), named(exc.filename2)
    exc.filename = first or second or str(target)
    exc.filename2 = None if second in (None, exc.filename) else second


def _replace(tmp: Path, target: Path) -> None:
    if not _exists(target):
        os.replace(tmp, target)
        return
    # os.replace cannot replace a non-empty folder: move the old output aside first.
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    _remove(old)
    os.replace(target, old)
    try:
        os.replace(tmp, target)
    except BaseException:
        os.replace(old, target)  # the old output back in place, as if nothing happened
        raise
    _remove(old)


@contextlib.contextmanager
def atomic_path(target: PathArg, is_dir: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to ``target``; rename it onto ``target`` if the block succeeds.

    Refuses (InputError) to replace anything :func:`check_replaceable` refuses; a folder output gets
    :data:`MARKER`. The output's mode follows the umask. An OSError names ``target``, never the
    temporary. Temporaries and set-aside old outputs of a killed run are removed.
    """
    target = Path(target)
    check_replaceable(target, is_dir)
    tmp = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _sweep(target, "tmp")
        prefix = f".{target.name}.tmp-"
        if is_dir:
            tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
        else:
            fd, name = tempfile.mkstemp(prefix=prefix, dir=target.parent)
            os.close(fd)
            tmp = Path(name)
        yield tmp
        if os.environ.get(HOLD_ENV):  # fault injection for the crash test: a window to SIGKILL in
            time.sleep(float(os.environ[HOLD_ENV]))
        if is_dir:
            (tmp / MARKER).write_text(MARKER_TEXT, encoding="utf-8")
        # mkstemp/mkdtemp create owner-only; give what open()/mkdir would under this umask
        os.chmod(tmp, (0o777 if is_dir else 0o666) & ~_umask())
        check_replaceable(target, is_dir)  # something may have appeared there while the stage ran
        _replace(tmp, target)
        _sweep(target, "old")  # only now: until a new output stands, the set-aside one is the last copy
    except BaseException as exc:
        if tmp is not None:
            _remove(tmp)
        if isinstance(exc, OSError):
            _name_target(exc, target, tmp)
        raise


def write_text(target: PathArg, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(target: PathArg, obj, indent: int = 2) -> None:
    write_text(target, json.dumps(obj, indent=indent, sort_keys=False, ensure_ascii=False) + "\n")
