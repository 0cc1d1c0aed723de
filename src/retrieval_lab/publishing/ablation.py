"""Gather an ablation (one DVC experiment per lever) into one folder: each lever's validation curve, and its test
measure against the base model overall and on seen and unseen queries, judged as one family.

    .venv/bin/python scripts/ablation_table.py --repo CLONE --output bench-results/scifact-ablation \
        none=lever-none bf16=lever-bf16 random=lever-random:dense-ft-random ...

Each lever is NAME=EXPERIMENT[:RUN] (RUN: the fine-tuned run, default --run); the first lever is the reference
whose params the others' changes are listed against. Every experiment is read without checking it out, as
``retrieval-lab table`` reads them: params.yaml, the runs' per_query.json (through the DVC cache) and the
training's dvclive validation curve. Writes the folder --output whole (all its files or none; it replaces only
a folder this script wrote, or an empty one, and refuses before reading any experiment otherwise):

- ``levers.json``: each lever's experiment and commit, the params that differ from the reference's, the
  validation values (one per validation: the untrained model, then each epoch) and the step of the weights kept;
- ``compare.json`` and ``compare.md``: ``retrieval_lab.comparison.compare`` over (baseline, lever) pairs, one
  family across levers and strata (Bonferroni), under this repository's ``evaluate`` params.

Every lever's experiment must hold the baseline run with the same per-query values (one base model, one
encoding), or the script refuses. ``scripts/bench_report.py --scifact-ablation FOLDER`` renders the folder.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import tempfile
from pathlib import Path

from retrieval_lab.comparison import compare, per_query_measures, to_markdown
from retrieval_lab.core.atomic import atomic_path, check_replaceable, write_json, write_text
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params_file import load_params
from retrieval_lab.core.parse import json_loads
from retrieval_lab.experiments_table import experiment_params, open_experiment, read_experiment_file
from retrieval_lab.publishing import REPO as ROOT

FT_PREFIX = "dense-ft-"  # a fine-tuned run's name: dense-ft-<train variant>


def parse_lever(spec: str, default_run: str) -> tuple[str, str, str]:
    """``NAME=EXPERIMENT[:RUN]`` -> (name, experiment, run)."""
    name, sep, rest = spec.partition("=")
    experiment, _, run = rest.partition(":")
    if not sep or not name or not experiment:
        raise InputError(f"lever {spec!r}: expected NAME=EXPERIMENT[:RUN]")
    run = run or default_run
    if not run.startswith(FT_PREFIX):
        raise InputError(f"lever {spec!r}: {run!r} is no fine-tuned run ({FT_PREFIX}<variant>)")
    return name, experiment, run


def _curve(text: str, source: str, measure: str) -> list[list[float]]:
    """dvclive's ``step<TAB>value`` rows as [[step, value], ...]."""
    rows = list(csv.DictReader(io.StringIO(text), delimiter="\t"))
    try:
        return [[int(r["step"]), float(r[measure])] for r in rows]
    except (KeyError, TypeError, ValueError):
        raise InputError(f"not a dvclive curve of {measure}", source) from None


def gather(repo: Path, levers: list[tuple[str, str, str]], baseline: str) -> tuple[list[dict], dict[str, str]]:
    """Each lever's record, and run name -> per_query.json text (the baseline's and every lever's)."""
    records, texts = [], {}
    for name, spec, run in levers:
        experiment, commit, _, reader = open_experiment(repo, spec)
        params = experiment_params(reader, experiment)
        dataset, measure = params.get("dataset"), params.get("train.select_measure", "nDCG@10")
        if not isinstance(dataset, str):
            raise InputError(f"experiment {experiment!r}: params.yaml names no dataset", "params.yaml",
                             field="dataset")
        variant = run.removeprefix(FT_PREFIX)
        live = f"dvclive/{dataset}/{variant}"
        curve = _curve(read_experiment_file(reader, f"{live}/plots/metrics/val/{measure}.tsv", experiment),
                       f"{experiment}:{live}", measure)
        try:
            selected = json_loads(read_experiment_file(reader, f"{live}/metrics.json", experiment),
                                  f"{experiment}:{live}/metrics.json")["selected"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise InputError("not a training's dvclive metrics (no 'selected')",
                             f"{experiment}:{live}/metrics.json") from None
        base_path = f"reports/{dataset}/{baseline}/per_query.json"
        base_text = read_experiment_file(reader, base_path, experiment)
        base_values = {q: e.get("measures") for q, e in
                       per_query_measures(base_text, f"{experiment}:{base_path}").items()}
        if baseline not in texts:
            texts[baseline], reference_values = base_text, base_values
        elif base_values != reference_values:
            raise InputError(f"lever {name!r}: its {baseline} run differs from the first lever's: the levers "
                             "must share one baseline", f"{experiment}:reports/{dataset}/{baseline}/per_query.json")
        texts[name] = read_experiment_file(reader, f"reports/{dataset}/{run}/per_query.json", experiment)
        records.append({"name": name, "experiment": experiment, "commit": commit, "run": run,
                        "params": params, "validation": curve, "measure": measure,
                        "selected_step": selected.get("step")})
    reference = records[0]["params"]
    for record in records:
        params = record.pop("params")
        record["changes"] = {k: params.get(k) for k in sorted(set(params) | set(reference))
                             if params.get(k) != reference.get(k)}
    return records, texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("levers", nargs="+", metavar="NAME=EXPERIMENT[:RUN]")
    parser.add_argument("--repo", required=True, help="the repository holding the experiments")
    parser.add_argument("--output", required=True, help="the folder to write (levers.json, compare.json, compare.md)")
    parser.add_argument("--run", default="dense-ft-hard", help="the fine-tuned run of a lever without :RUN")
    parser.add_argument("--baseline", default="dense", help="the run every lever is compared with")
    args = parser.parse_args(argv)
    try:
        levers = [parse_lever(spec, args.run) for spec in args.levers]
        names = [name for name, _, _ in levers]
        if len(set(names)) < len(names) or args.baseline in names:
            raise InputError(f"lever names must be unique and differ from the baseline {args.baseline!r}")
        check_replaceable(args.output, is_dir=True, field="--output")  # before reading any experiment
        records, texts = gather(Path(args.repo), levers, args.baseline)
        params = load_params(ROOT / "params.yaml")
        ev = params.evaluate
        with tempfile.TemporaryDirectory() as tmp:
            for run, text in texts.items():
                (Path(tmp) / run).mkdir()
                (Path(tmp) / run / "per_query.json").write_text(text, encoding="utf-8")
            result = compare(tmp, [[args.baseline, n] for n in names], params.compare.measure, ev.ci_level,
                             ev.permutations, ev.seed)
        # one folder output, renamed into place whole: all three files or none, and it replaces only a
        # folder this script wrote (one holding the output marker) or an empty one
        with atomic_path(args.output, is_dir=True) as folder:
            write_json(folder / "levers.json", {"baseline": args.baseline, "levers": records})
            write_json(folder / "compare.json", result.to_json())
            write_text(folder / "compare.md", to_markdown(result))
    except (InputError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}/levers.json, compare.json, compare.md ({len(records)} levers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
