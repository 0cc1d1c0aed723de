"""What validation on the base model's candidates changes: one `train@hard` run, each validation measured both ways.

Trains the variant as the `train` stage does (params.yaml plus ``--set``, default the SciFact
quality command of docs/datasets.md with full-corpus validation) and, at every validation, ranks
the val claims against the whole corpus (what selects the weights here) and, from the same
embeddings, against the candidates of ``train.validate_candidates`` for each ``--candidates`` N (the
union of the untrained model's top N per val claim, fixed at the first validation). Prints, per
validation, both figures and the time the whole-corpus encode took; at the end it encodes each
union with the last weights and times it: the cost a validation on those candidates pays instead.
The epoch each way selects is the point: candidates that select another epoch change the model.

    OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_validation.py --dataset data/prepared/scifact \\
        --negatives data/mined/scifact/hard/negatives.jsonl --base-embeddings data/embeddings/dense/scifact \\
        [--candidates 10 30 100] [--set KEY=VALUE ...] [--sizes-only] [--json out.json]

``--sizes-only``: no training, only each union's documents, their share of the corpus's tokens and the
val positives inside it, from the base embeddings (seconds).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import _bench

RESULT = _bench.JsonResult("scripts/bench_validation.py", ("unions",))
ROOT = Path(__file__).resolve().parents[1]
QUALITY = ["train.positives_per_query=1", "train.positives_at_least=true", "train.epochs=3",
           "train.schedule=constant", "train.warmup_ratio=0", "train.patience=2", "train.bf16=true",
           "dense.bf16=true", "dense.max_seq_length=512"]


def run(dataset_dir: str, negatives: str, base_embeddings: str, overrides: list[str], sizes: list[int],
        variant: str = "hard", params_path: str | Path = ROOT / "params.yaml") -> dict:
    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.core.params import base_model
    from retrieval_lab.core.params_file import load_params
    from retrieval_lab.encoder import load, load_embeddings
    from retrieval_lab.training import LoopOptions, TrainSpec, fine_tune, training_data, weights_digest
    from retrieval_lab.training.stage import _keep_base_documents
    from retrieval_lab.training.validation import Candidates, EncodedDocuments, _rank, dense_means

    params = load_params(params_path, overrides)
    spec = TrainSpec.from_params(params.train, variant)
    fields = list(params.retrieve.fields)
    dataset = load_dataset(dataset_dir)
    data = training_data(dataset, negatives, spec.train.positives_per_query, fields, spec.train.positives_at_least,
                         spec)
    encoder = load(base_model(params)[0], "cpu")
    encoded = EncodedDocuments()
    _keep_base_documents(encoded, weights_digest(encoder.model), load_embeddings(base_embeddings), encoder, dataset,
                         fields, params)
    qrels = {q: j for q, j in dataset.qrels["val"].items() if any(r > 0 for r in j.values())}
    query_texts = {q: dataset.queries[q].text for q in qrels}
    doc_ids = list(dataset.corpus)
    doc_texts = [dataset.corpus[d].content(fields) for d in doc_ids]
    measures, dense, depth = list(params.evaluate.measures), params.dense, params.retrieve.depth
    candidates = {n: Candidates(n) for n in sizes}
    keep: dict[int, object] = {}
    validations: list[dict] = []

    def validate(enc) -> dict:
        started = time.perf_counter()
        digest = weights_digest(enc.model)
        made = encoded.get(digest)
        d = made[0] if made is not None else enc.encode(doc_texts, dense.batch_size, dense.max_seq_length,
                                                         dense.bf16)  # N x H
        encode_seconds = time.perf_counter() - started
        full = dense_means(enc, qrels, query_texts, {}, dense, depth, measures, (doc_ids, d))
        subsets = {}
        for n, cand in candidates.items():
            if cand.ids is None:
                q = enc.encode([query_texts[i] for i in sorted(qrels)], dense.batch_size, dense.max_seq_length,
                               dense.bf16)
                keep[n] = cand.fix(_rank(q, d, doc_ids, sorted(qrels), n), doc_ids)
            subsets[n] = dense_means(enc, qrels, query_texts, {}, dense, depth, measures, (cand.ids, d[keep[n]]))
        validations.append({"full": full, "candidates": {str(n): s for n, s in subsets.items()},
                            "encode_seconds": None if made is not None else encode_seconds,
                            "seconds": time.perf_counter() - started})
        print(f"validation {len(validations) - 1}: full {full['nDCG@10']:.4f}, "
              + ", ".join(f"top-{n} union {s['nDCG@10']:.4f}" for n, s in subsets.items())
              + f" ({encode_seconds:.0f} s encode)", flush=True)
        return full

    load_before = os.getloadavg()
    started = time.perf_counter()
    result = fine_tune(encoder, data, spec, LoopOptions({}, validate=validate, progress=False))
    train_seconds = time.perf_counter() - started
    steps_seconds = train_seconds - sum(v["seconds"] for v in validations)
    for v, record in zip(validations, result.validation):
        v["step"] = record["step"]
    union_seconds = {}
    for n, cand in candidates.items():  # each union's encode with the last weights: a candidate validation's cost
        t = time.perf_counter()
        encoder.encode([dataset.corpus[d].content(fields) for d in cand.ids], dense.batch_size, dense.max_seq_length,
                       dense.bf16)
        union_seconds[str(n)] = {"documents": len(cand.ids), "encode_seconds": time.perf_counter() - t}
    measure = spec.train.select_measure

    def chosen(values: list[float]) -> int:
        best = max(range(len(values)), key=lambda i: (values[i], -i))  # ties: the earlier, as the loop keeps
        return validations[best]["step"]

    selection = {"full": chosen([v["full"][measure] for v in validations]),
                 **{str(n): chosen([v["candidates"][str(n)][measure] for v in validations]) for n in sizes}}
    return {"variant": variant, "overrides": overrides, "steps": result.steps, "selected_step": result.selected_step,
            "selection": selection, "validations": validations, "unions": union_seconds,
            "train_seconds": train_seconds, "steps_seconds": steps_seconds,
            "seconds_per_step": steps_seconds / max(result.steps, 1), "documents": len(doc_ids),
            "load_before": load_before, "load_after": os.getloadavg()}


def union_sizes(dataset_dir: str, base_embeddings: str, sizes: list[int], overrides: list[str],
                params_path: str | Path = ROOT / "params.yaml") -> dict:
    """The candidate unions from the base embeddings alone (no training): documents, their share of the corpus's
    tokens at ``dense.max_seq_length`` (what an encode costs), and the val positives inside."""
    import numpy as np

    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.core.params import base_model
    from retrieval_lab.core.params_file import load_params
    from retrieval_lab.encoder import load, load_embeddings
    from retrieval_lab.training.validation import Candidates, _rank

    params = load_params(params_path, overrides)
    dataset, base = load_dataset(dataset_dir), load_embeddings(base_embeddings)
    qrels = {q: j for q, j in dataset.qrels["val"].items() if any(r > 0 for r in j.values())}
    qids = sorted(qrels)
    rows = {q: i for i, q in enumerate(base.query_ids)}
    q = base.query_embeddings[[rows[i] for i in qids]]  # the val claims as the encode stage embedded them
    doc_ids = list(base.doc_ids)
    tokenizer = load(base_model(params)[0], "cpu").tokenizer
    texts = [dataset.corpus[d].content(list(params.retrieve.fields)) for d in doc_ids]
    lengths = np.array([len(t) for t in tokenizer(texts, truncation=True,
                                                  max_length=params.dense.max_seq_length)["input_ids"]])
    positives = {d for judged in qrels.values() for d, r in judged.items() if r > 0}
    out = {"val_queries": len(qids), "documents": len(doc_ids), "val_positives": len(positives), "unions": {}}
    for n in sizes:
        candidates = Candidates(n)
        keep = candidates.fix(_rank(q, base.doc_embeddings, doc_ids, qids, n), doc_ids)
        out["unions"][str(n)] = {"documents": len(keep), "token_share": float(lengths[keep].sum() / lengths.sum()),
                                 "val_positives_inside": len(positives & set(candidates.ids))}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--negatives", required=True)
    parser.add_argument("--base-embeddings", required=True)
    parser.add_argument("--candidates", type=int, nargs="+", default=[10, 30, 100])
    parser.add_argument("--variant", default="hard")
    parser.add_argument("--set", dest="overrides", action="append", default=None, metavar="SECTION.KEY=VALUE")
    parser.add_argument("--sizes-only", action="store_true", help="only the unions' sizes, from the base embeddings")
    parser.add_argument("--json")
    args = parser.parse_args()
    RESULT.check(args)  # before any work: a bench may run for hours
    overrides = QUALITY if args.overrides is None else args.overrides
    if args.sizes_only:
        result = union_sizes(args.dataset, args.base_embeddings, args.candidates, overrides)
        print(result)
        RESULT.write(args.json, result)
        return
    result = run(args.dataset, args.negatives, args.base_embeddings,
                 overrides, args.candidates, args.variant)
    print(f"selected step: full corpus {result['selection']['full']}; "
          + ", ".join(f"top-{n} union {result['selection'][str(n)]} ({result['unions'][str(n)]['documents']} docs, "
                      f"{result['unions'][str(n)]['encode_seconds']:.0f} s)" for n in args.candidates)
          + f"; {result['seconds_per_step']:.1f} s a step; load {result['load_before']} -> {result['load_after']}")
    RESULT.write(args.json, result)


if __name__ == "__main__":
    main()
