"""Tiny-fixture helpers shared by tests (importable: pytest puts tests/ on sys.path)."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCIFACT = REPO.parent / "shared" / "data" / "scifact"


def write_beir(root: Path, corpus: list[dict], queries: list[dict], qrels: dict[str, list[tuple]]) -> Path:
    """Write a tiny BEIR folder: qrels maps split -> [(qid, did, score)]."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    (root / "qrels").mkdir(exist_ok=True)
    for split, rows in qrels.items():
        lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in rows]
        (root / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def default_params(folder: Path) -> Path:
    """A params file with no section: every command reads the schema's defaults from it."""
    path = folder / "defaults.yaml"
    path.write_text("# every section at its default\n", encoding="utf-8")
    return path


def load_script(name: str):
    """Import ``scripts/<name>.py`` as a module, with scripts/ on sys.path for its ``import _bench``;
    a generator for a module fixture (yield from it): the path entry is removed afterwards."""
    import importlib.util
    import sys

    sys.path.insert(0, str(REPO / "scripts"))
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        yield module
    finally:
        sys.path.remove(str(REPO / "scripts"))
