"""Fine-tuning quality on SciFact: our `train` stage against the plain recipe and sentence-transformers, one run.

Three contenders, each in a fresh process, all scored by the same encoder code and
metrics engine (fp32, 256 tokens, exhaustive search) on the 300 test queries:

- **plain recipe** (issue 14's peer, written here from its description, not with our
  trainer): one pair per (train query, annotated positive), 919 pairs, batches of 32
  shuffled with the seed each epoch, 2 epochs; one hard negative per pair: ranks 4-30
  of the base model's ranking of the whole corpus, minus the query's positives and every
  test positive, drawn uniformly among the first 10 left; mean pooling, queries cut at
  64 tokens and documents (title + " " + text) at 256; softmax over the batch's 64
  documents at temperature 0.05, every document annotated relevant to the query counted
  positive (log-sum-exp over all minus log-sum-exp over the positives); AdamW with
  torch's defaults (weight decay 0.01 on every parameter), constant lr 2e-5, no warmup,
  no decay, no clipping, fp32, dropout on.
- **sentence-transformers MNRL**: the same pairs and negatives and the same optimizer
  and constant schedule, with sentence-transformers' MultipleNegativesRankingLoss
  (scale 20 = temperature 0.05; only a pair's own positive counts as positive; one
  max length, 256, for queries and documents).
- **ours**: the `train` stage's code with params.yaml plus ``--set`` overrides, which
  default to the SciFact quality command of docs/datasets.md (:data:`SCIFACT_QUALITY`), on
  negatives mined by our `mine` step with those params: variant ``hard`` (both sides).
- **ours-query**: the same for variant ``query`` (only the query encoder, against the
  base model's fp32 embeddings of every document, which are also what it is scored on).

    OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_finetune.py --run runs/scifact/dense.trec \\
        [--only recipe ours] [--json bench-results/finetune.json]

``--run`` is the base model's dense run over all SciFact queries (the pipeline's
`retrieve@dense` output on SciFact, or `retrieval-lab retrieve --retriever dense`).
About 15 minutes per contender on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import time
from pathlib import Path

import _bench

RESULT = _bench.JsonResult("scripts/bench_finetune.py", ("pairs", "rows", "ndcg10_differences"))
ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "models" / "base.lock.json"
FIELDS = ["title", "text"]
# The SciFact quality command of docs/datasets.md, as --set overrides (tests/scripts/test_bench_finetune.py checks they agree).
# The bench trains on the raw collection (no validation split), so "ours" trains those maximum epochs
# and keeps the last, like the recipes it is set against; the pipeline keeps the best on validation.
SCIFACT_QUALITY = ["train.positives_per_query=1", "train.positives_at_least=true", "train.epochs=3",
                   "train.schedule=constant", "train.warmup_ratio=0", "train.variants.query.epochs=12",
                   "train.patience=2", "dense.bf16=true", "dense.max_seq_length=512"]
# Every contender is scored at one encoded length, so that only the training differs: the command's
# dense.max_seq_length is how the pipeline encodes, not how it trains (train.max_seq_length).
SCORE_TOKENS = 256

RECIPE = {"window": (4, 30), "first": 10, "batch": 32, "epochs": 2, "lr": 2e-5, "temperature": 0.05,
          "query_tokens": 64, "doc_tokens": 256}


# ----------------------------------------------------------------------------- data


def recipe_pairs(data_dir: str, run_path: str, seed: int) -> list[tuple[str, str, str]]:
    """(query, positive, negative) per (train query, annotated positive), the recipe's miner.

    The negative: ranks 4-30 of the run (the base model's ranking of the whole corpus,
    ties in trec_eval order), minus the query's positives and every test positive, drawn
    uniformly among the first 10 left, one draw per pair from one generator.
    """
    from retrieval_lab.core.data import load_dataset, positives
    from retrieval_lab.runs import ranked, read_run

    dataset = load_dataset(data_dir, ["train", "test"])
    run = read_run(run_path)
    test_positives = {d for judged in dataset.qrels["test"].values() for d in positives(judged)}
    low, high = RECIPE["window"]
    rng = random.Random(seed)
    rows = []
    for qid in sorted(dataset.qrels["train"]):
        own = positives(dataset.qrels["train"][qid])
        window = [d for d, _ in ranked(run.get(qid, {}))][low - 1:high]
        left = [d for d in window if d not in own and d not in test_positives][:RECIPE["first"]]
        if left:
            rows += [(qid, p, rng.choice(left)) for p in sorted(own)]
    return rows


def _texts(data_dir: str, triples: list[tuple]) -> tuple[dict, dict, dict]:
    from retrieval_lab.core.data import load_dataset, positives

    dataset = load_dataset(data_dir)
    relevant: dict[str, set[str]] = {}
    for qrels in dataset.qrels.values():
        for qid, judged in qrels.items():
            relevant.setdefault(qid, set()).update(positives(judged))
    queries = {q: dataset.queries[q].text for q, _, _ in triples}
    docs = {d: dataset.corpus[d].content(FIELDS) for _, p, n in triples for d in (p, n)}
    return queries, docs, relevant


def _score(encoder, data_dir: str, documents: tuple | None = None) -> dict:
    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.core.params import DenseParams
    from retrieval_lab.training.validation import dense_means

    dataset = load_dataset(data_dir, ["test"])
    qrels = dataset.qrels["test"]
    return dense_means(encoder, qrels, {q: dataset.queries[q].text for q in qrels},
                       {d: dataset.corpus[d].content(FIELDS) for d in dataset.corpus},
                       DenseParams(batch_size=64, max_seq_length=SCORE_TOKENS, bf16=False), 100, ["nDCG@10", "R@100", "AP@10"],
                       documents)


def _batches(n: int, seed: int, epoch: int) -> list[list[int]]:
    order = list(range(n))
    random.Random(f"{seed}:epoch:{epoch}").shuffle(order)
    return [order[i:i + RECIPE["batch"]] for i in range(0, n, RECIPE["batch"])]


# ----------------------------------------------------------------------------- contenders


def recipe(args: dict) -> dict:
    import torch

    from retrieval_lab.encoder import load

    triples = args["triples"]
    queries, docs, relevant = _texts(args["data"], triples)
    torch.manual_seed(args["seed"])
    encoder = load(LOCK, "cpu")
    optimizer = torch.optim.AdamW(encoder.model.parameters(), lr=RECIPE["lr"])  # torch defaults: wd 0.01 on all

    def train() -> int:
        encoder.model.train()
        steps = 0
        for epoch in range(RECIPE["epochs"]):
            for rows in _batches(len(triples), args["seed"], epoch):
                batch = [triples[i] for i in rows]
                doc_ids = [d for _, p, n in batch for d in (p, n)]  # 2B, a positive or negative per slot
                q = encoder.embed([queries[qid] for qid, _, _ in batch], RECIPE["query_tokens"])  # B x H
                d = encoder.embed([docs[i] for i in doc_ids], RECIPE["doc_tokens"])  # 2B x H
                scores = q @ d.T / RECIPE["temperature"]  # B x 2B
                mask = torch.tensor([[i in relevant[qid] for i in doc_ids] for qid, _, _ in batch])  # B x 2B
                loss = (torch.logsumexp(scores, 1)
                        - torch.logsumexp(scores.masked_fill(~mask, float("-inf")), 1)).mean()
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                steps += 1
        encoder.model.eval()
        return steps

    seconds, steps = _bench.timed(train)
    return {"contender": "plain recipe (issue 14)", "train_seconds": seconds, "steps": steps,
            **_score(encoder, args["data"])}


def mnrl(args: dict) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from retrieval_lab.encoder import load
    from retrieval_lab.model_files import verify_lock

    queries, docs, _ = _texts(args["data"], args["triples"])
    triples = [(queries[q], docs[p], docs[n]) for q, p, n in args["triples"]]
    torch.manual_seed(args["seed"])
    model = SentenceTransformer(str(verify_lock(LOCK)), device="cpu", trust_remote_code=False)
    model.max_seq_length = RECIPE["doc_tokens"]
    loss_fn = MultipleNegativesRankingLoss(model, scale=1 / RECIPE["temperature"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=RECIPE["lr"])  # constant: no scheduler

    def train() -> int:
        model.train()
        steps = 0
        for epoch in range(RECIPE["epochs"]):
            for rows in _batches(len(triples), args["seed"], epoch):
                batch = [triples[i] for i in rows]
                features = [model.preprocess([row[k] for row in batch]) for k in range(3)]
                loss_fn(features, None).backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                steps += 1
        return steps

    seconds, steps = _bench.timed(train)
    encoder = load(LOCK, "cpu")
    encoder.model.load_state_dict(model[0].auto_model.state_dict())  # score with the same encoder code
    return {"contender": "sentence-transformers MNRL, same schedule", "train_seconds": seconds, "steps": steps,
            **_score(encoder, args["data"])}


def ours(args: dict, variant_name: str = "hard") -> dict:
    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.core.params_file import load_params
    from retrieval_lab.encoder import embed_dataset, load
    from retrieval_lab.mining import mine
    from retrieval_lab.runs import read_run
    from retrieval_lab.training import LoopOptions, TrainSpec, fine_tune, training_data, with_frozen_documents

    params = load_params(ROOT / "params.yaml", args["overrides"])
    dataset = load_dataset(args["data"])
    # a fixed number of epochs, as the recipes it is set against: the raw collection has no val split
    spec = TrainSpec.from_params(params.train, variant_name, select="last", patience=None)
    records = mine(read_run(args["run"]), dataset, params.mine, spec.negatives)
    data = training_data(dataset, records, spec.train.positives_per_query, FIELDS, spec.train.positives_at_least)
    documents = None
    if spec.query_side:  # the frozen documents: the base model's fp32 embeddings, as scored below
        base = embed_dataset(load(LOCK, "cpu"), dataset,
                             dataclasses.replace(params.dense, bf16=False, max_seq_length=SCORE_TOKENS), FIELDS)
        data = with_frozen_documents(data, base)
        documents = (base.doc_ids, base.doc_embeddings)
    encoder = load(LOCK, "cpu")
    seconds, result = _bench.timed(lambda: fine_tune(encoder, data, spec, LoopOptions({}, progress=False)))
    return {"contender": f"ours (train@{variant_name}, " + ", ".join(args["overrides"]) + ")",
            "train_seconds": seconds, "steps": result.steps, **_score(encoder, args["data"], documents)}


def ours_query(args: dict) -> dict:
    return ours(args, "query")


CONTENDERS = {"recipe": recipe, "mnrl": mnrl, "ours": ours, "ours-query": ours_query}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(_bench.SCIFACT), help="BEIR SciFact folder")
    parser.add_argument("--run", required=True, help="the base model's dense TREC run over the train queries")
    parser.add_argument("--set", dest="overrides", action="append", default=None, metavar="SECTION.KEY=VALUE",
                        help="params.yaml override for ours (default: the SciFact quality command of docs/datasets.md)")
    parser.add_argument("--only", nargs="+", choices=list(CONTENDERS), default=list(CONTENDERS))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--json")
    args = parser.parse_args()
    RESULT.check(args)  # before any work: a bench may run for hours
    overrides = SCIFACT_QUALITY if args.overrides is None else args.overrides
    triples = recipe_pairs(args.data, args.run, args.seed)
    shared = {"data": args.data, "run": args.run, "triples": triples, "seed": args.seed, "overrides": overrides}
    started = time.perf_counter()
    rows: dict[str, dict] = {}
    for name in args.only:  # the JSON is rewritten after each contender: a long run interrupted keeps its rows
        rows[name] = _bench.isolated(CONTENDERS[name], shared)
        print(f"{name}: nDCG@10 {rows[name]['nDCG@10']:.4f} ({rows[name]['train_seconds']:.0f} s training)",
              flush=True)
        differences = {f"{mine} - {peer}": rows[mine]["nDCG@10"] - rows[peer]["nDCG@10"]
                       for mine in ("ours", "ours-query") for peer in ("recipe", "mnrl")
                       if mine in rows and peer in rows}
        RESULT.write(args.json, {"pairs": len(triples), "rows": list(rows.values()),
                                      "ndcg10_differences": differences, "overrides": overrides,
                                      "args": {k: v for k, v in vars(args).items() if k != "json"}})
    print(_bench.markdown(list(rows.values()), ["contender", "steps", "train_seconds", "nDCG@10", "R@100", "AP@10"]))
    for name, value in differences.items():
        print(f"nDCG@10 {name}: {value:+.4f}")
    print(f"{len(triples)} recipe pairs, {time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
