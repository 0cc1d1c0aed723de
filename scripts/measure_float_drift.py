"""Measure how far the pipeline's results move on "another CPU", to set the reproducibility tolerance.

    PATH=.venv/bin:$PATH python scripts/measure_float_drift.py [--isa avx2] [--threads 1] [--json out.json]

Runs ``dvc repro`` in a scratch clone of HEAD with the CPU kernels restricted to an older
instruction set (PyTorch's ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS, ONEDNN_MAX_CPU_ISA,
NumPy's NPY_DISABLE_CPU_FEATURES)
and/or another thread count: the same summation-order changes that a different processor
brings. Then it reports which dvc.lock outputs changed bytes (stages in
``reproducibility.EXACT_STAGES`` must not) and the largest drift of any measure against the
committed ``metrics/<dataset>/`` files, with every measure beyond the tolerance.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _bench
import yaml

from retrieval_lab.reproducibility import EXACT_STAGES, MEASURE_TOLERANCE, drift

RESULT = _bench.JsonResult(
    "scripts/measure_float_drift.py", ("isa", "threads", "outputs_changed", "exact_outputs_changed"))
ROOT = Path(__file__).resolve().parents[1]
ISA = {  # name -> the variables that cap each library's kernels at that instruction set
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
             "NPY_DISABLE_CPU_FEATURES": "AVX512_SPR AVX512_ICL X86_V4"},
}


def lock_outputs(lock_path: Path) -> dict[str, tuple[str, str]]:
    """output path -> (stage, md5) from a dvc.lock."""
    lock = yaml.safe_load(lock_path.read_text(encoding="utf-8"))
    return {out["path"]: (stage, out["md5"]) for stage, body in lock["stages"].items()
            for out in body.get("outs", [])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--isa", choices=sorted(ISA), default="avx2")
    parser.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS for the run (default: as set)")
    parser.add_argument("--dataset", default="support")
    parser.add_argument("--json", help="write the result here")
    args = parser.parse_args()
    RESULT.check(args)  # before any work: a bench may run for hours

    env = {**os.environ, **ISA[args.isa], "DVC_NO_ANALYTICS": "1",
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    with tempfile.TemporaryDirectory(prefix="float-drift-") as tmp:
        clone = Path(tmp) / "repo"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        started = time.perf_counter()
        subprocess.run(["dvc", "repro"], cwd=clone, env=env, check=True, stdout=subprocess.DEVNULL)
        seconds = time.perf_counter() - started
        committed, produced = lock_outputs(ROOT / "dvc.lock"), lock_outputs(clone / "dvc.lock")
        changed = sorted(p for p in committed if committed[p][1] != produced.get(p, ("", ""))[1])
        exact_changed = [p for p in changed if committed[p][0] in EXACT_STAGES]
        problems, largest = drift(ROOT / "metrics" / args.dataset, clone / "metrics" / args.dataset)
    result = {"isa": args.isa, "threads": env.get("OMP_NUM_THREADS"), "seconds": round(seconds, 1),
              "outputs_changed": changed, "exact_outputs_changed": exact_changed,
              "largest_measure_drift": largest, "tolerance": MEASURE_TOLERANCE, "beyond_tolerance": problems}
    print(json.dumps(result, indent=2))
    RESULT.write(args.json, result)
    return 1 if exact_changed or problems else 0


if __name__ == "__main__":
    sys.exit(main())
