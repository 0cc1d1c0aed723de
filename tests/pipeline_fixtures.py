"""Run the real DVC pipeline in throw-away copies of the repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from beir_fixtures import REPO

VENV_BIN = str(Path(sys.executable).parent)


def env() -> dict:
    e = dict(os.environ)
    e["PATH"] = VENV_BIN + os.pathsep + e.get("PATH", "")  # stages call `retrieval-lab`
    e["DVC_NO_ANALYTICS"] = "1"
    e.setdefault("OMP_NUM_THREADS", "2")
    for key, value in {"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
                       "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.invalid"}.items():
        e[key] = value
    return e


def sh(cmd: list[str], cwd: Path, check: bool = True, timeout: int = 1800) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def clone_working_tree(dest: Path) -> Path:
    """A fresh git repository holding the working tree's tracked and untracked-not-ignored files.

    The data symlink data/raw/scifact is relative; placing the copy where it resolves is not
    needed for the default (support) pipeline.
    """
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    dest.mkdir(parents=True)
    for name in filter(None, files):
        src = REPO / name
        if not (src.exists() or src.is_symlink()):
            continue  # deleted in the working tree
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), target)
        else:
            shutil.copy2(src, target)
    sh(["git", "init", "-q", "-b", "main"], dest)
    sh(["git", "add", "-A"], dest)
    sh(["git", "commit", "-qm", "copy"], dest)
    return dest


def lock_hashes(repo: Path) -> dict[str, str]:
    """path -> md5 of every output recorded in dvc.lock."""
    import yaml

    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    return {out["path"]: out["md5"] for stage in lock["stages"].values() for out in stage.get("outs", [])}
