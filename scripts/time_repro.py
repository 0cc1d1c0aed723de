"""Run a DVC command (default ``dvc repro``) and print where the time goes, stage by stage.

    PATH=.venv/bin:$PATH python scripts/time_repro.py [--json timings.json] [-- dvc exp run -S dataset=scifact]

Stage boundaries are read from DVC's own "Running stage 'X'" lines as they stream; the
output of the command is passed through unchanged.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time

import _bench

RESULT = _bench.JsonResult("scripts/time_repro.py", ("command", "total_seconds", "stages", "returncode"))
STAGE = re.compile(r"Running stage '([^']+)'")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write {stage: seconds, ...} here")
    parser.add_argument("command", nargs="*", default=["dvc", "repro"])
    args = parser.parse_args()
    RESULT.check(args)  # before any work: a bench may run for hours
    start = current_start = time.perf_counter()
    current, seconds = None, {}
    proc = subprocess.Popen(args.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    for line in proc.stdout:
        sys.stdout.write(line)
        match = STAGE.search(line)
        if match:
            now = time.perf_counter()
            if current:
                seconds[current] = now - current_start
            current, current_start = match.group(1), now
    rc = proc.wait()
    end = time.perf_counter()
    if current:
        seconds[current] = end - current_start
    total = end - start
    print(f"\nwhere the time went ({total:.0f} s in all):")
    for stage, s in sorted(seconds.items(), key=lambda kv: -kv[1]):
        print(f"  {stage:32s} {s:8.1f} s  {s / total:6.1%}")
    RESULT.write(args.json, {"command": args.command, "total_seconds": total, "stages": seconds, "returncode": rc})
    return rc


if __name__ == "__main__":
    sys.exit(main())
