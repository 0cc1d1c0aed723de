"""Choose dense.runtime openvino_int8_static's calibration texts on validation, never on test.

Static int8 fixes every activation's scale from a calibration set, so the set decides the quality. Each
candidate calibrates the base model, every document of a prepared dataset and its validation claims are encoded
(bf16 precision, as the race runs it) and scored against the fp32 torch encoder's nDCG@10. Candidates: the
embedded support corpus (all its documents, or its first half) and the prepared dataset's own documents (300
drawn with seed 0, as sentence-transformers' static export is calibrated in scripts/bench_encode.py). The choice
is the first candidate, in that order of preference (no data of the user's collection first), within BOUND of
fp32; it is what src/retrieval_lab/runtimes/openvino_int8_static.py calibrates on (lab notes, 2026-12-05).

    OMP_NUM_THREADS=2 .venv/bin/python scripts/choose_int8_calibration.py --dataset data/prepared/scifact \
        [--json bench-results/issue53/int8-calibration-val.json]
"""

from __future__ import annotations

import argparse
import random

import _bench
from choose_int8_group import BOUND, decide, val_means

RESULT = _bench.JsonResult("scripts/choose_int8_calibration.py", ("reference", "rows", "bound", "chosen"))
CANDIDATES = ("support", "support-half", "dataset-300")


def calibration(candidate: str, dataset: str) -> list[str]:
    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.runtimes.openvino_int8_static import calibration_texts

    support = list(calibration_texts())
    if candidate == "support":
        return support
    if candidate == "support-half":
        return support[:len(support) // 2]
    docs = list(load_dataset(dataset, []).corpus.values())
    return [doc.content(["title", "text"]) for doc in random.Random(0).sample(docs, min(300, len(docs)))]


def static_means(dataset: str, candidate: str) -> dict:
    """Validation figures of openvino_int8_static calibrated on ``candidate`` (this process's calibration)."""
    from retrieval_lab.runtimes import openvino_int8_static

    texts = tuple(calibration(candidate, dataset))
    openvino_int8_static.calibration_texts = lambda: texts  # this process's: each candidate runs in a fresh one
    return {**val_means(dataset, "openvino_int8_static", True), "calibration": candidate, "texts": len(texts)}


def choose(reference: dict, rows: list[dict], bound: float = BOUND) -> str | None:
    within = [r["calibration"] for r in rows if abs(r["nDCG@10"] - reference["nDCG@10"]) <= bound]
    return within[0] if within else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, help="a prepared dataset folder with a val split")
    parser.add_argument("--candidates", nargs="+", choices=CANDIDATES, default=list(CANDIDATES))
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    RESULT.check(args)  # before any work: a bench may run for hours
    reference = _bench.isolated(val_means, args.dataset, "torch", False)
    rows = [_bench.isolated(static_means, args.dataset, c) for c in args.candidates]
    decide(reference, rows, choose, ["runtime", "bf16", "calibration", "texts", "nDCG@10", "gap", "R@100"],
           f"the first calibration within {BOUND} of fp32",
           "no calibration is within the bound: openvino_int8_static loses quality here", args.json, args.dataset, RESULT)


if __name__ == "__main__":
    main()
