"""The training step's CPU levers, each alone, in one process: fp32, bf16 autocast, chunk sizes, batch 64, compile.

Each lever is a full `train_step` of our trainer (tokenise, forward, loss, backward) plus the
AdamW step, on SciFact training claims (one positive and one seeded random abstract each: a
step's cost does not depend on how its negative was mined) at ``--max-length`` tokens. Every
lever has its own model copy; the levers take turns, round after round, in one process, so
that the load of other jobs on a shared machine falls on all of them alike. A round is the same
64 claims for every lever (two steps of 32, or one of 64); each lever reports the median of its
rounds after one warm-up round, as seconds per 32 claims. The load average of the machine before
and after is printed beside them.

    OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_train_levers.py --data ../shared/data/scifact \\
        [--rounds 3] [--levers fp32 bf16 ...] [--json out.json]

Levers: ``fp32`` (the untouched path), ``bf16`` (``train.bf16``: autocast, fp32 master
weights), ``bf16-chunk16`` / ``bf16-chunk64`` / ``bf16-nochunk`` (length bucketing: texts per
forward pass, grouped by token length; 32 is the encoder's default), ``bf16-batch64`` (fewer
but larger steps), ``bf16-compile`` (``torch.compile`` of the model, dynamic shapes; its first
round, with the compile, is reported apart), and each of them in fp32 (``fp32-chunk16`` ... ``fp32-compile``)
for CPUs without native bf16.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import statistics
import time
from pathlib import Path

import _bench

RESULT = _bench.JsonResult("scripts/bench_train_levers.py", ("rows", "rounds", "max_length", "threads"))
LOCK = Path(__file__).resolve().parents[1] / "models" / "base.lock.json"
LEVERS = {  # name -> (bf16, chunk, batch, compile)
    "fp32": (False, 32, 32, False),
    "bf16": (True, 32, 32, False),
    "bf16-chunk16": (True, 16, 32, False),
    "bf16-chunk64": (True, 64, 32, False),
    "bf16-nochunk": (True, 0, 32, False),
    "bf16-batch64": (True, 32, 64, False),
    "bf16-compile": (True, 32, 32, True),
    # the same levers without bf16, for CPUs without native bf16 (where autocast is emulated and refused)
    "fp32-chunk16": (False, 16, 32, False),
    "fp32-chunk64": (False, 64, 32, False),
    "fp32-nochunk": (False, 0, 32, False),
    "fp32-batch64": (False, 32, 64, False),
    "fp32-compile": (False, 32, 32, True),
}


ROUND = 64  # claims a lever trains on per round


def _data(data_dir: str, size: int, seed: int):
    """``size`` training claims, each with its first positive and a seeded random negative."""
    from retrieval_lab.core.data import load_dataset, positives
    from retrieval_lab.mining import annotated_positives
    from retrieval_lab.training import TrainingData
    from retrieval_lab.training.batching import Example

    dataset = load_dataset(data_dir, ["train"])
    rng = random.Random(seed)
    corpus = sorted(dataset.corpus)
    examples = []
    for qid in sorted(dataset.qrels["train"])[:size]:
        positive = min(positives(dataset.qrels["train"][qid]))
        examples.append(Example(qid, (positive,), (rng.choice([d for d in corpus if d != positive]),)))
    texts = {d: dataset.corpus[d].content(["title", "text"]) for e in examples for d in (*e.positives, *e.negatives)}
    return TrainingData(examples, annotated_positives(dataset),
                        {e.query_id: dataset.queries[e.query_id].text for e in examples}, texts)


class _Lever:
    def __init__(self, name: str, data, max_length: int, rounds: int):
        import torch

        from retrieval_lab import encoder as encoder_module
        from retrieval_lab.core.params import TrainParams, TrainVariant
        from retrieval_lab.losses import multi_positive_nce
        from retrieval_lab.training import TrainSpec
        from retrieval_lab.training.batching import make_batch

        self.name = name
        bf16, self.chunk, batch, compiled = LEVERS[name]
        self.encoder = encoder_module.load(LOCK, "cpu")
        self.encoder.model.train()
        if compiled:
            self.encoder.model = torch.compile(self.encoder.model, dynamic=True)
        self.optimizer = torch.optim.AdamW(self.encoder.model.parameters(), lr=2e-5)
        # every lever trains on the same claims each round (ROUND of them: two steps of 32 or one of 64), so that
        # their times differ by the lever only, not by which texts (and lengths) they drew
        self.batches = [[make_batch(data.examples[start + i:start + i + batch], data.relevant)
                         for i in range(0, ROUND, batch)]
                        for start in range(0, ROUND * (rounds + 1), ROUND)]
        self.spec = TrainSpec(name, TrainVariant("hard", 0.05),
                              TrainParams(max_seq_length=max_length, bf16=bf16), multi_positive_nce)
        self.data, self.times, self.losses, self.first = data, [], [], None
        self.encoder.embed = functools.partial(self.encoder.embed, chunk=self.chunk)  # texts per forward pass

    def step(self, index: int) -> None:
        from retrieval_lab.training import train_step

        start, losses = time.perf_counter(), []
        for batch in self.batches[index]:
            losses.append(float(train_step(self.encoder, batch, self.data, self.spec)))
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        seconds = time.perf_counter() - start
        if index == 0:
            self.first = seconds
        else:
            self.times.append(seconds / (ROUND / 32))
            self.losses.extend(losses)


def run(data_dir: str, levers: list[str], rounds: int, max_length: int, seed: int,
        glibc_defaults: bool = False) -> dict:
    import torch

    from retrieval_lab.core.memory import keep_freed_memory
    from retrieval_lab.publishing.benchmarks import machine_info

    # as the train stage runs (every command keeps freed memory, cli.main), unless asked to measure that too
    kept = False if glibc_defaults else keep_freed_memory()
    data = _data(data_dir, ROUND * (rounds + 1), seed)
    load_before = os.getloadavg()
    started = time.perf_counter()
    built = [_Lever(name, data, max_length, rounds) for name in levers]
    for index in range(rounds + 1):  # round 0: warm-up (and the compile)
        for lever in (built if index % 2 == 0 else built[::-1]):
            lever.step(index)
    rows = [{"lever": lever.name, "seconds_per_32": statistics.median(lever.times), "rounds": lever.times,
             "warm_up_seconds": lever.first, "losses": lever.losses} for lever in built]
    base = next((r["seconds_per_32"] for r in rows if r["lever"] == "fp32"), None)
    for row in rows:
        row["x_fp32"] = row["seconds_per_32"] / base if base else None
    return {"rows": rows, "rounds": rounds, "max_length": max_length, "threads": torch.get_num_threads(),
            "load_before": load_before, "load_after": os.getloadavg(),
            "wall_seconds": time.perf_counter() - started, "kept_freed_memory": kept, "machine": machine_info()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(_bench.SCIFACT))
    parser.add_argument("--levers", nargs="+", choices=list(LEVERS), default=list(LEVERS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--glibc-defaults", action="store_true",
                        help="leave glibc's malloc at its defaults (the train stage keeps freed memory for reuse)")
    parser.add_argument("--json")
    args = parser.parse_args()
    RESULT.check(args)  # before any work: a bench may run for hours
    result = run(args.data, args.levers, args.rounds, args.max_length, args.seed, args.glibc_defaults)
    print(_bench.markdown(result["rows"], ["lever", "seconds_per_32", "x_fp32", "warm_up_seconds", "rounds"]))
    print(f"freed memory kept for reuse: {result['kept_freed_memory']}; load average before {result['load_before']}, "
          f"after {result['load_after']}; {result['threads']} threads; {result['wall_seconds']:.0f} s")
    RESULT.write(args.json, {**result, "args": vars(args)})


if __name__ == "__main__":
    main()
