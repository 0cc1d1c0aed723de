from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from beir_fixtures import REPO, SCIFACT

# DVC writes a site cache under the user's home unless told otherwise; keep it in the test tree.
os.environ.setdefault("DVC_SITE_CACHE_DIR", str(REPO / ".dvc-site-cache"))
os.environ.setdefault("DVC_NO_ANALYTICS", "1")


@pytest.fixture
def scifact_dir() -> Path:
    if not (SCIFACT / "corpus.jsonl").exists():
        pytest.skip(f"SciFact not found at {SCIFACT} (the shared data folder is absent)")
    return SCIFACT


@pytest.fixture(autouse=True)
def _torch_threads_restored():
    """A test may pin torch to one thread; the tests after it get every core back.

    torch's thread count is process-wide: one module that set it to 1 made the SciFact
    encode, later in the session, run on one core (252 s instead of about 150 s).
    """
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    yield
    torch = sys.modules.get("torch")
    if torch is not None and before is not None and torch.get_num_threads() != before:
        torch.set_num_threads(before)
