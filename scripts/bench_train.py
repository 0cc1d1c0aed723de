"""One training step at 32 queries with mined negatives: ours vs sentence-transformers' MultipleNegativesRankingLoss.

Same model folder (the verified lock), batch (32 SciFact train queries, one positive
and one negative each), max length, temperature (MNRL scale = 1 / temperature),
AdamW; each round runs each contender in a fresh process (a warm-up step, then one
timed step: forward, loss, backward, optimizer step, tokenisation included on both
sides), alternating the order; each keeps its fastest of --repeats rounds. Prints
the time ratio ours / theirs (goal <= 1.1) and the peak memory (CUDA: max
allocated; CPU: peak RSS over the step).

Negatives come from --negatives (a `mine` output) or, without it, are drawn from
the corpus with --seed: the step cost does not depend on how they were mined.

    OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_train.py [--device auto] [--json out.json]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import _bench

RESULT = _bench.JsonResult("scripts/bench_train.py", ("rows", "ratio", "goal", "args"))
LOCK = Path(__file__).resolve().parents[1] / "models" / "base.lock.json"
GOAL = 1.1  # time ratio ours / sentence-transformers


def _batch(data_dir: str, negatives: str | None, size: int, seed: int):
    """32 (query, positive, negative) triples as a TrainingData + its batch of examples."""
    from retrieval_lab.core.data import load_dataset, positives
    from retrieval_lab.mining import annotated_positives
    from retrieval_lab.negatives import read_negatives
    from retrieval_lab.training import TrainingData
    from retrieval_lab.training.batching import Example

    dataset = load_dataset(data_dir, ["train"])
    rng = random.Random(seed)
    mined = {r.query_id: [n.id for n in r.negatives] for r in read_negatives(negatives)} if negatives else {}
    corpus = sorted(dataset.corpus)
    examples = []
    for qid in sorted(dataset.qrels["train"])[:size]:
        positive = min(positives(dataset.qrels["train"][qid]))
        negative = (mined.get(qid) or [rng.choice([d for d in corpus if d != positive])])[0]
        examples.append(Example(qid, (positive,), (negative,)))
    texts = {d: dataset.corpus[d].content(["title", "text"]) for e in examples for d in (*e.positives, *e.negatives)}
    data = TrainingData(examples, annotated_positives(dataset), {e.query_id: dataset.queries[e.query_id].text
                                                                 for e in examples}, texts)
    return data


def ours(args: dict) -> dict:
    import torch

    from retrieval_lab.core.params import TrainParams, TrainVariant
    from retrieval_lab.encoder import load
    from retrieval_lab.losses import multi_positive_nce
    from retrieval_lab.training import TrainSpec, train_step
    from retrieval_lab.training.batching import make_batch

    data = _batch(args["data"], args["negatives"], args["batch"], args["seed"])
    torch.manual_seed(0)
    encoder = load(LOCK, args["device"])
    encoder.model.train()
    optimizer = torch.optim.AdamW(encoder.model.parameters(), lr=2e-5)
    batch = make_batch(data.examples, data.relevant)
    spec = TrainSpec("bench", TrainVariant("hard", args["temperature"]), TrainParams(max_seq_length=args["max_length"]),
                     multi_positive_nce)

    def step():
        loss = train_step(encoder, batch, data, spec)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        _sync(encoder.device)
        return loss.item()

    return _measure("ours", step, encoder.device)


def theirs(args: dict) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from retrieval_lab.encoder import resolve_device
    from retrieval_lab.model_files import verify_lock

    data = _batch(args["data"], args["negatives"], args["batch"], args["seed"])
    torch.manual_seed(0)
    device = resolve_device(args["device"])
    model = SentenceTransformer(str(verify_lock(LOCK)), device=str(device), trust_remote_code=False)
    model.max_seq_length = args["max_length"]
    model.train()
    loss_fn = MultipleNegativesRankingLoss(model, scale=1.0 / args["temperature"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    columns = [[data.query_texts[e.query_id] for e in data.examples],
               [data.doc_texts[e.positives[0]] for e in data.examples],
               [data.doc_texts[e.negatives[0]] for e in data.examples]]

    def step():
        features = [{k: v.to(device) if isinstance(v, torch.Tensor) else v  # preprocess also returns strings
                     for k, v in model.preprocess(texts).items()} for texts in columns]
        with (torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else _null()):
            loss = loss_fn(features, None)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        _sync(device)
        return loss.item()

    return _measure("sentence-transformers MNRL", step, device)


def _null():
    import contextlib

    return contextlib.nullcontext()


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def _measure(name: str, step, device) -> dict:
    import torch

    step()  # warm-up: allocator, kernels
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    base = _bench.reset_peak()
    seconds, loss = _bench.timed(step)
    peak = (torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else _bench.peak_mb() - base)
    return {"contender": name, "device": str(device), "seconds": seconds, "loss": loss,
            "peak_mb": peak, "peak_kind": "CUDA max allocated" if device.type == "cuda" else "RSS over the step"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(_bench.SCIFACT), help="BEIR folder with qrels/train.tsv (SciFact)")
    parser.add_argument("--negatives", help="negatives.jsonl from `mine` (default: seeded random negatives)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=0.05)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--repeats", type=int, default=3, help="rounds (fresh processes, alternating order)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results here")
    ns = parser.parse_args()
    RESULT.check(ns)  # before any work: a bench may run for hours
    from retrieval_lab.core.params import DenseParams

    DenseParams(device=ns.device)  # checked as params.yaml's would be
    args = {k: getattr(ns, k) for k in ("data", "negatives", "batch", "max_length", "temperature", "device", "seed")}
    rows = _bench.compete([ours, theirs], (args,), ns.repeats)
    ratio = rows[0]["seconds"] / rows[1]["seconds"]
    print(_bench.markdown(rows, ["contender", "device", "seconds", "rounds", "loss", "peak_mb", "peak_kind"]))
    print(f"time ratio ours / sentence-transformers: {ratio:.3f} "
          f"(goal <= {GOAL}: {'met' if ratio <= GOAL else 'NOT met'})")
    RESULT.write(ns.json, {"rows": rows, "ratio": ratio, "goal": GOAL, "args": args})


if __name__ == "__main__":
    main()
