"""The CUDA paths, checked in a few minutes: bf16/fp32 encoding, training and resume, FAISS on GPU, DDP.

On a CUDA machine (``--device cuda``, the default):

1. **encode** ``--docs`` SciFact abstracts on the device in fp32 and in bf16 (autocast) and
   compare each with the CPU's fp32 embedding: the smallest cosine must be >= 0.995;
2. **train** ``--steps`` steps on the device (SciFact train queries, random negatives from
   the mining pool) straight, and again stopped halfway and resumed: the loss must fall
   (mean of the last 5 steps below the first 5) and the resumed run must match the
   straight one to rounding (losses within 1e-3, parameters within 1e-3);
3. **faiss**: a GPU index (faiss-gpu) over the device's fp32 document embeddings must
   return the same top 10 for every test query as the CPU index;
4. **ddp**, with >= 2 GPUs: one global batch through two nccl processes gives the
   single process's loss and gradients (dropout off) to rounding;
5. **encode_ddp**, with >= 2 GPUs: the ``encode`` stage under ``torchrun --nproc-per-node 2``
   (each GPU a shard, rank 0 writing) gives the one-process embeddings (same ids, same
   order) within ``ENCODE_DDP_TOLERANCE`` per entry;
6. **peers**: ``--peer-steps`` steps of our trainer and of sentence-transformers'
   ``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss`` (the contenders of
   ``scripts/bench_finetune_peers.py``) on the same rows, batch 32, lr 2e-5, bf16 on CUDA: seconds
   a step of each and their ratio (ours / theirs); both must give finite losses.

A check that cannot run here (no faiss GPU build, one GPU) says so and is skipped.
``--device cpu`` runs every check on the CPU (what the test suite does at tiny sizes);
the report then says the CUDA calls were not made. Prints a short report; ``--json`` keeps it.

    .venv/bin/python scripts/check_gpu.py [--docs 2000] [--steps 30] [--peer-steps 20] [--json bench-results/gpu.json]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _bench
import numpy as np

RESULT = _bench.JsonResult("scripts/check_gpu.py", ("device", "cuda", "gpus", "torch"))
ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT / ".." / "shared" / "data" / "scifact"
LOCK = ROOT / "models" / "base.lock.json"
FIELDS = ["title", "text"]
MIN_COSINE = 0.995
RESUME_TOLERANCE = 1e-3
ENCODE_DDP_TOLERANCE = 1e-4  # fp32; other batches pad differently (gloo on the CPU: ~1e-8)


def _dataset(data: str):
    from retrieval_lab.core.data import load_dataset

    return load_dataset(data)


def check_encode(dataset, device: str, docs: int, max_length: int) -> dict:
    """Smallest cosine between each device embedding (fp32, bf16) and the CPU fp32 one."""
    from retrieval_lab.encoder import load

    texts = [dataset.corpus[d].content(FIELDS) for d in list(dataset.corpus)[:docs]]
    reference = load(LOCK, "cpu").encode(texts, 64, max_length)  # N x H, unit rows
    encoder = load(LOCK, device)
    out = {"docs": len(texts)}
    for name, bf16 in (("fp32", False), ("bf16", True)):
        started = time.perf_counter()
        emb = encoder.encode(texts, 64, max_length, bf16)  # N x H
        out[f"{name}_seconds"] = time.perf_counter() - started
        out[f"{name}_min_cosine"] = float(np.min(np.sum(emb * reference, axis=1)))
        if name == "fp32":
            out["_embeddings"] = emb
    out["passed"] = min(out["fp32_min_cosine"], out["bf16_min_cosine"]) >= MIN_COSINE
    return out


def _training_data(dataset, seed: int):
    from retrieval_lab.core.params import MineParams
    from retrieval_lab.mining import mine
    from retrieval_lab.training import training_data

    records = mine({}, dataset, MineParams(seed=seed, count=1), "random")  # random negatives need no run
    return training_data(dataset, records, 1, FIELDS, at_least=True)


def check_train(dataset, device: str, steps: int, max_length: int, workdir: Path) -> dict:
    """``steps`` steps straight, and stopped at half then resumed (training.check_resume)."""
    from retrieval_lab.core.params import TrainParams
    from retrieval_lab.encoder import load
    from retrieval_lab.training import TrainSpec, check_resume

    data = _training_data(dataset, 11)
    params = TrainParams(seed=42, max_steps=steps, batch_size=32, lr=2e-5, schedule="constant", warmup_ratio=0.0,
                         max_seq_length=max_length, positives_per_query=1, positives_at_least=True)
    spec = TrainSpec.from_params(params, "random")  # the built-in variant: random negatives, temperature 0.05
    started = time.perf_counter()
    report = check_resume(lambda: load(LOCK, device), data, spec, steps // 2, workdir)
    losses, resumed = report["straight_losses"], report["resumed_losses"]
    k = min(5, len(losses) // 2)
    loss_diff = max(abs(a - b) for a, b in zip(losses, resumed))
    return {"steps": steps, "seconds": time.perf_counter() - started,
            "first_losses": float(np.mean(losses[:k])), "last_losses": float(np.mean(losses[-k:])),
            "max_loss_diff": loss_diff, "max_param_diff": report["max_abs_param_diff"],
            "same_data_order": report["checks"]["same_data_order"],
            "passed": (np.mean(losses[-k:]) < np.mean(losses[:k]) and report["checks"]["same_data_order"]
                       and loss_diff <= RESUME_TOLERANCE and report["max_abs_param_diff"] <= RESUME_TOLERANCE)}


def check_faiss(dataset, device: str, doc_embeddings: np.ndarray, max_length: int) -> dict:
    """Top 10 of a GPU index against the CPU index, every test query."""
    import faiss

    from retrieval_lab.encoder import load

    gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
    if device.startswith("cuda") and (not hasattr(faiss, "StandardGpuResources") or gpus == 0):
        return {"skipped": "faiss has no GPU build here (pip install faiss-gpu: the [gpu] extra)"}
    queries = [dataset.queries[q].text for q in sorted(dataset.qrels.get("test", {}))]
    q = load(LOCK, device).encode(queries, 64, max_length)  # Q x H
    cpu = faiss.IndexFlatIP(doc_embeddings.shape[1])
    cpu.add(doc_embeddings)
    if device.startswith("cuda"):
        resources = faiss.StandardGpuResources()
        index = faiss.index_cpu_to_gpu(resources, 0, faiss.IndexFlatIP(doc_embeddings.shape[1]))
    else:
        index = faiss.IndexFlatIP(doc_embeddings.shape[1])  # --device cpu: the same calls on the CPU index
    index.add(doc_embeddings)
    _, expected = cpu.search(q, 10)
    _, got = index.search(q, 10)
    same = [list(a) == list(b) for a, b in zip(expected, got)]
    return {"queries": len(queries), "same_top10": int(sum(same)), "passed": all(same)}


def _ddp_worker(rank: int, world: int, port: int, data: str, out: str) -> None:
    import torch
    import torch.distributed as dist

    from retrieval_lab.distributed import Distributed

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    try:
        result = _one_batch(Distributed(rank, world), data, f"cuda:{rank}")
        if rank == 0:
            torch.save(result, out)
    finally:
        dist.destroy_process_group()


def _one_batch(dist_info, data: str, device: str) -> dict:
    """Loss and gradients of one global batch of 32 queries, dropout off (each rank would draw its own)."""
    from retrieval_lab.core.params import TrainParams, TrainVariant
    from retrieval_lab.encoder import load
    from retrieval_lab.losses import multi_positive_nce
    from retrieval_lab.training import TrainSpec, distributed_model, train_step
    from retrieval_lab.training.batching import make_batch

    training = _training_data(_dataset(data), 11)
    spec = TrainSpec("ddp", TrainVariant("random", 0.05), TrainParams(max_seq_length=128), multi_positive_nce)
    encoder = load(LOCK, device)
    encoder.model.eval()
    with distributed_model(encoder, dist_info):
        loss = train_step(encoder, make_batch(training.examples[:32], training.relevant), training, spec, dist_info)
    return {"loss": loss.item(),
            "grads": {n: p.grad.float().cpu() for n, p in encoder.model.named_parameters() if p.grad is not None}}


def check_ddp(data: str, device: str, workdir: Path) -> dict:
    import torch

    if not device.startswith("cuda") or torch.cuda.device_count() < 2:
        return {"skipped": f"{torch.cuda.device_count() if device.startswith('cuda') else 0} GPU(s): needs 2"}
    import torch.multiprocessing as mp

    from retrieval_lab.training import Distributed

    single = _one_batch(Distributed(), data, "cuda:0")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = workdir / "rank0.pt"
    mp.spawn(_ddp_worker, args=(2, port, data, str(out)), nprocs=2, join=True)
    ddp = torch.load(out, weights_only=False)
    cosines = [torch.nn.functional.cosine_similarity(g.flatten(), ddp["grads"][n].flatten(), dim=0).item()
               for n, g in single["grads"].items() if g.abs().sum() > 0]
    loss_diff = abs(ddp["loss"] - single["loss"])
    return {"loss": single["loss"], "loss_diff": loss_diff, "min_grad_cosine": min(cosines),
            "passed": loss_diff <= 1e-2 and min(cosines) >= 0.99}


def check_encode_ddp(data: str, device: str, max_length: int, workdir: Path) -> dict:
    """The ``encode`` stage on 2 GPUs (torchrun, nccl) against 1: same ids and order, entries within tolerance."""
    import torch

    if not device.startswith("cuda") or torch.cuda.device_count() < 2:
        return {"skipped": f"{torch.cuda.device_count() if device.startswith('cuda') else 0} GPU(s): needs 2"}
    from retrieval_lab.encoder import load_embeddings

    params = workdir / "defaults.yaml"
    params.write_text("# every section at its default\n", encoding="utf-8")
    encode = ["-m", "retrieval_lab.cli", "encode", "--dataset", data, "--model", str(LOCK), "--params", str(params),
              "--set", "dense.device=cuda", "--set", "dense.bf16=false", "--set", f"dense.max_seq_length={max_length}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    seconds = {}
    for name, launcher in (("one", []), ("two", ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"])):
        started = time.perf_counter()
        subprocess.run([sys.executable, *launcher, *encode, "--output", str(workdir / name)], check=True, env=env)
        seconds[name] = time.perf_counter() - started
    one, two = load_embeddings(workdir / "one"), load_embeddings(workdir / "two")
    same_ids = one.doc_ids == two.doc_ids and one.query_ids == two.query_ids
    diff = max(float(np.abs(one.doc_embeddings - two.doc_embeddings).max()),
               float(np.abs(one.query_embeddings - two.query_embeddings).max())) if same_ids else float("inf")
    return {"docs": len(one.doc_ids), "one_seconds": seconds["one"], "two_seconds": seconds["two"],
            "same_ids": same_ids, "max_abs_diff": diff, "passed": same_ids and diff <= ENCODE_DDP_TOLERANCE}


def check_peers(dataset, device: str, steps: int, max_length: int) -> dict:
    """Seconds a step of our trainer and of SentenceTransformerTrainer + MNRL, the same rows on ``device``."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers import SentenceTransformerTrainingArguments as Arguments
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from retrieval_lab.core.params import TrainParams
    from retrieval_lab.encoder import load
    from retrieval_lab.model_files import verify_lock
    from retrieval_lab.training import LoopOptions, TrainSpec, fine_tune

    data = _training_data(dataset, 11)
    params = TrainParams(seed=42, max_steps=steps, batch_size=32, lr=2e-5, schedule="constant", warmup_ratio=0.0,
                         max_seq_length=max_length, positives_per_query=1, positives_at_least=True, select="last")
    encoder = load(LOCK, device)
    result = fine_tune(encoder, data, TrainSpec.from_params(params, "random"), LoopOptions({}, progress=False))
    ours = {"steps": result.steps, "seconds_per_step": result.seconds / max(result.steps, 1),
            "last_loss": result.history[-1]["loss"]}
    rows = [(data.query_texts[e.query_id], data.doc_texts[e.positives[0]], data.doc_texts[e.negatives[0]])
            for e in data.examples]
    model = SentenceTransformer(str(verify_lock(LOCK)), device=device, trust_remote_code=False)
    model.max_seq_length = max_length
    with tempfile.TemporaryDirectory() as tmp:
        args = Arguments(output_dir=tmp, max_steps=steps, per_device_train_batch_size=32, learning_rate=2e-5,
                         lr_scheduler_type="constant", seed=42, save_strategy="no", report_to="none",
                         logging_steps=1, disable_tqdm=True, use_cpu=not device.startswith("cuda"),
                         bf16=device.startswith("cuda"))
        train = Dataset.from_dict({k: [r[i] for r in rows] for i, k in enumerate(("anchor", "positive", "negative"))})
        trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=train,
                                             loss=MultipleNegativesRankingLoss(model))
        started = time.perf_counter()
        output = trainer.train()
        seconds = time.perf_counter() - started
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    theirs = {"steps": int(output.global_step), "seconds_per_step": seconds / max(output.global_step, 1),
              "last_loss": losses[-1] if losses else float("nan")}
    finite = all(np.isfinite(x["last_loss"]) for x in (ours, theirs))
    return {"ours": ours, "sentence_transformers": theirs,
            "ratio": ours["seconds_per_step"] / theirs["seconds_per_step"], "passed": bool(finite)}


def run_checks(data: str, device: str, docs: int, steps: int, max_length: int, peer_steps: int = 20) -> dict:
    import torch

    report = {"device": device, "cuda": torch.cuda.is_available(),
              "gpus": torch.cuda.device_count() if torch.cuda.is_available() else 0,
              "gpu_name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
              "torch": torch.__version__}
    if device.startswith("cuda") and not torch.cuda.is_available():
        report["error"] = "CUDA requested but torch sees no GPU (torch.cuda.is_available() is False)"
        return report
    dataset = _dataset(data)
    with tempfile.TemporaryDirectory() as tmp:
        report["encode"] = check_encode(dataset, device, docs, max_length)
        embeddings = report["encode"].pop("_embeddings")
        report["train"] = check_train(dataset, device, steps, max_length, Path(tmp))
        report["faiss"] = check_faiss(dataset, device, embeddings, max_length)
        report["ddp"] = check_ddp(data, device, Path(tmp))
        report["encode_ddp"] = check_encode_ddp(data, device, max_length, Path(tmp))
        report["peers"] = check_peers(dataset, device, peer_steps, max_length)
    ran = [report[k] for k in ("encode", "train", "faiss", "ddp", "encode_ddp", "peers") if "skipped" not in report[k]]
    report["passed"] = all(r["passed"] for r in ran)
    return report


def format_report(report: dict) -> str:
    if "error" in report:
        return f"check_gpu: {report['error']}"
    lines = [(f"check_gpu on {report['device']} ({report['gpu_name'] or 'no GPU'}; torch {report['torch']}, "
              f"{report['gpus']} GPU(s))")]
    if not report["device"].startswith("cuda"):
        lines.append("  (--device cpu: the checks ran on the CPU; no CUDA call was made)")
    e, t, f, d, s = report["encode"], report["train"], report["faiss"], report["ddp"], report["encode_ddp"]
    lines.append(f"  encode {e['docs']} docs: min cosine to CPU fp32: fp32 {e['fp32_min_cosine']:.5f} "
                 f"({e['fp32_seconds']:.1f} s), bf16 {e['bf16_min_cosine']:.5f} ({e['bf16_seconds']:.1f} s) "
                 f"[>= {MIN_COSINE}] {'ok' if e['passed'] else 'FAILED'}")
    lines.append(f"  train {t['steps']} steps ({t['seconds']:.1f} s for both runs): loss {t['first_losses']:.4f} -> "
                 f"{t['last_losses']:.4f}; resumed vs straight: losses {t['max_loss_diff']:.2e}, parameters "
                 f"{t['max_param_diff']:.2e} [<= {RESUME_TOLERANCE}] {'ok' if t['passed'] else 'FAILED'}")
    lines.append("  faiss: " + (f"skipped: {f['skipped']}" if "skipped" in f else
                                f"{f['same_top10']}/{f['queries']} queries with the CPU index's top 10 "
                                f"{'ok' if f['passed'] else 'FAILED'}"))
    lines.append("  ddp: " + (f"skipped: {d['skipped']}" if "skipped" in d else
                              f"loss diff {d['loss_diff']:.2e}, min gradient cosine {d['min_grad_cosine']:.5f} "
                              f"{'ok' if d['passed'] else 'FAILED'}"))
    lines.append("  encode on 2 processes: " + (
        f"skipped: {s['skipped']}" if "skipped" in s else
        f"{s['docs']} docs in {s['two_seconds']:.1f} s (1 process: {s['one_seconds']:.1f} s), same ids "
        f"{s['same_ids']}, max entry diff {s['max_abs_diff']:.2e} [<= {ENCODE_DDP_TOLERANCE}] "
        f"{'ok' if s['passed'] else 'FAILED'}"))
    p = report["peers"]
    lines.append(f"  peers, {p['ours']['steps']} steps each: ours {p['ours']['seconds_per_step']:.2f} s a step, "
                 f"SentenceTransformerTrainer + MNRL {p['sentence_transformers']['seconds_per_step']:.2f} s "
                 f"({p['ratio']:.2f}x); last losses {p['ours']['last_loss']:.4f} and "
                 f"{p['sentence_transformers']['last_loss']:.4f} {'ok' if p['passed'] else 'FAILED'}")
    lines.append("passed" if report["passed"] else "FAILED")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(SCIFACT), help="BEIR SciFact folder (train and test qrels)")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (every check on the CPU)")
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--peer-steps", type=int, default=20, help="steps of each trainer in the peers check")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    RESULT.check(args)  # before any work: a bench may run for hours
    from retrieval_lab.core.errors import InputError

    try:
        report = run_checks(args.data, args.device, args.docs, args.steps, args.max_length, args.peer_steps)
    except InputError as exc:
        print(f"check_gpu: {exc}")
        return 2
    print(format_report(report))
    RESULT.write(args.json, report)
    return 0 if report.get("passed") else 1


if __name__ == "__main__":
    raise SystemExit(main())
