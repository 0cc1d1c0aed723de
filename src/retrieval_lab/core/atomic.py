"""Atomic outputs: write to a temporary sibling, rename into place on success.

DVC caches whatever sits at an output path when a stage ends; a stage killed
midway must therefore leave nothing there, not half a file.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

HOLD_ENV = "RETRIEVAL_LAB_HOLD_BEFORE_RENAME"  # seconds to wait, output complete, before renaming


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike, is_dir: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to ``target``; rename it onto ``target`` if the block succeeds."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{target.name}.tmp-"
    for stale in target.parent.glob(prefix + "*"):  # left by a run killed with SIGKILL
        _remove(stale)
    if is_dir:
        tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
    else:
        fd, name = tempfile.mkstemp(prefix=prefix, dir=target.parent)
        os.close(fd)
        tmp = Path(name)
    try:
        yield tmp
        if os.environ.get(HOLD_ENV):  # fault injection for the crash test: a window to SIGKILL in
            time.sleep(float(os.environ[HOLD_ENV]))
        os.chmod(tmp, 0o755 if is_dir else 0o644)  # mkstemp/mkdtemp create owner-only
        if target.exists() or target.is_symlink():
            # os.replace cannot replace a non-empty directory: move the old one aside first.
            old = target.with_name(f".{target.name}.old-{os.getpid()}")
            _remove(old)
            os.replace(target, old)
            os.replace(tmp, target)
            _remove(old)
        else:
            os.replace(tmp, target)
    except BaseException:
        _remove(tmp)
        raise


def write_text(target: str | os.PathLike, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(target: str | os.PathLike, obj, indent: int = 2) -> None:
    write_text(target, json.dumps(obj, indent=indent, sort_keys=False, ensure_ascii=False) + "\n")
