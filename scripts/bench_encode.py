"""Encode SciFact documents (the first --limit, title + " " + text): our encoder vs sentence-transformers.

Same verified model folder, texts, batch size and max length (256, the model's
sentence-transformers setting). Ours runs as the ``encode`` command does, with glibc keeping
freed memory for reuse (``core/memory.py``; with ``--glibc-defaults`` it does not), the peers on
glibc's defaults. Each contender runs in a fresh process per round after a one-batch warm-up;
docs/s from its fastest round, memory its process's peak RSS (base: RSS before the timed encode). Goal: ours >= 1.0x sentence-transformers' docs/s.

The race on CPU (``--bf16``) adds each side's fastest path: ours under bf16 autocast
(``dense.bf16``) against sentence-transformers with its weights in bf16
(``model_kwargs={"torch_dtype": torch.bfloat16}``) and, with ``--peer-python``, its ONNX and
OpenVINO backends (scripts/_st_backends.py: ONNX fp32, optimum's O3 fusions, dynamic int8, OpenVINO),
run by that interpreter: they need optimum-onnx / optimum-intel, whose releases pin an older
transformers than the project's, so they live in an environment of their own. Without it they are
tried here and reported as they fail to load. ``--score`` encodes the whole corpus and the test claims
with every contender and measures them (minutes each). Goal: our fastest path within 0.002 nDCG@10 of
fp32 >= 1.0x the docs/s of sentence-transformers' fastest within the same bound (its fastest regardless
of quality is shown beside). ``--runtime openvino`` / ``openvino_int8`` / ``openvino_int8_static`` race our
encoder under that ``dense.runtime`` too (the same model compiled by OpenVINO; with int8 linear layers; in int8
throughout at calibrated scales; with ``--bf16`` also at bf16 precision).

    OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_encode.py [--limit 1000] [--rounds 3] [--bf16]
        [--runtime openvino] [--runtime openvino_int8] [--runtime openvino_int8_static] [--peer-python .venv-st-backends/bin/python] [--score] [--json out.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import tempfile
from pathlib import Path

import _bench

RESULT = _bench.JsonResult("scripts/bench_encode.py", ("rows", "ours_over_st", "max_abs_diff"))
LOCK = Path(__file__).resolve().parents[1] / "models" / "base.lock.json"
MAX_LENGTH = 256
OUT = Path(tempfile.gettempdir()) / "bench_encode"  # embeddings, to check both agree
PEER_SCRIPT = Path(__file__).with_name("_st_backends.py")
GLIBC_DEFAULTS = "BENCH_GLIBC_DEFAULTS"  # set by --glibc-defaults, read in each contender's fresh process
PEER_VARIANTS = ("st-onnx", "st-onnx-o3", "st-onnx-int8", "st-openvino", "st-openvino-int8")
CALIBRATION = 300  # static int8's calibration texts: a seeded sample of the corpus (no labels), OVQuantizer's default count
NDCG_BOUND = 0.002  # the race's quality bound: |nDCG@10 - ours fp32's| on SciFact test


def _texts(data: str, limit: int) -> list[str]:
    from retrieval_lab.core.data import read_corpus

    docs = list(read_corpus(Path(data) / "corpus.jsonl").values())[:limit]
    return [doc.content(["title", "text"]) for doc in docs]


def _finish(name: str, encode, texts: list[str], batch_size: int) -> dict:
    import numpy as np

    encode(texts[:batch_size])  # warm-up
    base = _bench.reset_peak()
    seconds, emb = _bench.timed(lambda: encode(texts))
    OUT.mkdir(exist_ok=True)
    np.save(OUT / f"{name}.npy", emb)
    return {"contender": name, "seconds": seconds, "docs_per_s": len(texts) / seconds,
            "peak_mb": _bench.peak_mb(), "base_mb": base}


def _ours_encode(device: str, batch_size: int, bf16: bool, runtime: str = "torch"):
    from retrieval_lab.core.memory import keep_freed_memory
    from retrieval_lab.encoder import load

    if not os.environ.get(GLIBC_DEFAULTS):  # as the `encode` command runs (cli.main); the peers on glibc's defaults
        keep_freed_memory()
    encoder = load(LOCK, device)
    return lambda texts: encoder.encode(texts, batch_size, MAX_LENGTH, bf16, runtime)


def _st_encode(device: str, batch_size: int, bf16: bool):
    import torch
    from sentence_transformers import SentenceTransformer

    from retrieval_lab.encoder import resolve_device
    from retrieval_lab.model_files import verify_lock

    kwargs = {"model_kwargs": {"torch_dtype": torch.bfloat16}} if bf16 else {}
    model = SentenceTransformer(str(verify_lock(LOCK)), device=str(resolve_device(device)), trust_remote_code=False,
                                **kwargs)
    assert model.max_seq_length == MAX_LENGTH
    return lambda texts: model.encode(texts, batch_size=batch_size, show_progress_bar=False,
                                      convert_to_numpy=False, convert_to_tensor=True).float().cpu().numpy()


CONTENDERS = {"ours": (_ours_encode, False), "sentence-transformers": (_st_encode, False),
              "ours-bf16": (_ours_encode, True), "sentence-transformers-bf16": (_st_encode, True),
              # dense.runtime openvino (--runtime openvino): compiled in the warm-up, as `encode` compiles once
              "ours-openvino": (functools.partial(_ours_encode, runtime="openvino"), False),
              "ours-openvino-bf16": (functools.partial(_ours_encode, runtime="openvino"), True),
              "ours-openvino-int8": (functools.partial(_ours_encode, runtime="openvino_int8"), False),
              "ours-openvino-int8-bf16": (functools.partial(_ours_encode, runtime="openvino_int8"), True),
              "ours-openvino-int8-static": (functools.partial(_ours_encode, runtime="openvino_int8_static"), False),
              "ours-openvino-int8-static-bf16": (functools.partial(_ours_encode, runtime="openvino_int8_static"),
                                                 True)}


def contender(name: str, data: str, limit: int, batch_size: int, device: str) -> dict:
    make, bf16 = CONTENDERS[name]
    return _finish(name, make(device, batch_size, bf16), _texts(data, limit), batch_size)


def ours(data: str, limit: int, batch_size: int, device: str) -> dict:
    return contender("ours", data, limit, batch_size, device)


def sentence_transformers(data: str, limit: int, batch_size: int, device: str) -> dict:
    return contender("sentence-transformers", data, limit, batch_size, device)


def ours_bf16(data: str, limit: int, batch_size: int, device: str) -> dict:
    return contender("ours-bf16", data, limit, batch_size, device)


def sentence_transformers_bf16(data: str, limit: int, batch_size: int, device: str) -> dict:
    return contender("sentence-transformers-bf16", data, limit, batch_size, device)


def _peer_call(python: str, *args: str) -> dict:
    """Run scripts/_st_backends.py under ``python``; its one JSON line, or a one-line error naming why not."""
    done = subprocess.run([python, str(PEER_SCRIPT), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise RuntimeError(f"{PEER_SCRIPT.name} {args[0]} {' '.join(args[1:3])} under {python}: {why}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def calibration_texts(data: str) -> list[str]:
    """CALIBRATION corpus texts drawn with seed 0: what static int8 calibrates on (documents, never a label)."""
    import random

    from retrieval_lab.core.data import read_corpus

    docs = list(read_corpus(Path(data) / "corpus.jsonl").values())
    return [doc.content(["title", "text"]) for doc in random.Random(0).sample(docs, min(CALIBRATION, len(docs)))]


def prepare_peers(python: str, variants: list[str], data: str) -> dict[str, dict]:
    """Export (and quantise) each peer variant once, untimed, from the verified model folder."""
    import shutil

    from retrieval_lab.model_files import verify_lock

    work = OUT / "peers"
    if work.exists():
        shutil.rmtree(work)  # an earlier run's exports: this script's own folder
    work.mkdir(parents=True)
    calibration = work / "calibration.json"
    calibration.write_text(json.dumps(calibration_texts(data)), encoding="utf-8")
    return {v: _peer_call(python, "prepare", "--variant", v, "--model", str(verify_lock(LOCK)), "--work", str(work),
                          "--calibration", str(calibration)) for v in variants}


def _peer_encoder(variant: str, python: str, batch_size: int):
    """texts -> (embeddings, the peer's row): one fresh process of the peer's environment per call."""
    import numpy as np

    def encode(texts: list[str]):
        OUT.mkdir(exist_ok=True)
        texts_file, out = OUT / f"{variant}-texts.json", OUT / f"{variant}.npy"
        texts_file.write_text(json.dumps(texts), encoding="utf-8")
        row = _peer_call(python, "encode", "--variant", variant, "--work", str(OUT / "peers"), "--texts",
                         str(texts_file), "--out", str(out), "--batch-size", str(batch_size), "--max-length",
                         str(MAX_LENGTH))
        return np.load(out), row
    return encode


def peer(variant: str, python: str, data: str, limit: int, batch_size: int, device: str) -> dict:
    """One timed encode by a peer variant (its warm-up, timing and peak taken in its own process)."""
    return _peer_encoder(variant, python, batch_size)(_texts(data, limit))[1]


def backends_tried() -> dict[str, str]:
    """sentence-transformers' other CPU backends: loaded, or the first line of why not."""
    from sentence_transformers import SentenceTransformer

    from retrieval_lab.model_files import verify_lock

    out = {}
    for backend in ("onnx", "openvino"):
        try:
            SentenceTransformer(str(verify_lock(LOCK)), device="cpu", backend=backend, trust_remote_code=False)
            out[backend] = "loaded"
        except Exception as exc:  # noqa: BLE001 - any failure to load is the finding
            out[backend] = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    return out


def score(name: str, data: str, batch_size: int, device: str, python: str | None = None) -> dict:
    """Test nDCG@10 and R@100 on SciFact: every abstract and every test claim encoded by ``name`` (a peer
    variant's under ``python``)."""
    from retrieval_lab.core.data import load_dataset
    from retrieval_lab.core.params import DenseParams
    from retrieval_lab.training.validation import dense_means

    if name in CONTENDERS:
        make, bf16 = CONTENDERS[name]
        encode = make(device, batch_size, bf16)
    else:
        by_peer = _peer_encoder(name, python, batch_size)
        encode = lambda texts: by_peer(texts)[0]

    class Wrapped:  # dense_means calls encode(texts, batch_size, max_length, bf16)
        def encode(self, texts, *_):
            return encode(list(texts))

    dataset = load_dataset(data, ["test"])
    qrels = dataset.qrels["test"]
    seconds, means = _bench.timed(lambda: dense_means(
        Wrapped(), qrels, {q: dataset.queries[q].text for q in qrels},
        {d: dataset.corpus[d].content(["title", "text"]) for d in dataset.corpus},
        DenseParams(batch_size=batch_size, max_seq_length=MAX_LENGTH), 100, ["nDCG@10", "R@100"]))
    return {"contender": name, "seconds": seconds, **means}


def main() -> None:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(_bench.SCIFACT))
    parser.add_argument("--limit", type=int, default=1000, help="documents to encode (SciFact has 5183)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cpu", help="cpu | cuda | auto")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bf16", action="store_true", help="race the bf16 paths too (CPU with native bf16)")
    parser.add_argument("--peer-python", help="an interpreter whose environment has sentence-transformers with "
                        "optimum-onnx / optimum-intel: its ONNX and OpenVINO backends join the race")
    parser.add_argument("--peer-variants", nargs="+", default=list(PEER_VARIANTS), choices=PEER_VARIANTS,
                        help="the peer's backends raced (with --peer-python)")
    parser.add_argument("--runtime", choices=["openvino", "openvino_int8", "openvino_int8_static"], action="append",
                        default=[],
                        help="race our encoder under this dense.runtime too (with --bf16: in bf16 as well); repeatable")
    parser.add_argument("--leave-out", nargs="+", default=[], choices=[n for n in CONTENDERS if "openvino" in n],
                        help="runtime contenders not raced (a precision already measured slower)")
    parser.add_argument("--score", action="store_true", help="also SciFact test nDCG@10 of each contender")
    parser.add_argument("--glibc-defaults", action="store_true",
                        help="ours on glibc's malloc defaults too (the encode command keeps freed memory for reuse)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    RESULT.check(args)  # before any work: a bench may run for hours
    from retrieval_lab.core.params import DenseParams
    from retrieval_lab.publishing.benchmarks import machine_info

    DenseParams(batch_size=args.batch_size, device=args.device)  # checked as params.yaml's would be
    if args.peer_python and args.device != "cpu":
        parser.error("--peer-python races sentence-transformers' CPU backends: it needs --device cpu")
    if args.glibc_defaults:
        os.environ[GLIBC_DEFAULTS] = "1"  # the contenders' processes start with this environment
    contenders = [ours, sentence_transformers] + ([ours_bf16, sentence_transformers_bf16] if args.bf16 else [])
    for runtime in args.runtime:  # ours-openvino, ours-openvino-int8 (and their -bf16 with --bf16)
        name = "ours-" + runtime.replace("_", "-")
        contenders += [functools.partial(contender, n) for n in [name] + ([name + "-bf16"] if args.bf16 else [])
                       if n not in args.leave_out]
    prepared = prepare_peers(args.peer_python, args.peer_variants, args.data) if args.peer_python else {}
    contenders += [functools.partial(peer, v, args.peer_python) for v in prepared]
    rows = _bench.compete(contenders, (args.data, args.limit, args.batch_size, args.device), args.rounds)
    for row in rows:
        row["x_st"] = row["docs_per_s"] / rows[1]["docs_per_s"]
        if row["contender"] in prepared:
            row["export_seconds"] = prepared[row["contender"]]["export_seconds"]
        if row["contender"] in prepared or row["contender"].startswith("ours-openvino"):
            row["max_abs_diff"] = float(np.abs(np.load(OUT / "ours.npy") - np.load(OUT / f"{row['contender']}.npy"))
                                        .max())
    diff = float(np.abs(np.load(OUT / "ours.npy") - np.load(OUT / "sentence-transformers.npy")).max())
    print(_bench.markdown(rows, ["contender", "seconds", "docs_per_s", "x_st", "peak_mb", "base_mb", "rounds"]))
    ratio = rows[0]["x_st"]
    print(f"\n{args.limit} docs, batch {args.batch_size}, device {args.device}; max |ours - st| = {diff:.1e}; "
          f"ours / st docs/s = {ratio:.2f}x (goal >= 1.0x): {'met' if ratio >= 1.0 else 'NOT met'}")
    result = {"rows": rows, "ours_over_st": ratio, "max_abs_diff": diff, "goal": 1.0, "limit": args.limit,
              "batch_size": args.batch_size, "device": args.device, "ours_keeps_freed_memory": not args.glibc_defaults,
              "machine": machine_info()}
    if args.bf16 or prepared or args.runtime:
        race = _race(rows, args)
        result["race"] = race
        print(f"fastest: ours {race['ours']} against {race['peer']}: {race['ratio']:.2f}x "
              f"({'quality ' + ('judged' if race['judged'] else 'not measured: no --score')}); "
              f"backends in this environment: {race['backends']}")
    RESULT.write(args.json, result)


def _fastest(rows: list[dict], ours_side: bool) -> list[dict]:
    return sorted((r for r in rows if r["contender"].startswith("ours") == ours_side),
                  key=lambda r: r["docs_per_s"], reverse=True)


def _race(rows: list[dict], args) -> dict:
    """Our fastest path against sentence-transformers' fastest. With --score, each side's paths are scored on
    SciFact test from the fastest down until one is within NDCG_BOUND of our fp32's nDCG@10: that one races
    (minutes per score, so the slower ones are not scored); the peer's fastest regardless is shown beside."""
    race = {"backends": _bench.isolated(backends_tried), "bound": NDCG_BOUND, "goal": 1.0, "judged": args.score}
    best = {side: _fastest(rows, side)[0] for side in (True, False)}
    if args.score:
        by_name = {row["contender"]: row for row in rows}

        def gap(name: str) -> float:
            row = by_name[name]
            if "score" not in row:
                row["score"] = _bench.isolated(score, name, args.data, args.batch_size, args.device, args.peer_python)
                row["ndcg_gap"] = row["score"]["nDCG@10"] - by_name["ours"]["score"]["nDCG@10"]
            return row["ndcg_gap"]

        gap("ours")  # the reference: fp32
        for side in (True, False):
            best[side] = next((r for r in _fastest(rows, side) if abs(gap(r["contender"])) <= NDCG_BOUND), None)
        fastest_peer = _fastest(rows, False)[0]
        race.update(peer_any=fastest_peer["contender"],
                    ratio_any=best[True]["docs_per_s"] / fastest_peer["docs_per_s"])
    ours_best, peer_best = best[True], best[False]
    race.update(ours=ours_best["contender"], peer=peer_best["contender"] if peer_best else None,
                ratio=ours_best["docs_per_s"] / peer_best["docs_per_s"] if peer_best else None)
    if args.score:
        race["met"] = race["ratio"] is not None and race["ratio"] >= race["goal"]
    return race


if __name__ == "__main__":
    main()
