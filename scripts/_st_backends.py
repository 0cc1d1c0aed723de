"""sentence-transformers' ONNX and OpenVINO backends as scripts/bench_encode.py's peers (its ``--peer-python``).

Those backends need optimum-onnx / optimum-intel, whose releases pin an older transformers than the project's,
so they run in an environment of their own, for instance (the race run so: lab notes, 2026-12-05):

    python3.11 -m venv .venv-st-backends
    .venv-st-backends/bin/pip install torch==2.13.0 "transformers<4.58" "huggingface-hub<1.0" sentence-transformers \
        optimum-onnx onnxruntime "optimum-intel[openvino]" datasets

This file imports nothing of retrieval_lab (that environment does not have it; _bench is stdlib only) and
writes only under the folder it is given: bench_encode hands it the verified model folder, the texts (a JSON list) and where the
embeddings go, and reads back the one JSON line it prints.

    prepare --variant V --model DIR --work DIR [--calibration F.json]
                                                 export (and quantise) once, untimed, into DIR/V
    encode  --variant V --work DIR --texts F.json --out F.npy --batch-size B --max-length L
                                                 load DIR/V in this fresh process, warm up on one batch, time one
                                                 encode of every text; docs/s and the peak RSS of the encode
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import _bench  # stdlib only: runs in the peer's environment too


def _int8_target() -> str:
    """ONNX Runtime's dynamic int8 configuration for this CPU: VNNI where it has it."""
    flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    return "avx512_vnni" if "avx512_vnni" in flags.split() else "avx2"


# variant -> (sentence-transformers backend, how it is made from the exported model, the file it loads)
VARIANTS = {
    "st-torch": ("torch", None),  # the protocol's check: runs where neither optimum package is installed
    "st-onnx": ("onnx", None),
    "st-onnx-o3": ("onnx", "O3"),  # optimum's graph fusions, the most a CPU takes (O4 is fp16, for GPUs)
    "st-onnx-int8": ("onnx", "int8"),  # dynamic int8 quantisation, weights and activations
    "st-openvino": ("openvino", None),
    # static int8 (optimum-intel's OVQuantizer, NNCF), calibrated on the texts --calibration gives (the hub's
    # default, GLUE SST-2, is out of reach here): the same texts our int8 path calibrates on
    "st-openvino-int8": ("openvino", "qint8"),
}


def _load(folder: Path, backend: str, file_name: str | None, max_length: int | None = None):
    from sentence_transformers import SentenceTransformer

    kwargs = {"model_kwargs": {"file_name": file_name}} if file_name else {}
    model = SentenceTransformer(str(folder), device="cpu", backend=backend, trust_remote_code=False, **kwargs)
    if max_length is not None and model.max_seq_length != max_length:
        raise SystemExit(f"{folder}: max_seq_length {model.max_seq_length}, the bench encodes at {max_length}")
    return model


def prepare(variant: str, model: Path, work: Path, calibration: Path | None = None) -> dict:
    backend, step = VARIANTS[variant]
    folder = work / variant
    shutil.copytree(model, folder)  # the export writes beside the model: never into the verified folder
    start = time.perf_counter()
    loaded = _load(folder, backend, None)
    file_name = None
    if backend != "torch":
        loaded.save_pretrained(str(folder))  # the exported model.onnx / openvino_model.xml
    if step == "O3":
        from sentence_transformers.backend import export_optimized_onnx_model

        export_optimized_onnx_model(loaded, "O3", str(folder))
        file_name = "onnx/model_O3.onnx"
    elif step == "int8":
        from optimum.onnxruntime import AutoQuantizationConfig
        from sentence_transformers.backend import export_dynamic_quantized_onnx_model

        target = _int8_target()
        # the file is named by optimum's weight type for the target: unsigned (quint8) on AVX2, qint8 with VNNI
        weights = getattr(AutoQuantizationConfig, target)(is_static=False).weights_dtype.name.lower()
        export_dynamic_quantized_onnx_model(loaded, target, str(folder))
        file_name = f"onnx/model_{weights}_{target}.onnx"
    elif step == "qint8":
        from optimum.intel import OVQuantizationConfig
        from sentence_transformers.backend import export_static_quantized_openvino_model

        if calibration is None:
            raise SystemExit(f"{variant}: static quantisation needs --calibration (a JSON list of texts)")
        texts = json.loads(calibration.read_text(encoding="utf-8"))
        local = work / f"{variant}-calibration"  # a dataset folder that datasets.load_dataset reads offline
        local.mkdir(exist_ok=True)
        (local / "train.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
        export_static_quantized_openvino_model(loaded, OVQuantizationConfig(num_samples=len(texts)), str(folder),
                                               dataset_name=str(local), dataset_config_name="default",
                                               dataset_split="train", column_name="text")
        file_name = "openvino/openvino_model_qint8_quantized.xml"
    if file_name and not (folder / file_name).is_file():
        raise SystemExit(f"{variant}: the export wrote no {file_name}")
    spec = {"variant": variant, "backend": backend, "file_name": file_name, "export_seconds": time.perf_counter() - start}
    (folder / "bench-variant.json").write_text(json.dumps(spec), encoding="utf-8")
    return spec


def encode(variant: str, work: Path, texts_file: Path, out: Path, batch_size: int, max_length: int) -> dict:
    import numpy as np

    folder = work / variant
    spec = json.loads((folder / "bench-variant.json").read_text(encoding="utf-8"))
    model = _load(folder, spec["backend"], spec["file_name"], max_length)
    texts = json.loads(texts_file.read_text(encoding="utf-8"))

    def run(batch):
        return model.encode(batch, batch_size=batch_size, show_progress_bar=False, convert_to_numpy=True)

    run(texts[:batch_size])  # warm-up
    base = _bench.reset_peak()  # the peak from here on: the encode's
    seconds, embeddings = _bench.timed(lambda: np.asarray(run(texts), dtype=np.float32))
    np.save(out, embeddings)
    return {"contender": variant, "seconds": seconds, "docs_per_s": len(texts) / seconds,
            "peak_mb": _bench.peak_mb(), "base_mb": base, "file_name": spec["file_name"],
            "versions": _versions()}


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("sentence-transformers", "transformers", "torch", "onnxruntime", "optimum-onnx", "openvino",
                 "optimum-intel"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--variant", choices=sorted(VARIANTS), required=True)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--calibration", type=Path, help="a JSON list of texts: static int8's calibration set")
    e = sub.add_parser("encode")
    e.add_argument("--variant", choices=sorted(VARIANTS), required=True)
    e.add_argument("--work", type=Path, required=True)
    e.add_argument("--texts", type=Path, required=True)
    e.add_argument("--out", type=Path, required=True)
    e.add_argument("--batch-size", type=int, required=True)
    e.add_argument("--max-length", type=int, required=True)
    args = parser.parse_args(argv)
    if args.command == "prepare":
        result = prepare(args.variant, args.model, args.work, args.calibration)
    else:
        result = encode(args.variant, args.work, args.texts, args.out, args.batch_size, args.max_length)
    print(json.dumps(result), file=sys.stdout, flush=True)


if __name__ == "__main__":
    main()
