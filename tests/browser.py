"""Headless Chromium for the comparison page's tests: the system's browser (apt package ``chromium``) driven
by playwright (its wheel carries the driver; no browser is ever downloaded).

Where the browser or playwright is missing the tests skip, except in CI (``CI`` set, as on every CI
service and in ``.ci/run``), where they fail: a browser test must never pass by not running.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from beir_fixtures import REPO

CHROMIUM = "/usr/bin/chromium"
TIMEOUT_MS = 60_000  # a page takes well under a second; the suite's machine may be busy with pipelines
ARTIFACTS = REPO / ".pytest-artifacts"  # gitignored: screenshots kept as test artifacts


def _unavailable(why: str):
    if os.environ.get("CI"):
        pytest.fail(f"{why}: CI must run the browser tests (.ci/run installs chromium)")
    pytest.skip(why)


def require() -> str:
    """The Chromium to launch, with playwright importable; else the test skips (fails in CI). For a test that
    launches the browser in a process of its own, where a skip would read as that process's failure."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[dev]')")
    executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if executable is None:
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    return executable


@contextmanager
def chromium():
    """A launched headless Chromium (playwright's Browser)."""
    executable = require()
    from playwright.sync_api import sync_playwright

    # the benches' launcher (scripts/_bench.py, standard library only): one set of flags and one own folder
    # for Chromium's files, for the tests and scripts/bench_page.py alike
    spec = importlib.util.spec_from_file_location("_bench", REPO / "scripts" / "_bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    with sync_playwright() as p, bench.chromium(p, executable) as browser:
        yield browser


@dataclass
class Opened:
    """A page opened from a file, with every request, dialog and script error it made."""

    page: object
    url: str
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def open_page(browser, path: Path, width: int = 1400, height: int = 1000) -> Opened:
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(TIMEOUT_MS)
    opened = Opened(page, path.resolve().as_uri())
    page.on("request", lambda r: opened.requests.append(r.url))
    page.on("dialog", lambda d: (opened.dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: opened.errors.append(str(e)))
    page.goto(opened.url)
    page.wait_for_function("window.__pageReady === true", timeout=TIMEOUT_MS)
    return opened


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    return path
