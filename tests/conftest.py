from __future__ import annotations

import os
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
