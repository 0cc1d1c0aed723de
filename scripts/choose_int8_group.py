"""Choose dense.runtime openvino_int8's quantisation group on validation, never on test.

For each group size, every document of a prepared dataset and its validation claims are encoded by
``openvino_int8`` (bf16 precision, as the race runs it) and scored; the choice is the largest group (the
fewest scales, the fastest) whose validation nDCG@10 is within BOUND of the fp32 torch encoder's. The
result is what src/retrieval_lab/runtimes/openvino.py's INT8_GROUP holds (lab notes, 2026-12-05).

    OMP_NUM_THREADS=2 .venv/bin/python scripts/choose_int8_group.py --dataset data/prepared/scifact \
        [--groups 32 128 384] [--json bench-results/issue53/int8-group-val.json]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import _bench

RESULT = _bench.JsonResult("scripts/choose_int8_group.py", ("reference", "rows", "bound", "chosen"))
LOCK = Path(__file__).resolve().parents[1] / "models" / "base.lock.json"
BOUND = 0.002  # bench_encode.py's NDCG_BOUND: the same fidelity to fp32, here on validation
MAX_LENGTH, BATCH = 256, 64


def val_means(dataset: str, runtime: str, bf16: bool, group: int | None = None) -> dict:
    """Validation nDCG@10 and R@100 of the base model under ``runtime`` (int8 at ``group``)."""
    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.core.params import DenseParams
    from retrieval_lab.encoder import load, native_bf16
    from retrieval_lab.runtimes import openvino
    from retrieval_lab.training.validation import dense_means

    if group is not None:
        openvino.INT8_GROUP = group  # this process's: each group is scored in a fresh one
    data = load_dataset(dataset, ["val"])
    qrels = data.qrels["val"]
    encoder = load(LOCK, "cpu")
    bf16 = bf16 and native_bf16()

    class Encoding:  # dense_means calls encode(texts, batch_size, max_length, bf16)
        def encode(self, texts, *_):
            return encoder.encode(list(texts), BATCH, MAX_LENGTH, bf16, runtime)

    means = dense_means(Encoding(), qrels, {q: data.queries[q].text for q in qrels},
                        {d: data.corpus[d].content(["title", "text"]) for d in data.corpus},
                        DenseParams(batch_size=BATCH, max_seq_length=MAX_LENGTH), 100, ["nDCG@10", "R@100"])
    return {"runtime": runtime, "bf16": bf16, "group": group, "queries": len(qrels), **means}


def choose(reference: dict, rows: list[dict], bound: float = BOUND) -> int | None:
    """The largest group within ``bound`` of the reference's nDCG@10; None if none is."""
    within = [r["group"] for r in rows if abs(r["nDCG@10"] - reference["nDCG@10"]) <= bound]
    return max(within) if within else None


def decide(reference: dict, rows: list[dict], choose, columns: list[str], rule: str, refusal: str,
           json_path: str | None, dataset: str, result: _bench.JsonResult = RESULT):
    """Each row's gap to the reference, the choice, the table and the JSON; SystemExit(refusal) when nothing is
    within the bound (after the JSON is written: what was measured is kept)."""
    for row in rows:
        row["gap"] = row["nDCG@10"] - reference["nDCG@10"]
    chosen = choose(reference, rows)
    print(_bench.markdown([reference, *rows], columns))
    print(f"\nvalidation ({reference['queries']} queries): {rule}: {chosen}")
    result.write(json_path, {"reference": reference, "rows": rows, "bound": BOUND, "chosen": chosen,
                             "dataset": dataset})
    if chosen is None:
        raise SystemExit(refusal)
    return chosen


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, help="a prepared dataset folder with a val split")
    parser.add_argument("--groups", type=int, nargs="+", default=[32, 128, 384])
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    RESULT.check(args)  # before any work: a bench may run for hours
    reference = _bench.isolated(val_means, args.dataset, "torch", False)
    rows = [_bench.isolated(val_means, args.dataset, "openvino_int8", True, g) for g in args.groups]
    decide(reference, rows, choose, ["runtime", "bf16", "group", "nDCG@10", "R@100"],
           f"the largest group within {BOUND} of fp32", "no group is within the bound: openvino_int8 loses quality here",
           args.json, args.dataset)


if __name__ == "__main__":
    main()
