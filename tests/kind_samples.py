"""One real file of every kind a file output writes (core.kinds), for the tests of "a command replaces only what
it wrote": each made by the library's own writer, or one of the pipeline's outputs committed in this repository
(the comparison, its page, metrics, a diagnosis, the experiments table, dvc.yaml), so a kind's signature is
checked against what its writer really writes."""

from __future__ import annotations

import shutil
from pathlib import Path

from beir_fixtures import REPO

from retrieval_lab.core import kinds

NOTE = b"my notes: ask about the judging budget\n"
SCRIPT = b"#!/usr/bin/env python3\nimport sys\nprint('make the fused run', sys.argv)\n"
# committed pipeline outputs: what a previous run of their command wrote
COMMITTED = {
    kinds.COMPARISON: "metrics/support/compare.json",
    kinds.COMPARISON_MD: "reports/support/compare.md",
    kinds.PAGE: "reports/support/compare.html",
    kinds.METRICS: "metrics/support/bm25.json",
    kinds.DIAGNOSIS: "reports/support/bm25/diagnosis.md",
    kinds.TABLE_MD: "docs/comparing-experiments/table.md",
    kinds.TABLE_CSV: "docs/comparing-experiments/table.csv",
    kinds.TABLE_PLOT: "docs/comparing-experiments/table.png",
    kinds.TABLE_INPUTS: "docs/comparing-experiments/inputs.json",
    kinds.DVC_YAML: "dvc.yaml",
}
DOCS = {f"d{i}": f"document about topic {i}" for i in range(1, 5)}
QUERY_TEXTS = {f"q{i}": f"topic {i}" for i in range(1, 4)}


def _pool_rows():
    from retrieval_lab.core.data import Doc, Query
    from retrieval_lab.judgment_pool import pool

    corpus = {d: Doc(d, "", text) for d, text in DOCS.items()}
    queries = {q: Query(q, text) for q, text in QUERY_TEXTS.items()}
    runs = {"a": {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d2": 1.0}}, "b": {"q1": {"d3": 1.0}, "q3": {"d4": 1.0}}}
    return pool(runs, 2, queries, corpus)


def labelled(pool_path: Path, out: Path, labels: int | None = None) -> int:
    """A copy of the pool at ``pool_path`` with its first ``labels`` score cells filled (all by default), as an
    annotator leaves it; returns how many."""
    header, *rows = pool_path.read_text(encoding="utf-8").splitlines()
    n = len(rows) if labels is None else labels
    filled = [row + "1" if i < n else row for i, row in enumerate(rows)]  # a row ends in its empty score cell
    out.write_text("\n".join([header, *filled]) + "\n", encoding="utf-8")
    return n


def make_samples(folder: Path) -> dict[str, Path]:
    """kind -> a file of that kind in ``folder`` (and kinds.LABELLED_POOL -> a pool with every row labelled);
    all but :data:`kinds.CHECKPOINT` (:func:`checkpoint_sample`)."""
    import retrieval_lab as rl
    from retrieval_lab.core.atomic import write_json
    from retrieval_lab.fusion import fuse
    from retrieval_lab.judging import export
    from retrieval_lab.judging.pool_file import read_pool
    from retrieval_lab.judging.store import LabelRange, create_store
    from retrieval_lab.judgment_pool import write_pool
    from retrieval_lab.latency import Timing

    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for kind, rel in COMMITTED.items():
        out[kind] = folder / Path(rel).name
        shutil.copyfile(REPO / rel, out[kind])
    run = {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d2": 1.5}}
    out[kinds.RUN] = folder / "run.trec"
    rl.write_run(out[kinds.RUN], run, tag="sample")
    out[kinds.QRELS] = folder / "qrels.tsv"
    rl.write_qrels(out[kinds.QRELS], {"q1": {"d1": 1}})
    out[kinds.POOL] = folder / "pool.tsv"
    write_pool(out[kinds.POOL], _pool_rows())
    out[kinds.LABELLED_POOL] = folder / "labelled.tsv"
    labelled(out[kinds.POOL], out[kinds.LABELLED_POOL])
    out[kinds.PROVENANCE] = folder / "qrels.tsv.provenance.tsv"
    export.write_provenance(out[kinds.PROVENANCE], [("q1", "d1", "1", "agreement", "ann", "label", "1",
                                                     "2024-01-01T00:00:00Z")])
    out[kinds.JUDGMENTS] = folder / "judgments.sqlite"
    create_store(out[kinds.JUDGMENTS], read_pool(out[kinds.POOL]), LabelRange(0, 2))
    out[kinds.TIMING] = folder / "timing.json"
    write_json(out[kinds.TIMING], Timing("bm25", "search of one query", 1, {"q1": 0.001, "q2": 0.002}, 0.003).to_json(),
               kind=kinds.TIMING)
    out[kinds.FUSION] = folder / "fusion.json"
    result = fuse([run, {"q1": {"d2": 3.0}, "q2": {"d1": 1.0}}], "rrf")
    write_json(out[kinds.FUSION], {**result.to_json(), "runs": ["a.trec", "b.trec"], "qrels": None}, kind=kinds.FUSION)
    out[kinds.CHECK_RESUME] = folder / "check-resume.json"  # training.resume.check_resume's first keys (a real
    # report is checked in tests/training/test_resume.py)
    write_json(out[kinds.CHECK_RESUME], {"passed": True, "checks": {"identical_losses": True}, "device": "cpu",
                                         "max_abs_param_diff": 0.0}, kind=kinds.CHECK_RESUME)
    return out


def checkpoint_sample(path: Path) -> Path:
    """A checkpoint as train writes it (apart: it imports torch, seconds that only its cases pay)."""
    from retrieval_lab.training.checkpoint import save_checkpoint

    if not path.exists():
        save_checkpoint(path, {"step": 1})
    return path


def hostile(samples: dict[str, Path], kind: str) -> dict[str, tuple[bytes, str]]:
    """label -> (bytes to find at an output of ``kind``, words its refusal says): a note, a script, a file of
    another kind, a labelled pool."""
    other = kinds.QRELS if kind != kinds.QRELS else kinds.RUN
    return {
        "a note": (NOTE, "is a file retrieval-lab did not write"),
        "a script": (SCRIPT, "is a file retrieval-lab did not write"),
        f"another kind ({other})": (samples[other].read_bytes(), f"is {kinds.TEXT[other]};"),
        "a labelled pool": (samples[kinds.LABELLED_POOL].read_bytes(), "is a labelled pool ("),
    }
