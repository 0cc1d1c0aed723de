"""Atomic outputs: write to a temporary sibling, rename into place on success.

DVC caches whatever sits at an output path when a stage ends; a stage killed
midway must therefore leave nothing there, not half a file.

An output replaces only what a stage wrote: a file output replaces a file (or a
link, never what it points to), a folder output replaces an empty folder or one
holding :data:`MARKER`, which every folder output carries. Anything else, and an
output that is, or contains, one of the command's inputs, is refused with an
:class:`InputError` before any work (:func:`core.guard.check_paths`) and again at the rename.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from .errors import InputError
from .kinds import check_kind

HOLD_ENV = "RETRIEVAL_LAB_HOLD_BEFORE_RENAME"  # seconds to wait, output complete, before renaming
HOLD_BETWEEN_ENV = "RETRIEVAL_LAB_HOLD_BETWEEN_RENAMES"  # seconds to wait after a set's first rename (crash tests)
MARKER = ".retrieval-lab-output"  # inside every folder output: what retrieval-lab wrote there (its manifest)
MARKER_TEXT = "retrieval-lab wrote this folder and replaces it whole when the stage runs again.\n"
MANIFEST_HEAD = "files:\n"  # after MARKER_TEXT: one relative path a line, every file the folder output holds
WRITTEN = ".retrieval-lab-written"  # inside a folder files are written into: the names retrieval-lab wrote
WRITTEN_TEXT = "retrieval-lab wrote the files below into this folder and replaces only them.\n"
# in the folder of a set of outputs replaced together (atomic_set), from the first rename to the last: each line
# "target<TAB>temporary", relative to that folder. Left behind by a run killed midway, it marks the set as
# half-replaced, and the next one completes it before anything else (finish_set)
REPLACING = ".retrieval-lab-replacing"
REPLACING_TEXT = "retrieval-lab was replacing the files below together; the next run completes the set.\n"
# temporaries and set-aside old outputs: a folder of this name holding TEMPORARY with TEMPORARY_TEXT; the
# sweep removes nothing else (a user's ``.out.trec.tmp-backup`` is not ours)
TEMPORARY = ".retrieval-lab-temporary"
TEMPORARY_TEXT = "retrieval-lab: a temporary output or a set-aside old one; removed by the next run.\n"
TMP_TAG, OLD_TAG = "tmp-retrieval-lab-", "old-retrieval-lab-"

PathArg = str | os.PathLike
REPLACED: list[str] = []  # outputs renamed into place by this process, in order (the CLI's error names them)
SYSTEM_FOLDERS = (Path("/dev"), Path("/proc"), Path("/sys"))  # never an output, whatever links lead there


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
    for system in SYSTEM_FOLDERS:  # /dev/stdout is a link there: replacing it would break the machine's stdout
        if _within(path, system) or _within(Path(os.path.realpath(path)), system):
            raise InputError(f"lies in {system}, the system's device and process files; refusing to replace it",
                             where, field=field)
    for parent in path.parents:
        if _exists(parent) and not parent.is_dir():
            raise InputError(f"its parent {parent} is a file, not a folder", where, field=field)
    if path.is_symlink():  # replacing a link keeps what it points to: a link to a file, a folder or nothing
        reached = Path(os.path.realpath(path))
        if _exists(reached) and not (reached.is_file() or (is_dir and reached.is_dir())):
            raise InputError(f"is a link to {reached}, not a {'folder' if is_dir else 'file'} (a device, pipe or "
                             "socket); refusing to replace it", where, field=field)
        return
    if not _exists(path):
        return
    if is_dir:
        if not path.is_dir():
            raise InputError("is a file, not a folder retrieval-lab wrote; refusing to replace it",
                             where, field=field)
        if not any(path.iterdir()):
            return
        strangers = unlisted_files(path)
        if strangers is None:
            raise InputError(f"is a folder holding files retrieval-lab did not write (no {MARKER} of its making); "
                             "refusing to replace it", where, field=field)
        if strangers:
            raise InputError(f"holds {strangers[0]}, which retrieval-lab did not write (not in its {MARKER}); "
                             "refusing to replace the folder", where, field=field)
        return
    if path.is_dir():
        raise InputError("is a folder, and this output is a file; refusing to replace it", where, field=field)
    if not path.is_file():
        raise InputError("is not a regular file (a device, pipe or socket); refusing to replace it",
                         where, field=field)


def _files_below(folder: Path) -> list[str]:
    """Every file and link below ``folder`` (links not followed), as relative POSIX paths."""
    out = []
    for root, dirs, files in os.walk(folder):
        rel = Path(root).relative_to(folder)
        out += [(rel / name).as_posix() for name in files]
        out += [(rel / name).as_posix() for name in dirs if (Path(root) / name).is_symlink()]
    return sorted(out)


def manifest_text(folder: Path) -> str:
    """:data:`MARKER`'s content for a finished folder output: the text, then every file it holds."""
    return MARKER_TEXT + MANIFEST_HEAD + "".join(f"{name}\n" for name in _files_below(folder) if name != MARKER)


def _our_file_text(path: Path) -> str | None:
    """The text of a record file the project may have written (a marker, a written list); None for a link,
    a folder, a missing or unreadable file: none of those vouches for anything."""
    if path.is_symlink() or not path.is_file():
        return None
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def unlisted_files(folder: Path) -> list[str] | None:
    """Files in a folder output that its :data:`MARKER` does not list (None: no readable marker of ours).

    A marker holding only :data:`MARKER_TEXT` (written before manifests existed) lists nothing and
    vouches for the whole folder, as it did then.
    """
    text = _our_file_text(folder / MARKER)
    if text is None:
        return None
    if text == MARKER_TEXT:
        return []
    if not text.startswith(MARKER_TEXT + MANIFEST_HEAD):
        return None
    listed = set(text[len(MARKER_TEXT + MANIFEST_HEAD):].splitlines())
    return [name for name in _files_below(folder) if name != MARKER and name not in listed]


def written_names(folder: Path) -> set[str] | None:
    """The names :data:`WRITTEN` in ``folder`` lists (None: no such file of ours)."""
    text = _our_file_text(folder / WRITTEN)
    return set(text[len(WRITTEN_TEXT):].splitlines()) if text is not None and text.startswith(WRITTEN_TEXT) else None


def check_into(folder: PathArg, names: Iterable[str], field: str | None = None) -> None:
    """Refuse to write ``names`` into ``folder`` where one of them is there and retrieval-lab did not write it."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    ours = written_names(folder) or set()
    for name in names:
        if _exists(folder / name) and name not in ours:
            raise InputError(f"holds {name}, which retrieval-lab did not write (not listed in {WRITTEN}); "
                             "refusing to replace it", str(folder), field=field)


def record_written(folder: PathArg, names: Iterable[str]) -> None:
    """Add ``names`` to ``folder``'s :data:`WRITTEN` (written atomically), once they are in place."""
    folder = Path(folder)
    names = sorted((written_names(folder) or set()) | set(names))
    write_text(folder / WRITTEN, WRITTEN_TEXT + "".join(f"{n}\n" for n in names))



def _box(target: Path, tag: str) -> Path:
    """A new folder ``.NAME.<tag>XXXXXXXX`` beside ``target`` holding :data:`TEMPORARY`: ours to sweep."""
    box = Path(tempfile.mkdtemp(prefix=f".{target.name}.{tag}", dir=target.parent))
    (box / TEMPORARY).write_text(TEMPORARY_TEXT, encoding="utf-8")
    return box


def _ours(path: Path) -> bool:
    """``path`` is a folder :func:`_box` made: its name and its content say so, nothing else does."""
    mark = path / TEMPORARY
    if path.is_symlink() or not path.is_dir() or mark.is_symlink() or not mark.is_file():
        return False
    try:
        return mark.read_text(encoding="utf-8") == TEMPORARY_TEXT
    except (OSError, UnicodeDecodeError):
        return False


def _sweep(target: Path, tag: str) -> None:
    """Remove what a run killed by SIGKILL left beside ``target`` (no finally block ran): folders named
    ``.NAME.<tag>*`` that hold :data:`TEMPORARY` with its text. A user's ``.NAME.tmp-backup`` stays."""
    prefix = f".{target.name}.{tag}"
    for stale in [p for p in target.parent.iterdir() if p.name.startswith(prefix)]:
        if _ours(stale):
            shutil.rmtree(stale, ignore_errors=True)


def _name_target(exc: OSError, target: Path, tmp: Path | None) -> None:
    """Make an OSError about a temporary sibling (or about no file) name the output the user asked for."""
    if exc.errno is None:  # OSError("message"), e.g. numpy's "2304 requested and 224 written" on a full disk:
        # str() keeps the message (setting errno would turn it into "[Errno None]"); the CLI adds the path
        exc.output_path = str(target)
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
    # os.replace cannot replace a non-empty folder: move the old output aside first, into a box of ours.
    box = _box(target, OLD_TAG)
    old = box / target.name
    try:
        os.replace(target, old)
    except BaseException:
        shutil.rmtree(box, ignore_errors=True)
        raise
    try:
        os.replace(tmp, target)
    except BaseException:
        os.replace(old, target)  # the old output back in place, as if nothing happened
        shutil.rmtree(box, ignore_errors=True)
        raise
    shutil.rmtree(box, ignore_errors=True)


def _check_kind(target: Path, kind: str | None) -> None:
    if kind is not None:  # None: a file inside a folder output being built, or a caller that checked it itself
        check_kind(target, kind)


@contextlib.contextmanager
def atomic_path(target: PathArg, is_dir: bool = False, kind: str | None = None) -> Iterator[Path]:
    """Yield a temporary path next to ``target``; rename it onto ``target`` if the block succeeds.

    Refuses (InputError) to replace anything :func:`check_replaceable` refuses, and, for a file output of
    ``kind`` (:mod:`core.kinds`), an existing file of another kind, before and again at the rename (the
    writers' callers check it first with a message naming their option); a folder output gets
    :data:`MARKER`, listing every file it holds. The output's mode follows the umask. An OSError names
    ``target``, never the temporary. Temporaries and set-aside old outputs of a killed run are removed
    (only folders of :func:`_box`'s making). The temporary has ``target``'s own name, inside its box.
    """
    target = Path(target)
    check_replaceable(target, is_dir)
    _check_kind(target, kind)
    box = tmp = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _sweep(target, TMP_TAG)
        box = _box(target, TMP_TAG)
        tmp = box / (target.name if target.name != TEMPORARY else "output")
        if is_dir:
            tmp.mkdir()
        else:
            tmp.touch()
        yield tmp
        if os.environ.get(HOLD_ENV):  # fault injection for the crash test: a window to SIGKILL in
            time.sleep(float(os.environ[HOLD_ENV]))
        if is_dir:
            (tmp / MARKER).unlink(missing_ok=True)
            (tmp / MARKER).write_text(manifest_text(tmp), encoding="utf-8")
        os.chmod(tmp, (0o777 if is_dir else 0o666) & ~_umask())
        check_replaceable(target, is_dir)  # something may have appeared there while the stage ran
        _check_kind(target, kind)
        _replace(tmp, target)
        REPLACED.append(str(target))
        _sweep(target, OLD_TAG)  # only now: until a new output stands, the set-aside one is the last copy
    except BaseException as exc:
        if isinstance(exc, OSError):
            _name_target(exc, target, tmp)
        raise
    finally:
        if box is not None:
            shutil.rmtree(box, ignore_errors=True)


def finish_set(folder: PathArg) -> list[str]:
    """Complete a set of outputs a killed run left half-replaced in ``folder`` (its :data:`REPLACING` record):
    every temporary still waiting is renamed onto its output, so the set is wholly the new one, as the run
    would have left it. Returns the outputs renamed; nothing happens without a record of ours."""
    folder = Path(folder)
    record = folder / REPLACING
    (folder / (REPLACING + ".part")).unlink(missing_ok=True)  # a record killed while written: no rename began
    text = _our_file_text(record)
    if text is None or not text.startswith(REPLACING_TEXT):
        return []
    done = []
    for line in text[len(REPLACING_TEXT):].splitlines():
        target_rel, _, tmp_rel = line.partition("\t")
        target, tmp = folder / target_rel, folder / tmp_rel
        if not tmp_rel or not _ours(tmp.parent):
            continue
        if _exists(tmp):  # not renamed yet: renamed now
            _replace(tmp, target)
            done.append(str(target))
        shutil.rmtree(tmp.parent, ignore_errors=True)  # its box, emptied or not by the killed run
    record.unlink()
    for line in text[len(REPLACING_TEXT):].splitlines():
        target = folder / line.partition("\t")[0]
        if target.parent.is_dir():
            _sweep(target, OLD_TAG)
    return done


def check_whole(path: PathArg) -> None:
    """Refuse to read ``path`` when its folder holds a set a killed run left half-replaced (:data:`REPLACING`):
    its files would mix two runs' results; the next run of the writer completes the set."""
    record = Path(path).parent / REPLACING
    if _our_file_text(record) is not None:
        raise InputError(f"is one of a set of outputs a killed run left half-replaced ({record} says which): run "
                         "the stage that writes them again (it completes the set first)", str(path))


@contextlib.contextmanager
def atomic_set(targets: list[PathArg], folder: PathArg,
               kinds: dict[Path, str] | None = None) -> Iterator[list[Path]]:
    """Temporaries for several file outputs replaced together: every one complete before the first rename,
    and a record (:data:`REPLACING`, in ``folder``) from the first rename to the last, so that a run killed
    between two renames leaves a set that is detectably half-replaced, and that the next :func:`finish_set`
    (the next run: :func:`atomic_set` calls it first) completes. Each output replaces only what
    :func:`check_replaceable` allows (and, for those ``kinds`` names, only a file of its kind); an exception
    before the first rename leaves every old output as it was.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    finish_set(folder)
    targets = [Path(t) for t in targets]
    kinds = {Path(t): k for t, k in (kinds or {}).items()}
    for target in targets:
        check_replaceable(target)
        _check_kind(target, kinds.get(target))
    boxes: list[Path] = []
    pending: list[tuple[Path, Path]] = []
    recorded = False
    try:
        for target in targets:
            target.parent.mkdir(parents=True, exist_ok=True)
            _sweep(target, TMP_TAG)
            boxes.append(_box(target, TMP_TAG))
            tmp = boxes[-1] / (target.name if target.name != TEMPORARY else "output")
            tmp.touch()
            pending.append((target, tmp))
        yield [tmp for _, tmp in pending]
        if os.environ.get(HOLD_ENV):
            time.sleep(float(os.environ[HOLD_ENV]))
        for target, tmp in pending:
            os.chmod(tmp, 0o666 & ~_umask())
            check_replaceable(target)
            _check_kind(target, kinds.get(target))
        lines = "".join(f"{os.path.relpath(t, folder)}\t{os.path.relpath(m, folder)}\n" for t, m in pending)
        record, part = folder / REPLACING, folder / (REPLACING + ".part")
        part.write_text(REPLACING_TEXT + lines, encoding="utf-8")
        os.replace(part, record)  # whole or absent: a record cut short would complete half a set
        recorded = True
        for i, (target, tmp) in enumerate(pending):
            _replace(tmp, target)
            REPLACED.append(str(target))
            if i == 0 and os.environ.get(HOLD_BETWEEN_ENV):  # fault injection: a window to SIGKILL in
                time.sleep(float(os.environ[HOLD_BETWEEN_ENV]))
        record.unlink()
        recorded = False
        for target, _ in pending:
            _sweep(target, OLD_TAG)
    except BaseException as exc:
        if isinstance(exc, OSError) and pending:
            _name_target(exc, pending[0][0], None)
        raise
    finally:
        if not recorded:  # before the record (or after the set was whole): the temporaries are ours to drop
            for box in boxes:
                shutil.rmtree(box, ignore_errors=True)


def write_text(target: PathArg, text: str, kind: str | None = None) -> None:
    """``text`` at ``target``, atomically; ``kind``: the file's kind (:mod:`core.kinds`), for a file output
    (a file inside a folder output being built has none to declare)."""
    with atomic_path(target, kind=kind) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(target: PathArg, obj, indent: int = 2, kind: str | None = None) -> None:
    write_text(target, json.dumps(obj, indent=indent, sort_keys=False, ensure_ascii=False) + "\n", kind)
