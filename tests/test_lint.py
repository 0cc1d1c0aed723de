"""ruff, pinned in the dev extra, finds nothing in the repository (its default rules and pyproject's settings).

A pin, because each ruff release adds rules to its defaults: an unpinned one turns a clean tree red
without a change to the code."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import version

from beir_fixtures import REPO


def test_ruff_is_pinned_in_the_dev_extra_and_is_the_one_installed():
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    pinned = re.search(r'"ruff==([0-9.]+)"', pyproject)
    assert pinned, "pyproject.toml: ruff is not pinned (ruff==X.Y.Z) in the dev extra"
    assert version("ruff") == pinned.group(1)


def test_ruff_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                            cwd=REPO, capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
