"""Tiny-fixture helpers shared by tests (importable: pytest puts tests/ on sys.path)."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCIFACT = REPO.parent / "shared" / "data" / "scifact"


def scifact_encode_skip_reason(asked: bool) -> str | None:
    """Why the suite leaves out SciFact's corpus encode (``tests/test_scifact.py``), or None to run it.

    It runs where the device computes fast enough for the suite's 10 minutes: a GPU, or a CPU with native
    bf16 (about 280 s of CPU on an AMD Zen 4, 140 s on an Intel Xeon with AMX). In fp32 on an AVX2-only CPU
    (a Zen 3) it took 545 s of CPU, a third of the suite's, and the suite 866 s; no runtime encodes faster
    there (lab notes, 2026-12-06). ``asked`` (``--scifact-fp32``) runs it anyway.
    """
    import torch

    from retrieval_lab.encoder import native_bf16

    if asked or torch.cuda.is_available() or native_bf16():
        return None
    return ("this CPU has no native bf16 (AVX512-BF16 or AMX): SciFact's corpus encode in fp32 takes about 9 "
            "minutes of CPU, past the suite's 10 minutes on 2 cores; `pytest --scifact-fp32 tests/test_scifact.py` "
            "runs it")


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


def write_family_beir(root: Path, families: int = 10, plant: tuple | None = None) -> Path:
    """A BEIR folder for a family split (qrels/all.tsv): each family f has two procedures (positives,
    graded 2 and 1) and two queries; ``plant`` adds one judgment (a planted leak)."""
    corpus, queries, rows = [], [], []
    for f in range(families):
        for p in range(2):
            corpus.append({"_id": f"f{f}-p{p}", "title": f"proc {p}", "text": f"fix family {f} way {p}",
                           "metadata": {"family": f"fam{f}"}})
        for q in range(2):
            queries.append({"_id": f"f{f}-q{q}", "text": f"problem {f} variant {q}",
                            "metadata": {"family": f"fam{f}"}})
            rows += [(f"f{f}-q{q}", f"f{f}-p0", 2), (f"f{f}-q{q}", f"f{f}-p1", 1)]
    if plant:
        rows.append(plant)
    return write_beir(root, corpus, queries, {"all": rows})


def default_params(folder: Path) -> Path:
    """A params file with no section: every command reads the schema's defaults from it."""
    path = folder / "defaults.yaml"
    path.write_text("# every section at its default\n", encoding="utf-8")
    return path


def load_script(name: str):
    """Import ``scripts/<name>.py`` as a module, with scripts/ on sys.path for its sibling imports
    (``import _bench``) and the module in ``sys.modules`` (dataclasses look their module up there);
    a generator for a module fixture (yield from it): both are removed afterwards."""
    import importlib.util
    import sys

    sys.path.insert(0, str(REPO / "scripts"))
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)
        sys.path.remove(str(REPO / "scripts"))
