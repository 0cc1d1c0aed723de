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


@pytest.fixture(scope="session")
def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()  # read before any module fixture could change it


@pytest.fixture(autouse=True)
def _torch_threads_restored(_torch_threads):
    """A test or module fixture may pin torch to one thread; the tests after it get every core back.

    torch's thread count is process-wide: one module that set it to 1 made the SciFact
    encode, later in the session, run on one core (252 s instead of about 150 s).
    """
    yield
    torch = sys.modules["torch"]
    if torch.get_num_threads() != _torch_threads:
        torch.set_num_threads(_torch_threads)
