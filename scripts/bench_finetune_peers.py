"""Fine-tuning on equal footing: our `train` stage against sentence-transformers' trainer, seeds, one machine.

Every contender trains on the pipeline's own inputs: the prepared dataset (SciFact: 688
training claims, 121 validation claims carved by `prepare`), the mined hard negatives of
`mine@hard` and the base model's embeddings of `encode@dense`; every contender keeps the weights
of its best validation on `train.select_measure` (the untrained model a candidate too), measured by
the same validator as our `train` stage (:func:`retrieval_lab.training.validator`, with params.yaml
plus ``--set``), and its final embeddings are made as the stage makes them (`dense.*`).

- **ours-hard**, **ours-query**: :func:`retrieval_lab.training.run_training`, the `train@hard` and
  `train@query` stages as the pipeline runs them.
- **st-mnrl**: ``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss`` at their
  documented defaults (batch 8, lr 5e-5, 3 epochs, linear decay, no warmup, fp32, scale 20), one row
  (claim, positive, mined negative) per annotated positive; validated after every epoch.
- **st-cmnrl**: the same with ``CachedMultipleNegativesRankingLoss`` (its point: a large batch in
  little memory) at batch 128, mini-batches of 32.
- **st-mnrl-tuned**: st-mnrl with the learning rate chosen on validation too: the runs at
  ``--tuned-lrs`` (each keeping its best epoch), the best of them kept; its time is all of them.
- **st-backend**: the product's ``train@hard`` with ``train.backend: sentence-transformers``
  (:mod:`retrieval_lab.training.st_trainer`) at st-mnrl's settings (batch, lr, epochs as ``--st-*``,
  linear decay, no warmup, no weight decay, clipping at 1.0): what a user of the pipeline gets from that
  choice, compared as a peer.

Each (contender, seed) runs in a fresh process, which never opens the test qrels (`prepare` keeps
them apart, in the held-out folder): it writes a run of every query at depth 100. The test qrels are read once, here, after all of them. Reported: test nDCG@10
and R@100 on all / seen / unseen claims (mean and sample sd over the seeds), paired comparisons
(the seed-mean of each query) of each sentence-transformers contender against each of ours, one
family with simultaneous intervals (:func:`retrieval_lab.comparison.compare_family`), wall time
(training, validations and the final encode) and the process's peak RSS. Ours runs as the stage runs, with
glibc keeping freed memory for reuse (`retrieval_lab.core.memory`, which every command sets); the peers on
glibc's defaults, as sentence-transformers runs (parts made before ours did so do not merge with later ones).

    OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_finetune_peers.py --dataset data/prepared/scifact \\
        --negatives data/mined/scifact/hard/negatives.jsonl --base-embeddings data/embeddings/dense/scifact \\
        --test-qrels data/heldout/scifact/qrels/test.tsv --seeds 42 43 44 --json bench-results/finetune-peers.json \\
        [--set KEY=VALUE ...] [--only ...]

``--set`` defaults to the SciFact quality command of docs/datasets.md (:data:`QUALITY`). ``--json`` is
rewritten after each (contender, seed), so an interrupted bench keeps what finished. When st-mnrl runs
before st-mnrl-tuned at a seed, the tuned one takes st-mnrl's run as its candidate at st-mnrl's rate
(the same training) instead of training it again; its time still counts it. ``--reuse PART.json`` does the same
with the st-mnrl rows of earlier finished parts (same settings and CPU): only their validation reaches the
training process; if one wins, its test values are the part's. A part run with ``--only st-mnrl --st-lr RATE``
at another of ``--tuned-lrs`` is that rate's candidate: the tuned contender's trainings (hours on a CPU) can run
one part at a time and end in a run that trains nothing. Its time then sums other sessions' hosts, so the goal's
time half is not judged against it (:func:`_goal`).

The grid (5 contenders x 3 seeds, hours on a CPU) can be run in parts, each with its own ``--only`` /
``--seeds`` and ``--json``, and merged: each part's rows keep their per-query test values, from which
``--merge`` makes the summary and the paired family anew (same settings, test claims and CPU model
required, no (contender, seed) twice):

    .venv/bin/python scripts/bench_finetune_peers.py --merge part1.json part2.json --json bench-results/finetune-peers.json
"""

from __future__ import annotations

import argparse
import copy
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _bench

RESULT = _bench.JsonResult("scripts/bench_finetune_peers.py", ("overrides", "st", "machine", "rows"))
ROOT = Path(__file__).resolve().parents[1]
# the SciFact quality command's --set (docs/datasets.md; tests/scripts/test_bench_finetune_peers.py checks it)
QUALITY = ["train.positives_per_query=1", "train.positives_at_least=true", "train.epochs=3",
           "train.schedule=constant", "train.warmup_ratio=0", "train.variants.query.epochs=12",
           "train.patience=2", "dense.bf16=true", "dense.max_seq_length=512"]
ST_DEFAULTS = {"batch": 8, "lr": 5e-5, "epochs": 3}  # SentenceTransformerTrainingArguments' (transformers') defaults
CMNRL = {"batch": 128, "mini_batch": 32}
TUNED_LRS = [1e-5, 2e-5, 5e-5]
MEASURES = ["nDCG@10", "R@100"]
DEPTH = 100
OURS = ("ours-hard", "ours-query")


# ----------------------------------------------------------------------------- one contender, one seed


# st-backend: sentence-transformers' trainer behind our train stage, at its documented defaults (ST_DEFAULTS)
ST_BACKEND = ["train.backend=sentence-transformers", "train.schedule=linear", "train.warmup_ratio=0",
              "train.weight_decay=0", "train.max_grad_norm=1.0"]


def _params(args: dict, seed: int, extra: list[str] = ()):
    from retrieval_lab.core.params_file import load_params

    return load_params(args["params"], [*args["overrides"], *extra, f"train.seed={seed}"])


def _st_backend(args: dict) -> list[str]:
    """st-backend's settings after the bench's overrides (a max_steps there still bounds it)."""
    return [*ST_BACKEND, f"train.batch_size={args['st_batch']}", f"train.lr={args['st_lr']}",
            f"train.epochs={args['st_epochs']}"]


def _write_run(encoder_or_embeddings, path: Path) -> None:
    """Every query's top ``DEPTH`` documents by dot product, written as a TREC run."""
    from retrieval_lab.runs import write_run
    from retrieval_lab.training.validation import _rank

    e = encoder_or_embeddings
    run = _rank(e.query_embeddings, e.doc_embeddings, list(e.doc_ids), list(e.query_ids), DEPTH)
    write_run(path, run, "bench")


def ours(args: dict, name: str, seed: int) -> dict:
    from retrieval_lab.core.memory import keep_freed_memory
    from retrieval_lab.encoder import load_embeddings
    from retrieval_lab.training import run_training

    params = _params(args, seed, _st_backend(args) if name == "st-backend" else [])
    out = Path(args["workdir"]) / f"{name}-s{seed}"
    variant = "hard" if name == "st-backend" else name.removeprefix("ours-")
    # as the train stage runs: every command has glibc keep freed memory for reuse (cli.main); the peers run as
    # sentence-transformers runs, on glibc's defaults (each contender is a fresh process)
    keep_freed_memory()
    base = _bench.reset_peak()
    started = time.perf_counter()
    result = run_training(params, args["dataset"], args["negatives"], variant, out / "model", out / "embeddings",
                          out / "live", base_embeddings=args["base_embeddings"], progress=False)
    seconds = time.perf_counter() - started
    _write_run(load_embeddings(out / "embeddings"), out / "run.trec")
    return {"contender": name, "seed": seed, "seconds": seconds, "peak_mb": _bench.peak_mb(), "base_mb": base,
            "steps": result.steps, "selected_step": result.selected_step,
            "validation": [{"step": v["step"], params.train.select_measure: v["metrics"][params.train.select_measure]}
                           for v in result.validation], "run": str(out / "run.trec")}


def _rows(dataset, negatives: str, fields: list[str]) -> list[tuple[str, str, str]]:
    """(claim, positive, negative) texts: one row per annotated positive of each training claim."""
    from retrieval_lab.negatives import read_negatives

    train = dataset.qrels["train"]
    rows = []
    for record in sorted(read_negatives(negatives), key=lambda r: r.query_id):
        if record.query_id not in train or not record.negatives:
            continue
        negative = dataset.corpus[record.negatives[0].id].content(fields)
        for positive in sorted(record.positives):
            rows.append((dataset.queries[record.query_id].text, dataset.corpus[positive].content(fields), negative))
    return rows


def _st_train(args: dict, seed: int, params, dataset, lr: float, epochs: int, batch: int, cached: bool) -> dict:
    """One SentenceTransformerTrainer run; validates before training and after every epoch, keeps the best."""
    import torch
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers import SentenceTransformerTrainingArguments as Arguments
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
        MultipleNegativesRankingLoss,
    )
    from transformers import TrainerCallback

    from retrieval_lab.core.params import base_model
    from retrieval_lab.encoder import Encoder, load, load_embeddings
    from retrieval_lab.model_files import resolve_model
    from retrieval_lab.training import improves, validator
    from retrieval_lab.training.checkpoint import weights_digest
    from retrieval_lab.training.stage import _keep_base_documents
    from retrieval_lab.training.validation import EncodedDocuments

    fields = list(params.retrieve.fields)
    rows = _rows(dataset, args["negatives"], fields)
    folder, _ = resolve_model(base_model(params)[0])
    model = SentenceTransformer(str(folder), device="cpu", trust_remote_code=False)
    model.max_seq_length = params.train.max_seq_length
    reference = load(base_model(params)[0], "cpu")  # the source record and the tokenizer our encode uses
    encoder = Encoder(model[0].auto_model, reference.tokenizer, torch.device("cpu"), reference.source)
    encoded = EncodedDocuments()
    _keep_base_documents(encoded, weights_digest(encoder.model), load_embeddings(args["base_embeddings"]), encoder,
                         dataset, fields, params)
    validate = validator(dataset, fields, params, None, encoded)
    measure = params.train.select_measure
    curve, best = [], {}

    def check(epoch: int) -> None:
        value = validate(encoder)[measure]
        curve.append({"epoch": epoch, measure: value})
        if improves(value, best, params.train.select_min_delta):  # ours' rule, margin included
            best.update(epoch=epoch, value=value,
                        state={k: v.detach().clone() for k, v in encoder.model.state_dict().items()})

    class Validate(TrainerCallback):
        def on_epoch_end(self, _args, state, control, **kwargs):
            check(round(state.epoch))

    loss = (CachedMultipleNegativesRankingLoss(model, mini_batch_size=CMNRL["mini_batch"]) if cached
            else MultipleNegativesRankingLoss(model))
    with tempfile.TemporaryDirectory() as tmp:
        arguments = Arguments(output_dir=tmp, num_train_epochs=epochs, per_device_train_batch_size=batch,
                              learning_rate=lr, seed=seed, save_strategy="no", report_to="none", use_cpu=True,
                              logging_strategy="no", disable_tqdm=True)
        train = Dataset.from_dict({"anchor": [r[0] for r in rows], "positive": [r[1] for r in rows],
                                   "negative": [r[2] for r in rows]})
        check(0)
        trainer = SentenceTransformerTrainer(model=model, args=arguments, train_dataset=train, loss=loss,
                                             callbacks=[Validate()])
        output = trainer.train()
    encoder.model.load_state_dict(best["state"])
    encoder.model.eval()
    return {"lr": lr, "epochs": epochs, "batch": batch, "selected_epoch": best["epoch"], "value": best["value"],
            "curve": curve, "steps": int(output.global_step), "encoder": encoder, "encoded": encoded}


_TRIED = ("lr", "epochs", "batch", "selected_epoch", "value", "curve", "steps", "seconds")


def st(args: dict, name: str, seed: int) -> dict:
    """One sentence-transformers contender. st-mnrl-tuned takes the candidates in ``args["reuse"][seed]`` (st-mnrl's
    run at its rate, the same seed and settings in this bench: the same training) instead of training them again;
    its time is every candidate's, the reused ones' included."""
    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.encoder import embed_dataset
    from retrieval_lab.training.checkpoint import weights_digest

    params = _params(args, seed)
    dataset = load_dataset(args["dataset"], ["train", "val"])  # the test qrels stay closed
    base = _bench.reset_peak()

    def train(lr: float, batch: int, cached: bool) -> dict:
        started = time.perf_counter()
        tried = _st_train(args, seed, params, dataset, lr, args["st_epochs"], batch, cached)
        return {**tried, "seconds": time.perf_counter() - started}

    if name == "st-mnrl-tuned":
        reused = {r["lr"]: r for r in args.get("reuse", {}).get(seed, [])}
        tried = [reused.get(lr) or train(lr, args["st_batch"], False) for lr in args["tuned_lrs"]]
        chosen = max(tried, key=lambda t: t["value"])  # the first among equals: the lowest rate
    else:
        cached = name == "st-cmnrl"
        tried = [train(args["st_lr"], CMNRL["batch"] if cached else args["st_batch"], cached)]
        chosen = tried[0]
    out = Path(args["workdir"]) / f"{name}-s{seed}"
    out.mkdir(parents=True, exist_ok=True)
    if "encoder" in chosen:
        started = time.perf_counter()
        encoder = chosen["encoder"]
        made = chosen["encoded"].get(weights_digest(encoder.model))  # the selected validation's corpus encode
        embeddings = embed_dataset(encoder, dataset, params.dense, list(params.retrieve.fields), None, made)
        encode_seconds = time.perf_counter() - started
        _write_run(embeddings, out / "run.trec")
    elif chosen.get("run"):  # a reused candidate won: its run is the one this training would encode
        encode_seconds = chosen["encode_seconds"]
        shutil.copyfile(chosen["run"], out / "run.trec")
    else:  # one from an earlier part won: its test values come from that part (main), never into this process
        encode_seconds = chosen["encode_seconds"]
        out = None
    return {"contender": name, "seed": seed, "seconds": sum(t["seconds"] for t in tried) + encode_seconds,
            "encode_seconds": encode_seconds,
            "peak_mb": max([_bench.peak_mb(), *(t["peak_mb"] for t in tried if t.get("reused_from"))]),
            "base_mb": base, "steps": sum(t["steps"] for t in tried),
            "selected": {"lr": chosen["lr"], "epoch": chosen["selected_epoch"]},
            "tried": [{**{k: t[k] for k in _TRIED}, **({"reused_from": t["reused_from"]} if t.get("reused_from") else {})}
                      for t in tried], "run": str(out / "run.trec") if out else None}


def reusable(row: dict, part: str | None = None) -> dict:
    """st-mnrl's run as a candidate of st-mnrl-tuned at the same seed (same rate, batch, epochs: the same training).
    From an earlier ``part`` (a finished bench JSON) its run is gone and its test values stay out: the candidate
    carries only what selection reads (its validation), and main takes the part's test values if it wins."""
    return {**row["tried"][0], "run": None if part else row["run"], "encode_seconds": row["encode_seconds"],
            "peak_mb": row["peak_mb"], "reused_from": f"st-mnrl ({part})" if part else "st-mnrl"}


def _from_other_part(row: dict) -> bool:
    """Whether the row's time sums a training run in another session (a candidate taken from a ``--reuse`` part)."""
    return any(t.get("reused_from", "").startswith("st-mnrl (") for t in row.get("tried", ()))


def reuse_parts(files: list[str], head: dict, seeds: list[int]) -> dict[int, list[tuple[dict, dict]]]:
    """The st-mnrl rows of earlier finished parts (``--reuse``), per seed, as (candidate, the row): each part must be
    the same bench as this run (settings, CPU; its st-mnrl rate may be any of ``--tuned-lrs``) for its training to
    be the one st-mnrl-tuned would do at that rate. One candidate per (seed, rate)."""
    import json

    from retrieval_lab.machine import describe, same_cpu

    def settings(st: dict | None) -> dict | None:  # the st-mnrl rate aside: each part trains one of the candidates
        return {k: v for k, v in st.items() if k != "lr"} if isinstance(st, dict) else st

    found: dict[int, list[tuple[dict, dict]]] = {}
    for name in files:
        data = json.loads(Path(name).read_text(encoding="utf-8"))
        if not data.get("finished"):
            raise SystemExit(f"{name}: an interrupted bench (finished: false): nothing to reuse")
        for key in ("overrides", "st", "ours_keeps_freed_memory"):
            mine, theirs = (settings(data.get(key)), settings(head[key])) if key == "st" else (data.get(key), head[key])
            if mine != theirs:
                raise SystemExit(f"{name}: field {key} differs from this run's: not the same bench")
        if not same_cpu(data["machine"], head["machine"]):  # None (a masked model name) fails closed too
            raise SystemExit(f"{name}: run on {describe(data['machine'])!r}, not on this machine's "
                             f"{describe(head['machine'])!r} (or its make unrecorded): its time is not comparable")
        for row in data["rows"]:
            if row["contender"] == "st-mnrl" and row["seed"] in seeds:
                lr = row["tried"][0]["lr"]
                if lr not in head["st"]["tuned_lrs"]:  # a candidate no selection here would read: refused, not dropped
                    raise SystemExit(f"{name}: st-mnrl seed {row['seed']} trained at lr {lr:g}, not one of "
                                     f"--tuned-lrs {' '.join(f'{x:g}' for x in head['st']['tuned_lrs'])}")
                if any(candidate["lr"] == lr for candidate, _ in found.get(row["seed"], ())):
                    raise SystemExit(f"{name}: st-mnrl seed {row['seed']} at lr {lr:g} is in an earlier --reuse "
                                     "part too")
                found.setdefault(row["seed"], []).append((reusable(row, Path(name).name), row))
    if not found:
        raise SystemExit(f"--reuse {' '.join(files)}: no st-mnrl row at seeds {seeds}: nothing to reuse")
    return found


def _provenance(name: str) -> dict:
    """A ``--reuse`` part as the result records it: its file, date, command and st-mnrl rate and runs."""
    import json

    data = json.loads(Path(name).read_text(encoding="utf-8"))
    return {"file": name, "date": data.get("date"), "args": data.get("args"), "lr": data["st"]["lr"],
            "rows": [[r["contender"], r["seed"]] for r in data["rows"]]}


def contend(args: dict, name: str, seed: int) -> dict:
    return ours(args, name, seed) if name in OURS or name == "st-backend" else st(args, name, seed)


CONTENDERS = [*OURS, "st-mnrl", "st-cmnrl", "st-mnrl-tuned", "st-backend"]


# ----------------------------------------------------------------------------- the test, read once


def score(dataset_dir: str, test_qrels: str, rows: list[dict], family_level: float, permutations: int,
          seed: int) -> dict:
    """Each (contender, seed)'s run measured on the test qrels (read once, here): its per-query values kept in the
    row (``per_query``, so runs made apart can be merged: :func:`merge`), then :func:`summarise`."""
    from retrieval_lab.core.data import load_dataset, read_qrels
    from retrieval_lab.evaluation import seen_queries
    from retrieval_lab.metrics import measure_run
    from retrieval_lab.runs import read_run

    dataset = load_dataset(dataset_dir, ["train"])
    test = read_qrels(test_qrels, dataset.queries, dataset.corpus)  # the one read of the test qrels
    seen = seen_queries(test, dataset.qrels.get("train", {}))
    strata = {"all": sorted(test), "seen": sorted(q for q in test if q in seen),
              "unseen": sorted(q for q in test if q not in seen)}
    strata = {s: qs for s, qs in strata.items() if qs}  # an empty stratum has no mean and no comparison
    for r in rows:
        if r["run"] is None:  # measured in the earlier part it was reused from: on these test claims?
            if any(sorted(r["per_query"][m]) != strata["all"] for m in MEASURES):
                raise SystemExit(f"{r['contender']} seed {r['seed']}: its reused part was measured on other test "
                                 f"claims than {test_qrels}'s")
            continue
        values = measure_run(test, read_run(r["run"]), MEASURES).per_query  # q -> measure -> value
        r["per_query"] = {m: {q: values[q][m] for q in strata["all"]} for m in MEASURES}
    return summarise(rows, strata, family_level, permutations, seed)


def summarise(rows: list[dict], strata: dict[str, list[str]], family_level: float, permutations: int,
              seed: int, sessions: dict[tuple[str, int], int] | None = None) -> dict:
    """From the rows' per-query test values: their means per stratum, each contender's over its seeds, and the
    paired family of every sentence-transformers contender against each of ours (each query's seed mean).
    ``sessions``: (contender, seed) -> the merged part that ran it (None: one run, one session); a row whose time
    sums a training of another part (``--reuse``) is a session of its own."""
    from retrieval_lab.comparison import compare_family, family_of

    sessions = dict(sessions or {(r["contender"], r["seed"]): 0 for r in rows})
    for index, r in enumerate(rows):
        if _from_other_part(r):
            sessions[(r["contender"], r["seed"])] = -1 - index

    per_query: dict[str, dict[str, dict[str, float]]] = {}  # contender -> measure -> query -> seed mean
    summary = []
    for name in dict.fromkeys(r["contender"] for r in rows):
        mine = [r for r in rows if r["contender"] == name]
        for r in mine:
            r["test"] = {s: {m: statistics.fmean(r["per_query"][m][q] for q in qs) for m in MEASURES}
                         for s, qs in strata.items()}
        per_query[name] = {m: {q: statistics.fmean(r["per_query"][m][q] for r in mine) for q in strata["all"]}
                           for m in MEASURES}
        summary.append({"contender": name, "seeds": [r["seed"] for r in mine],
                        "seconds": statistics.fmean(r["seconds"] for r in mine),
                        "peak_mb": max(r["peak_mb"] for r in mine),
                        **{f"{m} {s}": _spread([r["test"][s][m] for r in mine]) for s in strata for m in MEASURES}})
    head = {"strata": {s: len(q) for s, q in strata.items()}, "strata_queries": strata, "summary": summary}
    pairs = [(o, p, m, s) for o in OURS if o in per_query for p in per_query if p not in OURS
             for m in MEASURES for s in strata]
    if not pairs:  # a run of peers alone: their figures, nothing paired
        return {**head, "comparisons": [], "family": None, "goals": []}
    judged = compare_family([({q: per_query[o][m][q] for q in strata[s]}, {q: per_query[p][m][q] for q in strata[s]})
                             for o, p, m, s in pairs], family_level, permutations, seed)
    comparisons = [{"ours": o, "peer": p, "measure": m, "stratum": s, "queries": len(strata[s]), **row.to_json()}
                   for (o, p, m, s), row in zip(pairs, judged) if row is not None]
    family = family_of(judged, family_level, permutations, seed).to_json()
    times = {r["contender"]: r["seconds"] for r in summary}
    goals = [_goal(o, comparisons, times, sessions) for o in OURS if o in times]
    return {**head, "comparisons": comparisons, "family": family, "goals": [g for g in goals if g is not None]}


# the settings every merged piece must share: else its rows are not the same bench
_SAME = ("overrides", "st", "strata_queries", "ours_keeps_freed_memory")


def merge(pieces: list[tuple[str, dict]], family_level: float, permutations: int, seed: int) -> dict:
    """Finished bench JSONs (name, data), each a part of the (contender, seed) grid run on its own, as one result:
    the rows side by side, the summary and the family made anew from their per-query values. Refused in one line:
    a piece unfinished or without per-query values, pieces of other settings, test claims or CPU (or one that records
    only the CPU's maskable model name: machine.py), a (contender, seed) twice, contenders at different seeds (their
    seed means would be paired across other seeds)."""
    from retrieval_lab.machine import describe, same_cpu

    first_name, first = pieces[0]
    rows: list[dict] = []
    sessions: dict[tuple[str, int], int] = {}  # (contender, seed) -> its piece: each piece is one session's run
    for index, (name, data) in enumerate(pieces):
        if not data.get("finished"):
            raise SystemExit(f"{name}: an interrupted bench (finished: false): nothing scored to merge")
        if any("per_query" not in r for r in data["rows"]):
            raise SystemExit(f"{name}: rows without per-query test values (a bench made before they were kept): "
                             "run that part again")
        for key in _SAME:
            if data.get(key) != first.get(key):
                raise SystemExit(f"{name}: field {key} differs from {first_name}'s: not the same bench")
        same = same_cpu(data["machine"], first["machine"])
        if same is None:  # a masked model name ("AMD EPYC") is a Zen 3 and a Zen 4 alike: fails closed
            unrecorded = name if not data["machine"].get("cpu_id") else first_name
            raise SystemExit(f"{unrecorded}: records its CPU's model name only ({describe(data['machine'])!r}), "
                             "not its make: it cannot be shown to share the other parts' CPU; run that part again")
        if not same:
            raise SystemExit(f"{name}: run on {describe(data['machine'])!r}, {first_name} on "
                             f"{describe(first['machine'])!r}: times are compared on one machine type only")
        for r in data["rows"]:
            if any((r["contender"], r["seed"]) == (o["contender"], o["seed"]) for o in rows):
                raise SystemExit(f"{name}: {r['contender']} seed {r['seed']} is in an earlier piece too")
            rows.append(copy.deepcopy(r))
            sessions[(r["contender"], r["seed"])] = index
    seeds_of = {c: sorted(r["seed"] for r in rows if r["contender"] == c) for c in {r["contender"] for r in rows}}
    if len({tuple(s) for s in seeds_of.values()}) > 1:
        listed = ", ".join(f"{c} at {s}" for c, s in sorted(seeds_of.items()))
        raise SystemExit(f"an incomplete grid: {listed}; merge when every contender has run at the same seeds")
    order = {name: i for i, name in enumerate(CONTENDERS)}
    rows.sort(key=lambda r: (r["seed"], order.get(r["contender"], len(order))))
    head = {k: first.get(k) for k in ("overrides", "st", "machine", "ours_keeps_freed_memory")}
    return {**head, "seeds": sorted({r["seed"] for r in rows}), "rows": rows,
            **summarise(rows, first["strata_queries"], family_level, permutations, seed, sessions),
            "pieces": [{"file": name, "date": data.get("date"), "args": data.get("args"),
                        "wall_seconds": data.get("wall_seconds"), "rows": [[r["contender"], r["seed"]] for r in data["rows"]],
                        **({"reused": data["reused"]} if data.get("reused") else {})}
                       for name, data in pieces], "finished": True}


def _spread(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else None,
            "values": values}


def _goal(ours_name: str, comparisons: list[dict], times: dict,
          sessions: dict[tuple[str, int], int] | None = None) -> dict | None:
    """Ours against the best sentence-transformers contender (by its test mean): the interval of peer - ours
    on nDCG@10, all claims, must lie below +0.01 (ours' lower bound above -0.01), at <= 0.8x its time.

    The time half is judged only when ours and that peer ran each seed in the same session (the same part of a
    merge): one machine of a type ran a training step 1.56x slower than another of it, 1.22x slower than itself
    an hour later (docs/lab-notes.md, 2026-12-07), more than the goal's margin; nor when the peer's time sums a
    candidate trained in another part (:func:`summarise`). Otherwise ``time_met`` is None, not judged, and the goal
    is not met."""
    rows = [c for c in comparisons if c["ours"] == ours_name and c["measure"] == "nDCG@10" and c["stratum"] == "all"]
    if not rows:
        return None
    best = max(rows, key=lambda c: c["candidate_mean"])
    low = -best["ci_high"]  # ours - peer = -(peer - ours)
    ratio = times[ours_name] / times[best["peer"]]
    seeds = [seed for contender, seed in sessions or {} if contender == ours_name]
    same_session = sessions is None or all(sessions[(ours_name, s)] == sessions.get((best["peer"], s)) for s in seeds)
    time_met = ratio <= 0.8 if same_session else None
    return {"ours": ours_name, "best_peer": best["peer"], "difference": -best["mean_difference"],
            "low": low, "high": -best["ci_low"], "time_ratio": ratio, "time_same_session": same_session,
            "quality_met": low > -0.01, "time_met": time_met, "met": low > -0.01 and time_met is True}


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> dict:
    from retrieval_lab.publishing.benchmarks import machine_info

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", help="the prepared dataset (with qrels/val.tsv)")
    parser.add_argument("--negatives", help="mine@hard's negatives.jsonl")
    parser.add_argument("--base-embeddings", help="encode@dense's embeddings folder")
    parser.add_argument("--test-qrels", help="prepare's held-out test qrels (data/heldout/.../test.tsv)")
    parser.add_argument("--params", default=str(ROOT / "params.yaml"))
    parser.add_argument("--set", dest="overrides", action="append", default=None, metavar="SECTION.KEY=VALUE",
                        help="params override (default: the SciFact quality command of docs/datasets.md)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    parser.add_argument("--only", nargs="+", choices=CONTENDERS, default=CONTENDERS)
    parser.add_argument("--st-epochs", type=int, default=ST_DEFAULTS["epochs"])
    parser.add_argument("--st-batch", type=int, default=ST_DEFAULTS["batch"])
    parser.add_argument("--st-lr", type=float, default=ST_DEFAULTS["lr"])
    parser.add_argument("--tuned-lrs", type=float, nargs="+", default=TUNED_LRS)
    parser.add_argument("--reuse", nargs="+", metavar="JSON", help="finished parts whose st-mnrl rows are "
                        "st-mnrl-tuned's candidates at their rate and seed (the same training, not run again)")
    parser.add_argument("--workdir", help="runs and models (default: a temporary folder, removed)")
    parser.add_argument("--json")
    parser.add_argument("--merge", nargs="+", metavar="JSON", help="instead of training: merge these finished bench "
                        "JSONs (parts of the contender x seed grid, each run apart on one machine type) into --json")
    ns = parser.parse_args(argv)
    from retrieval_lab.core.params_file import load_params

    for option, parts in (("--merge", ns.merge), ("--reuse", ns.reuse)):  # the parts read are never written over
        if ns.json and Path(ns.json).resolve() in {Path(f).resolve() for f in parts or ()}:
            parser.error(f"--json {ns.json} is one of the {option} parts: it would be written over")
    RESULT.check(ns)  # before any work: a bench may run for hours
    if ns.merge:
        import json

        pieces = [(f, json.loads(Path(f).read_text(encoding="utf-8"))) for f in ns.merge]
        evaluate = load_params(ns.params, pieces[0][1]["overrides"]).evaluate
        result = merge(pieces, evaluate.ci_level, evaluate.permutations, evaluate.seed)
        RESULT.write(ns.json, result)
        print(_bench.markdown(result["summary"], ["contender", "seconds", "peak_mb"]))
        return result
    missing = [f"--{k.replace('_', '-')}" for k in ("dataset", "negatives", "base_embeddings", "test_qrels")
               if getattr(ns, k) is None]
    if missing:
        parser.error(f"the following arguments are required to train: {', '.join(missing)}")
    overrides = QUALITY if ns.overrides is None else ns.overrides
    evaluate = load_params(ns.params, overrides).evaluate  # checks the overrides before any training
    keep = ns.workdir is not None
    workdir = Path(ns.workdir) if keep else Path(tempfile.mkdtemp(prefix="bench-peers-"))
    args = {"dataset": ns.dataset, "negatives": ns.negatives, "base_embeddings": ns.base_embeddings,
            "params": ns.params, "overrides": overrides, "workdir": str(workdir), "st_epochs": ns.st_epochs,
            "st_batch": ns.st_batch, "st_lr": ns.st_lr, "tuned_lrs": ns.tuned_lrs}
    head = {"overrides": overrides, "seeds": ns.seeds, "st": {"batch": ns.st_batch, "lr": ns.st_lr,
            "epochs": ns.st_epochs, "tuned_lrs": ns.tuned_lrs, "cmnrl": CMNRL}, "machine": machine_info(),
            "ours_keeps_freed_memory": True,
            "args": list(argv if argv is not None else sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d", time.gmtime())}
    earlier = reuse_parts(ns.reuse, head, ns.seeds) if ns.reuse else {}
    if ns.reuse:  # where the reused candidates were trained: the page shows those parts' commands too
        head["reused"] = [_provenance(name) for name in ns.reuse]
    args["reuse"] = {seed: [candidate for candidate, _ in found] for seed, found in earlier.items()}
    rows: list[dict] = []
    started = time.perf_counter()
    for seed in ns.seeds:  # a seed's contenders back to back: the load of other jobs falls on all alike
        for name in ns.only:
            load, speed = os.getloadavg(), _bench.host_speed()
            row = _bench.isolated(contend, args, name, seed)
            row["load_before"], row["load_after"] = load, os.getloadavg()
            row["host_speed_before"], row["host_speed_after"] = speed, _bench.host_speed()
            if row.get("run", "") is None:  # an earlier part's candidate won: its measured test values
                won = next(part_row for candidate, part_row in earlier[seed] if candidate["lr"] == row["selected"]["lr"])
                row["per_query"] = copy.deepcopy(won["per_query"])
            rows.append(row)
            if name == "st-mnrl" and ns.st_lr in ns.tuned_lrs:  # st-mnrl-tuned's candidate at this rate, trained
                kept = [c for c in args["reuse"].get(seed, []) if c["lr"] != ns.st_lr]  # the parts' other rates
                args["reuse"][seed] = [*kept, reusable(row)]
            print(f"{name} seed {seed}: {row['seconds']:.0f} s, peak {row['peak_mb']:.0f} MiB", flush=True)
            RESULT.write(ns.json, {**head, "rows": copy.deepcopy(rows), "finished": False})
    result = {**head, "rows": rows, **score(ns.dataset, ns.test_qrels, rows, evaluate.ci_level, evaluate.permutations,
                                           evaluate.seed), "wall_seconds": time.perf_counter() - started,
              "finished": True}
    for r in rows:
        r.pop("run")  # a path in the scratch folder (or None: reused)
    RESULT.write(ns.json, result)
    print(_bench.markdown(result["summary"], ["contender", "seconds", "peak_mb"]))
    for goal in result["goals"]:
        print(f"{goal['ours']} - {goal['best_peer']}: {goal['difference']:+.4f} [{goal['low']:+.4f}, "
              f"{goal['high']:+.4f}], time {goal['time_ratio']:.2f}x: {'met' if goal['met'] else 'NOT met'}")
    if not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return result


if __name__ == "__main__":
    main()
