"""Fine-tuning quality on SciFact: our `train` step vs a plain sentence-transformers MNRL run, same data.

The peer is the recipe issue 6 calibrates against: 2 epochs, batch 32, temperature
0.05 (MNRL scale 20), lr 2e-5, one hard negative per (query, positive) pair drawn from
the window `mine` uses (its hard strategy: ranks 4-13 of the base run over the mining
pool, which leaves out every test positive; the query's positives count toward ranks
but are never drawn; ties in trec_eval order; `mining.triplets` draws one per pair);
AdamW without weight decay, linear decay without warmup, gradient norm clipped at 1.0
(the Hugging Face trainer's defaults). Ours trains with params.yaml's `train:` section (epochs and positives overridden as in the README's SciFact command)
on the same negatives, grouped by query, with the multi-positive loss. Each contender
runs in a fresh process; both are scored by the same encoder and metrics engine
(fp32, max length 256) on the 300 test queries. Prints nDCG@10 of both and the
difference ours - theirs. About 15 minutes per contender on 2 CPU cores.

    OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_finetune.py --run runs/scifact/dense.trec \\
        [--json bench-results/finetune.json]

``--run`` is the base dense run over all SciFact queries (the pipeline's
`retrieve@dense` output after `dvc exp run -S dataset=scifact ...`).
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import _bench

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "models" / "base.lock.json"
FIELDS = ["title", "text"]


def mined_pairs(data_dir: str, run_path: str, seed: int, range_min: int, range_max: int) -> list[tuple]:
    """(query id, positive id, negative id) per train pair: ``mine``'s hard window, one negative drawn per pair."""
    from retrieval_lab.core.config import MineParams
    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.mining import mine, triplets
    from retrieval_lab.runs import read_run

    # count = the window's width: every eligible document of ranks range_min..range_max is kept
    window = MineParams(seed=seed, count=range_max - range_min + 1, range_min=range_min, range_max=range_max)
    records = mine(read_run(run_path), load_dataset(data_dir), window, "hard")
    return triplets(records, seed)


def _score(encoder, data_dir: str) -> dict:
    from retrieval_lab.core.config import DenseParams
    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.dense_evaluation import dense_means

    dataset = load_dataset(data_dir, ["test"])
    qrels = dataset.qrels["test"]
    return dense_means(encoder, qrels, {q: dataset.queries[q].text for q in qrels},
                       {d: dataset.corpus[d].content(FIELDS) for d in dataset.corpus},
                       DenseParams(batch_size=64, max_seq_length=256, bf16=False), 100, ["nDCG@10", "R@100", "AP@10"])


def ours(args: dict) -> dict:
    import dataclasses

    from retrieval_lab.core.config import load_params
    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.encoder import load
    from retrieval_lab.training import LoopOptions, fine_tune, training_data

    dataset = load_dataset(args["data"])
    drawn: dict[str, dict[str, None]] = {}  # query -> the negatives its pairs drew, first-drawn order
    for qid, _, neg in args["triples"]:
        drawn.setdefault(qid, {})[neg] = None
    records = [{"query_id": q, "positives": sorted({p for qq, p, _ in args["triples"] if qq == q}),
                "negatives": [{"id": n} for n in negatives]} for q, negatives in sorted(drawn.items())]
    data = training_data(dataset, records, 1, FIELDS, at_least=True)
    params = dataclasses.replace(load_params(ROOT / "params.yaml").train, epochs=args["epochs"],
                                 positives_per_query=1, positives_at_least=True)
    variant = params.variants["hard"]
    encoder = load(LOCK, "cpu")
    options = LoopOptions(variant.temperature, {}, progress=False)
    seconds, result = _bench.timed(lambda: fine_tune(encoder, data, params, options))
    return {"contender": "ours (train@hard, multi-positive NCE)", "train_seconds": seconds,
            "steps": result.steps, **_score(encoder, args["data"])}


def theirs(args: dict) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.encoder import load, verify_lock

    dataset = load_dataset(args["data"], ["train", "test"])
    triples = [(dataset.queries[q].text, dataset.corpus[p].content(FIELDS), dataset.corpus[n].content(FIELDS))
               for q, p, n in args["triples"]]
    torch.manual_seed(args["seed"])
    folder = verify_lock(LOCK)
    model = SentenceTransformer(str(folder), device="cpu")
    model.max_seq_length = 256
    loss_fn = MultipleNegativesRankingLoss(model, scale=20.0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.0)
    batch = 32
    per_epoch = -(-len(triples) // batch)
    total = args["epochs"] * per_epoch
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: max(0.0, (total - step) / total))

    def train() -> int:
        model.train()
        steps = 0
        for epoch in range(args["epochs"]):
            order = list(range(len(triples)))
            random.Random(f"{args['seed']}:epoch:{epoch}").shuffle(order)
            for start in range(0, len(order), batch):
                rows = [triples[i] for i in order[start:start + batch]]
                features = [model.preprocess([row[k] for row in rows]) for k in range(3)]
                loss_fn(features, None).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                schedule.step()
                optimizer.zero_grad(set_to_none=True)
                steps += 1
        return steps

    seconds, steps = _bench.timed(train)
    encoder = load(LOCK, "cpu")
    encoder.model.load_state_dict(model[0].auto_model.state_dict())  # score with the same encoder code
    return {"contender": "sentence-transformers MNRL (issue 6 recipe)", "train_seconds": seconds,
            "steps": steps, **_score(encoder, args["data"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(_bench.SCIFACT), help="BEIR SciFact folder")
    parser.add_argument("--run", required=True, help="base dense TREC run over the train queries")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--json")
    args = parser.parse_args()
    triples = mined_pairs(args.data, args.run, args.seed, 4, 13)
    shared = {"data": args.data, "triples": triples, "epochs": args.epochs, "seed": args.seed}
    started = time.perf_counter()
    rows = [_bench.isolated(theirs, shared), _bench.isolated(ours, shared)]
    difference = rows[1]["nDCG@10"] - rows[0]["nDCG@10"]
    print(_bench.markdown(rows, ["contender", "steps", "train_seconds", "nDCG@10", "R@100", "AP@10"]))
    print(f"nDCG@10 ours - sentence-transformers: {difference:+.4f} ({len(triples)} train pairs, "
          f"{time.perf_counter() - started:.0f} s in all)")
    _bench.write_json(args.json, {"pairs": len(triples), "rows": rows, "ndcg10_difference": difference,
                                  "args": {k: v for k, v in vars(args).items() if k != "json"}})


if __name__ == "__main__":
    main()
