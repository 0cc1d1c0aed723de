"""Throwaway git + DVC repositories for tests that run real DVC experiments (``dvc`` of this venv)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DVC = str(Path(sys.executable).parent / "dvc")


def git_env() -> dict[str, str]:
    """This venv's tools first on PATH, and a git identity for commits."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t"}


def sh(repo: Path, *cmd: str) -> str:
    """Run ``cmd`` in ``repo``; its stdout, or the test fails with its output."""
    done = subprocess.run(cmd, cwd=repo, env=git_env(), capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def new_dvc_repo(repo: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (path -> text) into ``repo``, then git init, dvc init and commit them all."""
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    sh(repo, "git", "init", "-q")
    sh(repo, DVC, "init", "-q")
    sh(repo, "git", "add", ".")
    sh(repo, "git", "commit", "-qm", "init")
    return repo
