"""Run the bench_*.py scripts and write docs/benchmarks.md: speed against peers measured in the same run,
SciFact quality against published figures, and where the time of a full `dvc repro` goes.

    .venv/bin/python scripts/bench_report.py [--quick] [--skip-run] [--only NAME ...]
        [--results-dir bench-results] [--scifact-metrics metrics/scifact] [--timings timings.json ...]
        [--output docs/benchmarks.md]

Each benchmark runs as its own subprocess, one after the other, with the environment as it is
(OMP_NUM_THREADS included), and writes <results-dir>/<name>.json. <results-dir>/manifest.json
records each one's command, exit status, date and machine, so that --skip-run rebuilds the page
from earlier results without running anything. --quick uses each script's smallest sensible
settings (a couple of minutes in all); its figures are smoke checks, not the reference ones.
Timings JSONs come from scripts/time_repro.py.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from retrieval_lab.core.parse import json_loads
from retrieval_lab.machine import cpu
from retrieval_lab.machine import describe as describe_cpu
from retrieval_lab.publishing import REPO
from retrieval_lab.publishing import spread as seed_spread

PEER_PACKAGES = ["pytrec-eval-terrier", "bm25s", "rank-bm25", "sentence-transformers", "transformers", "faiss-cpu",
                 "tantivy"]


# ----------------------------------------------------------------------------- speed


@dataclass(frozen=True)
class Goal:
    op: str  # "<=" or ">=", on the ratio ours / peer
    value: float

    def met(self, ratio: float) -> bool:
        return ratio <= self.value if self.op == "<=" else ratio >= self.value

    def __str__(self) -> str:
        return f"{self.op} {self.value:g}x"


@dataclass(frozen=True)
class SpeedRow:
    benchmark: str
    peer: str
    ours: float  # in ``unit``, both measured in the same run
    theirs: float
    unit: str
    goal: Goal | None
    memory: tuple[float | None, float | None]  # MiB, ours / peer

    @property
    def ratio(self) -> float:
        """ours / peer in ``unit``: seconds (lower is better) or docs/s (higher is better)."""
        return self.ours / self.theirs


def _by_contender(result: dict) -> dict[str, dict]:
    return {row["contender"]: row for row in result["rows"]}


def _metrics_rows(result: dict) -> tuple[list[SpeedRow], list[str]]:
    rows = _by_contender(result)
    ours, peer = rows["ours"], rows["pytrec_eval"]
    label = f"metrics: {len(ours['means'])} measures, {result['queries']:,} queries x {result['depth']:,} docs"
    notes = [(f"values checked equal: max |ours - pytrec_eval| {result['max_abs_diff_means']:.1e} (means), "
             f"{result['max_abs_diff_per_query']:.1e} (sampled per-query values)"),
             "memory: growth of peak RSS over the RSS with the data already built"]
    return [SpeedRow(label, "pytrec_eval", ours["seconds"], peer["seconds"], "s", Goal("<=", result["goal"]),
                     (ours["peak_mb"], peer["peak_mb"]))], notes


def _growth(row: dict) -> float:
    return row["peak_mb"] - row["base_mb"]


TANTIVY_CONTENDERS = {"tantivy_en_stem": "tantivy (en_stem)", "tantivy_stop": "tantivy (our stop list)"}


def _bm25_rows(result: dict) -> tuple[list[SpeedRow], list[str]]:
    rows = _by_contender(result)
    ours = rows["ours"]
    label = "BM25 on SciFact: index 5,183 docs, 300 test queries (depth 100), write the run"
    out = [SpeedRow(label, "bm25s", ours["seconds"], rows["bm25s"]["seconds"], "s", Goal("<=", result["goal"]),
                    (_growth(ours), _growth(rows["bm25s"])))]
    tantivy_goals = result.get("tantivy_goals", {})
    for name, peer in TANTIVY_CONTENDERS.items():
        if name in rows:
            out.append(SpeedRow(label, peer, ours["seconds"], rows[name]["seconds"], "s",
                                Goal("<=", tantivy_goals["seconds"]), (_growth(ours), _growth(rows[name]))))
    if "rank_bm25" in rows:
        out.append(SpeedRow(label, "rank_bm25", ours["seconds"], rows["rank_bm25"]["seconds"], "s", None,
                            (_growth(ours), _growth(rows["rank_bm25"]))))
    notes = ["nDCG@10 of each run: " + ", ".join(f"{name} {row['nDCG@10']:.4f}" for name, row in rows.items()),
             "memory: growth of peak RSS over the RSS before the timed work (absolute peaks: "
             + ", ".join(f"{name} {row['peak_mb']:.0f} MiB" for name, row in rows.items()) + ")",
             f"fastest of {len(ours['rounds'])} round(s), each in a fresh process"
             + (", the order alternating between rounds" if tantivy_goals else "")]
    for name, peer in TANTIVY_CONTENDERS.items():
        if name in result.get("tantivy", {}):
            ratios, met = result["tantivy"][name]["ratios"], result["tantivy"][name]["met"]
            notes.append(f"ours / {peer}: time {ratios['seconds']:.2f}x (goal <= {tantivy_goals['seconds']:g}x: "
                         f"{_met(met['seconds'])}), peak memory {ratios['peak_mb']:.2f}x (goal <= "
                         f"{tantivy_goals['peak_mb']:g}x: {_met(met['peak_mb'])}), memory growth "
                         f"{ratios['added_mb']:.2f}x ({_met(met['added_mb'])})")
    if "tantivy_field_norms" in result:
        norms = result["tantivy_field_norms"]
        notes.append(
            f"where tantivy's scores part from ours: it stores each document's length in one byte, exact up to "
            f"{norms['exact_up_to']} tokens and coarser beyond (up to {norms['max_relative_length_error']:.0%} short), "
            f"so {norms['documents_whose_length_changes']:,} of the {norms['documents']:,} SciFact lengths change; "
            f"our BM25 with those lengths and the exact mean length, as tantivy scores: nDCG@10 "
            f"{norms['nDCG@10_quantised']:.4f} against {norms['nDCG@10_exact']:.4f} ("
            f"{norms['nDCG@10_quantised'] - norms['nDCG@10_exact']:+.4f}), the top 10 reordered or changed on "
            f"{norms['queries_whose_top10_changes']} of {norms['queries']} queries; the rest of tantivy's difference "
            "is its analysis (it cuts words at '_' and non-alphanumerics; en_stem keeps stopwords and drops tokens "
            "over 40 bytes) and its 32-bit float scores")
    if result.get("cpu") is not None:
        notes.append(f"every contender's process bound to one CPU (CPU {result['cpu']}): tantivy's indexing thread and "
                     "the Python thread that feeds it share that core, as ours' one thread has it alone; CPU seconds "
                     "of each fastest round (every thread): " + ", ".join(f"{name} {row['cpu_seconds']:.3f}"
                                                                        for name, row in rows.items()
                                                                        if "cpu_seconds" in row))
    if "load_average" in result:
        load = result["load_average"]
        notes.append(f"load average (1 min) {load['start'][0]:.1f} at the start, {load['end'][0]:.1f} at the end, "
                     f"on {result.get('cores', '?')} cores")
    return out, notes


def _met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _encode_rows(result: dict) -> tuple[list[SpeedRow], list[str]]:
    rows = _by_contender(result)
    ours, peer = rows["ours"], rows["sentence-transformers"]
    label = (f"encode {result['limit']:,} SciFact docs (all-MiniLM-L6-v2, batch {result['batch_size']}, "
             f"device {result['device']})")
    notes = [f"embeddings checked equal: max |ours - sentence-transformers| {result['max_abs_diff']:.1e}",
             ("memory: growth of peak RSS over the RSS before the timed encode (absolute peaks: "
             f"ours {ours['peak_mb']:.0f} MiB, sentence-transformers {peer['peak_mb']:.0f} MiB)"),
             f"fastest of {len(ours['rounds'])} round(s), each in a fresh process after a one-batch warm-up"]
    return [SpeedRow(label, "sentence-transformers", ours["docs_per_s"], peer["docs_per_s"], "docs/s",
                     Goal(">=", result["goal"]), (_growth(ours), _growth(peer)))], notes


def _train_rows(result: dict) -> tuple[list[SpeedRow], list[str]]:
    rows = _by_contender(result)
    ours, peer = rows["ours"], rows["sentence-transformers MNRL"]
    args = result["args"]
    label = (f"one training step: {args['batch']} queries x (1 positive + 1 negative), max length "
             f"{args['max_length']}, device {ours['device']}")
    notes = [f"losses of the timed step: ours {ours['loss']:.4f}, sentence-transformers {peer['loss']:.4f}",
             f"memory: {ours['peak_kind']}",
             f"fastest of {len(ours['rounds'])} round(s), each in a fresh process after a warm-up step"]
    return [SpeedRow(label, "sentence-transformers MultipleNegativesRankingLoss", ours["seconds"],
                     peer["seconds"], "s", Goal("<=", result["goal"]), (ours["peak_mb"], peer["peak_mb"]))], notes


@dataclass(frozen=True)
class Bench:
    name: str  # <results-dir>/<name>.json
    script: str
    title: str
    full: tuple[str, ...]  # the reference settings (the script's defaults unless given)
    quick: tuple[str, ...]  # smallest sensible settings
    rows: Callable[[dict], tuple[list[SpeedRow], list[str]]]


BENCHES = [
    Bench("metrics", "bench_metrics.py", "metrics vs pytrec_eval", (), ("--queries", "1000"),
          _metrics_rows),
    Bench("bm25", "bench_bm25.py", "BM25 vs bm25s, tantivy and rank_bm25", (), ("--rounds", "1"), _bm25_rows),
    Bench("encode", "bench_encode.py", "encoding vs sentence-transformers", (), ("--limit", "128", "--rounds", "1"),
          _encode_rows),
    Bench("train", "bench_train.py", "training step vs sentence-transformers", (),
          ("--batch", "8", "--max-length", "128", "--repeats", "1"), _train_rows),
]


# ----------------------------------------------------------------------------- machine


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def _gpu() -> str:
    if not shutil.which("nvidia-smi"):
        return "none"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (nvidia-smi failed)"
    return "; ".join(out.splitlines()) or "none"


def machine_info() -> dict:
    """What the figures depend on; no torch import (the GPU name comes from nvidia-smi)."""
    mem_kb = next((int(line.split()[1]) for line in _read("/proc/meminfo").splitlines()
                   if line.startswith("MemTotal:")), None)
    return {
        **cpu(), "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
        "ram_gib": None if mem_kb is None else round(mem_kb / 2**20, 1), "gpu": _gpu(),
        "os": platform.platform(), "python": platform.python_version(), "torch": _version("torch"),
        "numpy": _version("numpy"), "peers": {p: _version(p) for p in PEER_PACKAGES},
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
    }


def _describe(machine: dict) -> str:
    ram = "?" if machine.get("ram_gib") is None else f"{machine['ram_gib']:g} GiB"
    omp = machine.get("OMP_NUM_THREADS") or "unset"
    peers = ", ".join(f"{k} {v}" for k, v in machine.get("peers", {}).items())
    return (f"{describe_cpu(machine)}, {machine.get('cores')} cores ({machine.get('usable_cores')} usable), "
            f"RAM {ram}, GPU: {machine.get('gpu')}; {machine.get('os')}; Python {machine.get('python')}, "
            f"torch {machine.get('torch')}, numpy {machine.get('numpy')}; OMP_NUM_THREADS={omp}; peers: {peers}")


# ----------------------------------------------------------------------------- page


def _num(x: float) -> str:
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.1f}" if abs(x) >= 10 else f"{x:#.3g}"


def _mib(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def _table(header: list[str], rows: list[list[str]], align: str | None = None) -> list[str]:
    return (["| " + " | ".join(header) + " |", align or "|" + "---|" * len(header)]
            + ["| " + " | ".join(row) + " |" for row in rows])


def command_line(bench: Bench, entry: dict | None, results_dir: str) -> str:
    """The command that reproduces a row: the recorded one, else the reference settings."""
    if entry:
        args, omp = entry["args"], entry.get("machine", {}).get("OMP_NUM_THREADS")
    else:
        args, omp = [*bench.full, "--json", f"{results_dir}/{bench.name}.json"], None
    prefix = f"OMP_NUM_THREADS={omp} " if omp else ""
    return f"`{prefix}{shlex.join(['.venv/bin/python', f'scripts/{bench.script}', *args])}`"


def speed_section(results: dict[str, dict | None], manifest: dict, results_dir: str,
                  current: dict) -> tuple[list[str], list[str]]:
    """The speed table and its notes, and the machine section that labels its rows."""
    machines: list[dict] = []
    dates: dict[int, list[str]] = {}

    def label(entry: dict | None) -> str:
        machine = entry["machine"] if entry and entry.get("machine") else {**current, "unrecorded": True}
        if machine not in machines:
            machines.append(machine)
        i = machines.index(machine)
        if entry and entry.get("finished"):
            dates.setdefault(i, []).append(entry["finished"])
        return chr(ord("A") + i)

    table, notes = [], []
    for bench in BENCHES:
        entry, result = manifest.get(bench.name), results.get(bench.name)
        command = command_line(bench, entry, results_dir)
        where = label(entry) if result is not None or entry else ""
        if result is None:
            status = (f"failed (exit {entry['returncode']})" if entry and entry.get("returncode")
                      else "not run")
            table.append([bench.title, status, "", "", "", "", "", "", where, command])
            continue
        rows, bench_notes = bench.rows(result)
        for row in rows:
            met = "" if row.goal is None else ("yes" if row.goal.met(row.ratio) else "**no**")
            table.append([row.benchmark, f"{_num(row.ours)} {row.unit}", row.peer, f"{_num(row.theirs)} {row.unit}",
                          f"{row.ratio:.3f}x", str(row.goal or "-"), met,
                          f"{_mib(row.memory[0])} / {_mib(row.memory[1])}", where, command])
        if entry and entry.get("quick"):
            bench_notes.append("**quick settings** (smaller than the reference benchmark)")
        if entry and entry.get("returncode"):
            bench_notes.append(f"**the script exited with status {entry['returncode']}**")
        notes.append(f"- {bench.title}: " + "; ".join(bench_notes) + ".")
    speed = ["## Speed", "",
             ("Each row: our figure and the peer's, measured in the same run of the script (each contender in its "
             "own fresh process, same data and settings); ratio = ours / peer (seconds: lower is better; "
             "docs/s: higher is better). Peak memory in MiB."), "",
             *_table(["benchmark", "ours", "peer", "peer figure", "ratio", "goal", "met?",
                      "peak memory ours / peer (MiB)", "machine", "command to reproduce"], table,
                     "|---|---:|---|---:|---:|---|---|---:|---|---|"),
             "", *notes]
    machine = ["## Machine", ""]
    if not machines:
        machine.append(f"- no benchmark results; this page was written on: {_describe(current)}.")
    for i, m in enumerate(machines):
        when = f" Results of {', '.join(sorted({d[:10] for d in dates[i]}))}." if i in dates else ""
        unrecorded = " (described when this page was written: the results carry no record)" \
            if m.get("unrecorded") else ""
        m = {k: v for k, v in m.items() if k != "unrecorded"}
        machine.append(f"- **{chr(ord('A') + i)}**{unrecorded}: {_describe(m)}.{when}")
    return speed, machine


@dataclass(frozen=True)
class Reference:
    run: str
    measure: str
    source: str
    figure: float | None  # the published figure, if any
    goal: tuple[str, float] | None  # ("within", tolerance of figure) or (">=", value)
    tokens: int | None = None  # the encoded length the published figure was made at, where it decides the figure

    def met(self, ours: float) -> bool | None:
        if self.goal is None:
            return None
        op, value = self.goal
        return abs(ours - self.figure) <= value if op == "within" else ours >= value

    def goal_text(self) -> str:
        if self.goal is None:
            return "-"
        op, value = self.goal
        return f"within ±{value:g}" if op == "within" else f"{op} {value:g}"


SCIFACT_RUNS = {
    "bm25": "BM25 (our tokenizer, our sparse index, Lucene scoring)",
    "lsa": "LSA (TF-IDF + truncated SVD)",
    "dense": "all-MiniLM-L6-v2, base model",
    "dense-ft-hard": "fine-tuned, mined hard negatives",
    "dense-ft-random": "fine-tuned, random negatives (ablation)",
    "dense-ft-temperature": "fine-tuned, hard negatives, other temperature (ablation)",
    "dense-ft-query": "fine-tuned query encoder only, against the frozen base documents",
    "fused-rrf": "BM25 + dense-ft-query, reciprocal rank fusion",
    "fused-weighted": "BM25 + dense-ft-query, weighted score fusion",
}
QUALITY_MEASURES = ["nDCG@10", "AP@10", "R@10", "R@100", "RR@10"]
REFERENCES = [
    Reference("bm25", "nDCG@10", "BEIR (Thakur et al., 2021), BM25", 0.665, ("within", 0.015)),
    Reference("bm25", "nDCG@10", "Anserini BM25 flat (Pyserini BEIR regressions)", 0.679, ("within", 0.015)),
    Reference("dense", "nDCG@10", "MTEB, all-MiniLM-L6-v2", 0.645, ("within", 0.005), 256),
    Reference("dense", "AP@10", "MTEB, all-MiniLM-L6-v2 (MAP@10)", 0.596, None, 256),
    Reference("dense", "R@100", "MTEB, all-MiniLM-L6-v2", 0.925, None, 256),
    Reference("dense-ft-hard", "nDCG@10", "project goal, fine-tuned", None, (">=", 0.74)),
    Reference("dense-ft-query", "nDCG@10", "project goal, fine-tuned", None, (">=", 0.74)),
    Reference("dense-ft-query", "nDCG@10", "MTEB, bge-small-en-v1.5 zero-shot (a download of the same size)",
              0.713, None),
    Reference("dense-ft-query", "nDCG@10", "MTEB, gte-small zero-shot", 0.727, None),
    Reference("fused-rrf", "nDCG@10", "project goal, fusion", None, (">=", 0.76)),
    Reference("fused-weighted", "nDCG@10", "project goal, fusion", None, (">=", 0.76)),
]


def _read_metrics(folder: Path | None) -> dict[str, dict]:
    if folder is None or not folder.is_dir():
        return {}
    found = {}
    for path in sorted(folder.glob("*.json")):
        if path.name == "compare.json":
            continue
        value = json_loads(path.read_text(encoding="utf-8"), str(path))
        if isinstance(value, dict):
            found[path.stem] = value
    return found


def _value(metrics: dict, measure: str) -> str:
    return f"{metrics[measure]:.4f}" if isinstance(metrics.get(measure), (int, float)) else "-"


def _stratum(metrics: dict, stratum: str, measure: str = "nDCG@10") -> str:
    """A stratum's mean and its query count, e.g. ``0.6923 (168)``; ``-`` when the stratum is absent."""
    part = metrics.get(stratum)
    if not isinstance(part, dict) or not isinstance(part.get(measure), (int, float)):
        return "-"
    return f"{part[measure]:.4f} ({part.get('queries', '?')})"


def quality_section(folders: list[Path], label: str | None = None, dense_tokens: int | None = None) -> list[str]:
    """Every SciFact run's test measures with its seen / unseen split, ours against the published figures
    and the goals, the paired comparisons, all from the first of ``folders``; with several (the metrics
    folders of one command's training seeds), each run's spread over them. ``dense_tokens``: the dense runs'
    encoded length (``dense.max_seq_length``); a published figure made at another length is shown but not
    judged, since the goal would compare two settings."""
    from retrieval_lab.comparison import Comparisons, to_markdown

    folder = folders[0] if folders else None
    found = _read_metrics(folder)
    where = f"`{folder}`" if folder else "no folder given"
    lines = [f"## SciFact quality (test split){': ' + label if label else ''}", "",
             (f"From the evaluate stage's metrics ({where}; `dvc repro` with `dataset: scifact`). "
              "AP@10 is MAP@10 as MTEB reports it. A test query is *seen* when one of its relevant documents "
              "is a positive of a training query, *unseen* otherwise (nDCG@10 of each stratum, its queries "
              "in parentheses): the unseen column is what fine-tuning carries over to documents it never saw."),
             ""]
    runs = list(SCIFACT_RUNS) + [r for r in found if r not in SCIFACT_RUNS]
    rows = []
    for run in runs:
        if run not in found:
            rows.append([run, SCIFACT_RUNS.get(run, ""), "not run", *[""] * (len(QUALITY_MEASURES) + 2)])
            continue
        m = found[run]
        rows.append([run, SCIFACT_RUNS.get(run, ""), *[_value(m, k) for k in QUALITY_MEASURES],
                     _stratum(m, "seen"), _stratum(m, "unseen"), str(m.get("queries_evaluated", "-"))])
    lines += _table(["run", "what", *QUALITY_MEASURES, "nDCG@10 seen", "nDCG@10 unseen", "queries"], rows,
                    "|---|---|" + "---:|" * (len(QUALITY_MEASURES) + 3))
    rows = []
    for ref in REFERENCES:
        figure = "-" if ref.figure is None else f"{ref.figure:.3f}"
        value = found.get(ref.run, {}).get(ref.measure)
        if not isinstance(value, (int, float)):
            rows.append([ref.run, ref.measure, "not run", ref.source, figure, "", ref.goal_text(), ""])
            continue
        diff = "-" if ref.figure is None else f"{value - ref.figure:+.4f}"
        if ref.tokens is not None and dense_tokens is not None and dense_tokens != ref.tokens:
            rows.append([ref.run, ref.measure, f"{value:.4f}", f"{ref.source}, at {ref.tokens} tokens", figure, diff,
                         f"not judged: this run encodes {dense_tokens} tokens", ""])
            continue
        met = {None: "", True: "yes", False: "**no**"}[ref.met(value)]
        rows.append([ref.run, ref.measure, f"{value:.4f}", ref.source, figure, diff, ref.goal_text(), met])
    lines += ["", "### Against published figures and goals", "",
              *_table(["run", "measure", "ours", "reference", "published", "difference", "goal", "met?"], rows,
                      "|---|---|---:|---|---:|---:|---|---|")]
    compare = folder / "compare.json" if folder else None
    if compare and compare.exists():
        text = to_markdown(Comparisons.from_json(json_loads(compare.read_text(encoding="utf-8"), str(compare))))
        lines += ["", text.replace("# Paired comparison", "### Paired comparison", 1).rstrip("\n")]
    if len(folders) > 1:
        names = ", ".join(f"`{f}`" for f in folders)
        lines += ["", f"### Spread over {len(folders)} training seeds", "",
                  f"The same command with each seed's metrics folder ({names}); `scripts/seed_spread.py`.", "",
                  seed_spread.to_markdown(seed_spread.spread(folders), "nDCG@10", len(folders)).rstrip("\n")]
    return lines


def _changes_text(changes: dict) -> str:
    return ", ".join(f"`{k}={json.dumps(v) if not isinstance(v, str) else v}`" for k, v in changes.items()) or "-"


def _curve_text(curve: list, selected_step) -> str:
    """The validation values in order (the untrained model first), the kept one in bold."""
    return " → ".join(f"**{v:.4f}**" if step == selected_step else f"{v:.4f}" for step, v in curve)


def ablation_section(folder: Path) -> list[str]:
    """scripts/ablation_table.py's folder: each lever's validation curve and its test measure against the base
    model, overall, seen and unseen, with the simultaneous intervals of the whole family."""
    from retrieval_lab.comparison import Comparisons, interval_text, to_markdown

    levers = json_loads((folder / "levers.json").read_text(encoding="utf-8"), str(folder / "levers.json"))
    result = json_loads((folder / "compare.json").read_text(encoding="utf-8"), str(folder / "compare.json"))
    baseline, measure = levers["baseline"], result["measure"]
    pairs = {p["candidate"]: p for p in result["pairs"].values() if p["baseline"] == baseline}
    reference = levers["levers"][0]["name"]
    lines = [f"## SciFact ablation: one change at a time (`{folder}`)", "",
             (f"Each lever is a DVC experiment that differs from `{reference}` only in the params listed, trained "
              "to the epoch its validation chose (`scripts/ablation_table.py` gathered them). Validation: "
              f"{levers['levers'][0]['measure']} on the validation split at each validation, the untrained model "
              "first, the kept weights in bold. Test: the fine-tuned run's "
              f"{measure} overall and on *seen* and *unseen* queries, and its difference from `{baseline}` on the "
              f"unseen ones with the interval of the family below ({result['family_size']} comparisons)."), ""]
    first = next(iter(pairs.values()), None)
    rows = []
    if first is not None:
        strata = first.get("strata", {})
        rows.append([f"`{baseline}` (untrained)", "-", "-", f"{first['baseline_mean']:.4f}",
                     *[f"{strata[s]['baseline_mean']:.4f}" if s in strata else "-" for s in ("seen", "unseen")],
                     "-"])
    for lever in levers["levers"]:
        pair = pairs.get(lever["name"])
        if pair is None:
            continue
        strata = pair.get("strata", {})
        unseen = strata.get("unseen")
        run = "" if lever["run"] == levers["levers"][0]["run"] else f" (run `{lever['run']}`)"
        rows.append([f"`{lever['name']}`{run}", _changes_text(lever["changes"]),
                     _curve_text(lever["validation"], lever["selected_step"]), f"{pair['candidate_mean']:.4f}",
                     *[f"{strata[s]['candidate_mean']:.4f}" if s in strata else "-" for s in ("seen", "unseen")],
                     f"{unseen['mean_difference']:+.4f} {interval_text(unseen)}" if unseen else "-"])
    lines += _table(["lever", "params changed", "validation", "test all", "seen", "unseen",
                     f"unseen − {baseline}"], rows, "|---|---|---|---:|---:|---:|---|")
    text = to_markdown(Comparisons.from_json(result))
    lines += ["", text.replace("# Paired comparison", "### Paired comparison", 1).rstrip("\n")]
    return lines


PEERS_COMMAND = ("OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_finetune_peers.py --dataset data/prepared/scifact "
                 "--negatives data/mined/scifact/hard/negatives.jsonl --base-embeddings data/embeddings/dense/scifact "
                 "--test-qrels data/heldout/scifact/qrels/test.tsv --seeds 42 43 44 "
                 "--json {results_dir}/finetune-peers.json")
BACKEND_COMMAND = ("OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_finetune_peers.py --dataset data/prepared/scifact "
                   "--negatives data/mined/scifact/hard/negatives.jsonl --base-embeddings data/embeddings/dense/scifact "
                   "--test-qrels data/heldout/scifact/qrels/test.tsv --seeds 42 --only st-backend ours-hard "
                   "--json {results_dir}/finetune-backend.json")
PEER_SEEDS = 3  # the seeds the goal is judged over (issue 53)
PEER_NAMES = {"ours-hard": "ours, `train@hard`", "ours-query": "ours, `train@query`",
              "st-mnrl": "SentenceTransformerTrainer + MNRL, defaults",
              "st-cmnrl": "SentenceTransformerTrainer + cached MNRL, batch 128",
              "st-mnrl-tuned": "SentenceTransformerTrainer + MNRL, lr and epoch on validation"}
# beside the five the goal is judged on: the product's train stage with sentence-transformers' trainer
PEER_LABELS = {**PEER_NAMES, "st-backend": "`train@hard`, `train.backend: sentence-transformers`, st-mnrl's settings"}


def finetune_section(result: dict | None, results_dir: str, peers: dict | None = None,
                     backend: dict | None = None, other_peers: list[tuple[str, dict]] | None = None) -> list[str]:
    """scripts/bench_finetune_peers.py (ours against sentence-transformers' trainer, seeds, intervals; and its
    run of the train stage's sentence-transformers backend) and scripts/bench_finetune.py (the plain recipe, one
    run), each shown when its JSON is there. ``other_peers``: (file, JSON) of the same bench on other machine
    types, each its own subsection: times compare within a machine type only."""
    lines = ["## Fine-tuning quality against the plain recipe and sentence-transformers (SciFact test)", ""]
    if result is None and peers is None and backend is None and not other_peers:
        return lines + [f"Not run. Measure with `{PEERS_COMMAND.format(results_dir=results_dir)}`."]
    if peers is not None:
        lines += peers_lines(peers, results_dir)
    if backend is not None:
        lines += ["", "### `train.backend: sentence-transformers`: the same trainer behind the train stage", "",
                  ("A run of its own: `train@hard` as the pipeline runs it, with sentence-transformers' trainer and "
                   "loss (`training/st_trainer.py`) at st-mnrl's settings, against `train@hard` with ours, paired on "
                   "the same test claims. Its figures sit beside the table above, not in it: another run.")]
        lines += [""] + peers_lines(backend, results_dir, BACKEND_COMMAND)
    if result is not None:
        lines += ([""] if peers is not None or backend is not None else []) + _plain_recipe_lines(result, results_dir)
    for file, other in other_peers or []:
        lines += ["", f"### The same bench on another machine type: {describe_cpu(other['machine'])} (`{file}`)", "",
                  ("Its own grid, merged from its own parts: its times compare with each other, not with the "
                   "sections above.")]
        lines += [""] + peers_lines(other, results_dir, output=file)
    return lines


def _plain_recipe_lines(result: dict, results_dir: str) -> list[str]:
    """scripts/bench_finetune.py: the plain recipe against ours, one run."""
    command = (f"`OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_finetune.py --run runs/scifact/dense.trec "
               f"--json {results_dir}/finetune.json`")
    rows = [[r["contender"], str(r["steps"]), _num(r["train_seconds"]),
             *[_value(r, m) for m in ("nDCG@10", "AP@10", "R@100")]] for r in result["rows"]]
    lines = _table(["contender", "steps", "train seconds", "nDCG@10", "AP@10", "R@100"], rows,
                   "|---|---:|---:|---:|---:|---:|")
    differences = "; ".join(f"{name}: **{value:+.4f}**" for name, value in result["ndcg10_differences"].items())
    return lines + ["", f"nDCG@10 {differences} ({result['pairs']} recipe pairs, one run: {command})."]


def _spread_cell(cell: dict) -> str:
    return f"{cell['mean']:.4f}" + (f" ± {cell['sd']:.4f}" if cell.get("sd") is not None else "")


def _loads(rows: list[dict], contender: str) -> str:
    """Each of the contender's runs' 1-minute load average at its start and end ("" where not recorded)."""
    return "; ".join(f"{r['load_before'][0]:.1f} → {r['load_after'][0]:.1f}" for r in rows
                     if r.get("contender") == contender and "load_before" in r and "load_after" in r)


def _pieces_text(pieces: list[dict], output: str) -> str:
    """A merged bench: each part's command, date and (contender, seed) runs, then the merge."""
    script = "OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_finetune_peers.py"

    def command(piece: dict) -> str:  # the part's own arguments, writing the file the merge read
        args, kept = list(piece["args"] or []), []
        while args:
            arg = args.pop(0)
            if arg == "--json" and args:
                args.pop(0)
            elif not arg.startswith("--json="):
                kept.append(_from_checkout(arg))
        return shlex.join([*kept, "--json", piece["file"]])

    def on(piece: dict) -> str:
        return f" on {piece['date']}" if piece.get("date") else ""

    parts = "; ".join(f"`{script} {command(p)}`{on(p)} ("
                      + ", ".join(f"{c} seed {s}" for c, s in p["rows"]) + ")" for p in pieces)
    merged = {p["file"] for p in pieces}
    outside: dict[str, dict] = {}  # st-mnrl-tuned's candidates trained in parts of their own (--reuse), not merged
    for piece in pieces:
        for part in piece.get("reused") or ():
            if _from_checkout(part["file"]) not in merged:
                outside.setdefault(_from_checkout(part["file"]), {**part, "file": _from_checkout(part["file"])})
    candidates = ""
    if outside:
        candidates = ("; st-mnrl-tuned's candidates at other rates, each trained in a part of its own that `--reuse` "
                      "read: " + "; ".join(f"`{script} {command(p)}`{on(p)} ("
                                          + ", ".join(f"{c} seed {s} at lr {p['lr']:g}" for c, s in p["rows"]) + ")"
                                          for p in outside.values()))
    merge = f"`{script} --merge {' '.join(p['file'] for p in pieces)} --json {output}`"
    return (f"the grid was run in {len(pieces)} parts, each timing only its own runs: {parts}{candidates}; then "
            f"merged, every figure and interval made anew from the parts' per-query test values: {merge}.")


def _from_checkout(arg: str) -> str:
    """An absolute path a part ran with (a clone's inputs, a part beside it), as from a checkout's root: from its
    last ``data/`` or ``bench-results/`` on, so the command shown runs in the reader's clone, not the bench machine's
    folders; anything else as it was."""
    if not arg.startswith("/"):
        return arg
    cut = max(arg.rfind("/data/"), arg.rfind("/bench-results/"))
    return arg[cut + 1:] if cut >= 0 else arg


def _allocator_text(peers: dict) -> str:
    if peers.get("ours_keeps_freed_memory"):
        return ("Ours runs as the stage runs, with glibc keeping freed memory for reuse (every command's setting, "
                "`core/memory.py`); the peers on glibc's defaults, as sentence-transformers runs.")
    return ("Ours ran on glibc's defaults, as the peers did: made before the bench ran ours with the setting every "
            "command has (freed memory kept for reuse, `core/memory.py`).")


def peers_lines(peers: dict, results_dir: str, command: str = PEERS_COMMAND, output: str | None = None) -> list[str]:
    """The peers bench: each contender's test figures over its seeds, time and memory, the paired family.
    ``output``: the file a merged bench was written to (default: the page's own, ``finetune-peers.json``)."""
    from retrieval_lab.comparison import Family, interval_text

    seeds = sorted({r["seed"] for r in peers["rows"]})
    done = {(r["contender"], r["seed"]) for r in peers["rows"]}
    contenders = list(dict.fromkeys(r["contender"] for r in peers["rows"]))
    missing = [f"{c} seed {s}" for c in contenders for s in seeds if (c, s) not in done]
    strata = peers.get("strata", {})
    pieces = peers.get("pieces")
    where = f"{len(pieces)} runs on one machine type" if pieces else "one run on one machine"
    masked = ("; one type by the CPU's model name only, which cloud machines mask: the parts predate the record of "
              "its make" if pieces and not peers["machine"].get("cpu_id") else "")
    lines = [(f"`scripts/bench_finetune_peers.py`, {where} ({describe_cpu(peers['machine'])}, "
              f"{peers['machine'].get('usable_cores')} usable cores{masked}), seeds {', '.join(map(str, seeds))}: every "
              "contender trains on the pipeline's 688 training claims with `mine@hard`'s negatives, keeps its best "
              "validation on the same validator as the `train` stage (the untrained model a candidate), and is "
              "encoded as the stage encodes; the test qrels are read once, after all of them. "
              + _allocator_text(peers) + " Params: "
              f"`{' '.join(peers['overrides'])}`; sentence-transformers' defaults: batch {peers['st']['batch']}, "
              f"lr {peers['st']['lr']:g}, {peers['st']['epochs']} epochs; tuned: lr in "
              f"{', '.join(f'{x:g}' for x in peers['st']['tuned_lrs'])}. Reproduce: "
              + (_pieces_text(pieces, output or f"{results_dir}/finetune-peers.json") if pieces else f"`{command.format(results_dir=results_dir)}`.")),
             ""]
    if not peers.get("finished"):
        return lines + [f"**Interrupted**: {len(peers['rows'])} (contender, seed) runs finished, not scored."]
    if missing:
        lines += [f"**Not every seed finished**: missing {', '.join(missing)}; means are over the seeds listed.", ""]
    not_run = [name for name in PEER_NAMES if name not in contenders]
    partial = bool(not_run) or len(seeds) < PEER_SEEDS
    if partial:  # the goal is against the best of every contender over 3 seeds: a part of the bench cannot judge it
        lines += [(f"**Partial**: {len(contenders)} of the {len(PEER_NAMES)} contenders, {len(seeds)} of "
                   f"{PEER_SEEDS} seeds" + (f"; not run: {', '.join(not_run)}" if not_run else "")
                   + ". The goal below is **not judged**: it is against the best of every contender over "
                   f"{PEER_SEEDS} seeds."), ""]
    header = ["contender", "seeds", "nDCG@10 all", f"seen ({strata.get('seen', 0)})",
              f"unseen ({strata.get('unseen', 0)})", "R@100 all", "wall s (mean)", "peak MiB",
              "load before → after"]
    rows = [[PEER_LABELS.get(r["contender"], r["contender"]), ", ".join(map(str, r["seeds"])),
             *[_spread_cell(r[k]) if k in r else "" for k in ("nDCG@10 all", "nDCG@10 seen", "nDCG@10 unseen",
                                                               "R@100 all")],
             _num(r["seconds"]), _mib(r["peak_mb"]), _loads(peers["rows"], r["contender"])] for r in peers["summary"]]
    lines += _table(header, rows, "|---|---|---:|---:|---:|---:|---:|---:|---|")
    lines += ["", ("The load column: the machine's 1-minute load average when each (contender, seed) started and "
                   "ended; on 2 cores, above 2 means other work shared them, and its wall time is not comparable.")]
    family = Family.from_json(peers["family"])
    lines += ["", (f"Paired: each query's mean over the seeds, sentence-transformers contender − ours; "
                   f"{family.family_level:.0%} simultaneous intervals across the {family.size} comparisons "
                   f"(paired randomization, {family.permutations} sign flips, seed {family.seed})."), ""]
    table = [[c["peer"], c["ours"], c["measure"], f"{c['stratum']} ({c['queries']})", f"{c['mean_difference']:+.4f}",
              interval_text(c), c["verdict"].replace("candidate", c["peer"])
              .replace("baseline", c["ours"])] for c in peers["comparisons"]]
    lines += _table(["peer", "ours", "measure", "queries", "difference", "interval", "verdict"], table,
                    "|---|---|---|---|---:|---|---|")
    lines += ["", ("| ours | best peer | ours − peer, nDCG@10 all | interval | time ours / peer | goal: > −0.01 and "
                   "<= 0.8x | met? |"), "|---|---|---:|---|---:|---|---|"]
    for g in peers["goals"]:
        met = "not judged (partial)" if partial else "yes" if g["met"] else "**no**"
        # time_met None: ours and the peer ran in different sessions, whose hosts' speeds differ (bench_finetune_peers)
        time = ("not judged (ours and the peer ran in different sessions)" if g["time_met"] is None
                else "yes" if g["time_met"] else "no")
        lines.append(f"| {g['ours']} | {g['best_peer']} | {g['difference']:+.4f} | [{g['low']:+.4f}, "
                     f"{g['high']:+.4f}] | {g['time_ratio']:.2f}x | quality {'yes' if g['quality_met'] else 'no'}, "
                     f"time {time} | {met} |")
    if pieces:
        lines += ["", ("Times are compared within one part, one session: machines of one type ran the same training "
                       "step at speeds further apart, from one session or hour to the next, than the goal's margin "
                       "([Lab notes](lab-notes.md#the-test-commands-time)), so a goal whose ours and best peer ran in "
                       "different parts leaves its time half not judged.")]
    return lines


SCALE_COMMAND = ("OMP_NUM_THREADS=2 .venv/bin/python scripts/bench_scale.py --sizes 10000 100000 1000000 "
                 "--json {results_dir}/scale.json")


def scale_section(result: dict | None, results_dir: str) -> list[str]:
    """scripts/bench_scale.py: seconds and peak memory of each step from 10k to 1M documents, growth exponents."""
    command = SCALE_COMMAND.format(results_dir=results_dir)
    lines = ["## Cost from 10k to 1M documents", ""]
    if result is None:
        return lines + [f"Not run (about 15 minutes on 2 cores, 5 GB of memory). Measure with `{command}`."]
    sizes, table, goals = result["sizes"], result["table"], result["goals"]
    lines += [(f"Synthetic seeded collection (Zipf-Mandelbrot words over a 200k vocabulary, titles of ~7 and "
               f"texts of ~100 words, {result['queries']:,} queries of 3-8 words of one document each); every "
               "group of steps in a fresh process; peak = the process's peak RSS during the step. Growth "
               "exponent k between sizes N1 < N2: time ~ N^k, k = log(t2 / t1) / log(N2 / N1); steps whose "
               "work does not depend on N (runs, fusion, metrics: 10k queries x 100 documents) have k ~ 0. "
               f"`{command}`"), ""]
    header = (["step"] + [f"{n:,} docs (s)" for n in sizes] + [f"peak MiB at {sizes[-1]:,}"]
              + [f"k {a:,}→{b:,}" for a, b in itertools.pairwise(sizes)])
    rows = [[name] + [_num(s) for s in row["seconds"]] + [_num(row["peak_mb"][-1])]
            + [f"{k:.2f}" for k in row["exponents"]] for name, row in table.items()]
    lines += _table(header, rows, "|---|" + "---:|" * (len(header) - 1))
    if result.get("machine"):
        m = result["machine"]
        lines += ["", (f"Measured {m['date']} on {m['cpu']}, {m['usable_cores']} usable cores, RAM {m['ram_gib']:g} "
                       f"GiB, OMP_NUM_THREADS={m['OMP_NUM_THREADS']}; Python {m['python']}, numpy {m['numpy']}, "
                       f"faiss-cpu {m['faiss-cpu']}, pytrec-eval-terrier {m['pytrec-eval-terrier']}. The peaks of "
                       "write_run and read_run are those of the process that also holds the corpus and the BM25 "
                       "index.")]
    worst = max((k for name, row in table.items() if name != "metrics_pytrec_eval" for k in row["exponents"]),
                default=float("nan"))
    checks = [(f"BM25 index + {result['queries']:,} queries at {sizes[-1]:,} documents",
               f"{_num(result['bm25_seconds'])} s", f"<= {goals['bm25_seconds_at_1m']:g} s",
               result["bm25_seconds"] <= goals["bm25_seconds_at_1m"]),
              ("peak memory of load + BM25 index + search", f"{_num(result['bm25_peak_mb'])} MiB",
               f"<= {goals['bm25_peak_mb_at_1m']:g} MiB", result["bm25_peak_mb"] <= goals["bm25_peak_mb_at_1m"]),
              ("largest growth exponent (ours)", f"{worst:.2f}", f"<= {goals['exponent']:g}",
               worst <= goals["exponent"]),
              ("metrics engine / pytrec_eval, at each size", ", ".join(f"{r:.2f}x" for r in result["metrics_ratio"]),
               f"<= {goals['metrics_ratio']:g}x", max(result["metrics_ratio"]) <= goals["metrics_ratio"])]
    lines += ["", *_table(["goal", "measured", "target", "met?"],
                          [[g, m, t, "yes" if ok else "**no**"] for g, m, t, ok in checks], "|---|---:|---|---|")]
    if result.get("faiss"):
        f = result["faiss"]
        lines += ["", (f"FAISS over {f['documents']:,} clustered unit vectors of {f['dim']} dimensions, "
                       f"{f['queries']:,} queries, top 100 (HNSW efSearch and IVF nprobe as given):"), ""]
        lines += _table(["index", "search parameter", "build s", "queries/s", "recall@100 vs Flat", "peak MiB"],
                        [[name, str(r["search_param"] or "-"), _num(r["build_seconds"]),
                          _num(r["queries_per_second"]), f"{r['recall@100_vs_flat']:.3f}", _num(r["peak_mb"])]
                         for name, r in f["rows"].items()], "|---|---:|---:|---:|---:|---:|")
        lines += ["", ("The vectors are 1,000 Gaussian clusters with isotropic noise: a query's 100 neighbours lie "
                       "in its own cluster, which an IVF index with about as many lists finds whole (hence its "
                       "recall), while a graph index meets the worst case of high-dimensional noise inside a "
                       "cluster. Real embeddings sit between the two: tune `nprobe` or `efSearch` on your own "
                       "queries against Flat before trusting an approximate index (`dense.faiss_factory`, "
                       "searched with `dense.faiss_search`).")]
    return lines


def timings_section(paths: list[Path]) -> list[str]:
    """Per scripts/time_repro.py JSON: each stage's seconds and share of the total, longest first."""
    lines = ["## Where the time of a full `dvc repro` goes", ""]
    if not paths:
        return lines + [("No timings given. Measure with `PATH=.venv/bin:$PATH python scripts/time_repro.py "
                        "--json bench-results/repro.json -- dvc repro` (on a clean checkout) and pass "
                        "`--timings bench-results/repro.json`.")]
    for path in paths:
        t = json_loads(path.read_text(encoding="utf-8"), str(path))
        total, stages = t["total_seconds"], dict(t["stages"])
        outside = total - sum(stages.values())
        rows = sorted(stages.items(), key=lambda kv: -kv[1])
        if outside > 0:
            rows = sorted([*rows, ("(outside stages: DVC start-up, hashing, lock)", outside)], key=lambda kv: -kv[1])
        status = "" if not t.get("returncode") else f", **exit status {t['returncode']}**"
        lines += [f"### `{shlex.join(t['command'])}` ({path.name}): {_num(total)} s in all{status}", "",
                  *_table(["stage", "seconds", "share"], [[s, _num(v), f"{v / total:.1%}"] for s, v in rows],
                          "|---|---:|---:|"), ""]
    return lines[:-1]


def build_report(results: dict[str, dict | None], manifest: dict, results_dir: str,
                 metrics_dirs: Path | None | list[tuple[str | None, Path | list[Path]]], timings: list[Path],
                 current: dict, now: str, finetune: dict | None = None, scale: dict | None = None,
                 invocation: list[str] | None = None, dense_tokens: int | None = None,
                 ablation: list[Path] | None = None, peers: dict | None = None,
                 backend: dict | None = None, other_peers: list[tuple[str, dict]] | None = None) -> str:
    """``metrics_dirs``: one SciFact metrics folder, or (label, folder) pairs for several configurations; a list
    of folders in place of one: the training seeds of that configuration (the first shown, all in the spread).
    ``invocation``: this script's arguments that made the page, shown in its head. ``dense_tokens``: the
    SciFact dense runs' encoded length (see :func:`quality_section`). ``ablation``: folders of
    ``scripts/ablation_table.py``, one section each (see :func:`ablation_section`). ``other_peers``: the peers bench
    on other machine types (see :func:`finetune_section`)."""
    speed, machine = speed_section(results, manifest, results_dir, current)
    quick = any(e.get("quick") for n, e in manifest.items() if results.get(n) is not None)
    head = ["# Benchmarks", "",
            (f"Generated by `scripts/bench_report.py` on {now}. Regenerate everything with "
            "`.venv/bin/python scripts/bench_report.py --scifact-metrics metrics/scifact --timings "
            "bench-results/repro.json`; `--skip-run` rebuilds this page from the results already in "
            f"`{results_dir}/`.")]
    if invocation is not None:
        head += ["", f"This page: `.venv/bin/python scripts/bench_report.py {shlex.join(invocation)}`."]
    if quick:
        head += ["", ("**Some speed figures below come from `--quick` settings: smoke checks, not the reference "
                 "benchmarks.**")]
    if not isinstance(metrics_dirs, list):
        metrics_dirs = [(None, metrics_dirs)]
    sections = [quality_section(where if isinstance(where, list) else [where] if where else [], label, dense_tokens)
                for label, where in metrics_dirs]
    parts = [head, machine, speed, *sections, *[ablation_section(folder) for folder in ablation or []],
             finetune_section(finetune, results_dir, peers, backend, other_peers), scale_section(scale, results_dir), timings_section(timings)]
    return "\n\n".join("\n".join(p) for p in parts) + "\n"


# ----------------------------------------------------------------------------- running


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def run_benchmarks(benches: list[Bench], results_dir: Path, shown_dir: str, quick: bool,
                   manifest: dict) -> list[str]:
    """Run each in turn, recording it in ``manifest``; return the names of those that failed."""
    from retrieval_lab.core.atomic import write_json

    machine = machine_info()
    for bench in benches:
        out = results_dir / f"{bench.name}.json"
        out.unlink(missing_ok=True)  # a failed run must not leave an old result to be reported as new
        args = [*(bench.quick if quick else bench.full), "--json", f"{shown_dir}/{bench.name}.json"]
        print(f"\n=== {bench.script} {shlex.join(args)}", flush=True)
        start = time.perf_counter()
        rc = subprocess.run([sys.executable, str(REPO / "scripts" / bench.script), *args[:-1], str(out)],
                            check=False).returncode
        manifest[bench.name] = {"args": args, "quick": quick, "returncode": rc,
                                "seconds": round(time.perf_counter() - start, 1), "finished": _now(),
                                "machine": machine}
        write_json(results_dir / "manifest.json", manifest)  # after each: an interrupted run keeps the others
    return [b.name for b in benches if manifest[b.name]["returncode"]]


def _metrics_argument(item: str) -> tuple[str | None, list[Path]]:
    """``[LABEL=]FOLDER[,FOLDER...]``: the first folder is shown; several are training seeds of one command."""
    label, _, folders = item.rpartition("=") if "=" in item else (None, "", item)
    return label, [Path(f) for f in folders.split(",") if f]


def main(argv: list[str] | None = None) -> int:
    from retrieval_lab.core.atomic import write_text

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smallest sensible settings (a couple of minutes)")
    parser.add_argument("--skip-run", action="store_true", help="only rebuild the page from --results-dir")
    parser.add_argument("--only", nargs="+", choices=[b.name for b in BENCHES], help="run only these benchmarks")
    parser.add_argument("--results-dir", default="bench-results")
    parser.add_argument("--scifact-metrics", nargs="+", default=["metrics/scifact"],
                        help="the evaluate stage's metrics folder for SciFact (missing runs shown as 'not run'); "
                             "several configurations as LABEL=FOLDER; LABEL=FOLDER,FOLDER,... for the training "
                             "seeds of one configuration (the first is shown, all give the spread)")
    parser.add_argument("--timings", nargs="*", default=[], help="scripts/time_repro.py JSON files")
    parser.add_argument("--dense-tokens", type=int, default=None, metavar="N",
                        help="the SciFact dense runs' dense.max_seq_length: a published figure made at another "
                             "length is shown but not judged")
    parser.add_argument("--scifact-ablation", type=Path, nargs="+", default=[], metavar="FOLDER",
                        help="folders written by scripts/ablation_table.py (levers.json, compare.json), one "
                             "section each: levers gathered apart (another baseline, another day) are judged apart")
    parser.add_argument("--peers-elsewhere", nargs="+", default=[], metavar="JSON",
                        help="merged scripts/bench_finetune_peers.py results of other machine types, each shown in "
                             "its own subsection (their times compare with each other only)")
    parser.add_argument("--output", default="docs/benchmarks.md")
    args = parser.parse_args(argv)
    for folder in args.scifact_ablation:
        missing = [n for n in ("levers.json", "compare.json") if not (folder / n).is_file()]
        if missing:
            parser.error(f"--scifact-ablation {folder}: no {' or '.join(missing)} "
                         "(the folder scripts/ablation_table.py writes)")
    results_dir = Path(args.results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = results_dir / "manifest.json"
    manifest = (json_loads(manifest_path.read_text(encoding="utf-8"), str(manifest_path)) if manifest_path.exists()
                else {})
    failed = []
    if not args.skip_run:
        failed = run_benchmarks([b for b in BENCHES if not args.only or b.name in args.only], results_dir,
                       args.results_dir.rstrip("/"), args.quick, manifest)
    results = {b.name: json_loads(p.read_text(encoding="utf-8"), str(p))
               if (p := results_dir / f"{b.name}.json").exists() else None for b in BENCHES}
    metrics_dirs = [_metrics_argument(item) for item in args.scifact_metrics]
    finetune, scale = results_dir / "finetune.json", results_dir / "scale.json"
    peers, backend = results_dir / "finetune-peers.json", results_dir / "finetune-backend.json"
    text = build_report(results, manifest, args.results_dir.rstrip("/"), metrics_dirs,
                        [Path(t) for t in args.timings], machine_info(), _now(),
                        json_loads(finetune.read_text(encoding="utf-8"), str(finetune)) if finetune.exists() else None,
                        json_loads(scale.read_text(encoding="utf-8"), str(scale)) if scale.exists() else None,
                        sys.argv[1:] if argv is None else argv, args.dense_tokens, args.scifact_ablation,
                        json_loads(peers.read_text(encoding="utf-8"), str(peers)) if peers.exists() else None,
                        json_loads(backend.read_text(encoding="utf-8"), str(backend)) if backend.exists() else None,
                        [(f, json_loads(Path(f).read_text(encoding="utf-8"), f)) for f in args.peers_elsewhere])
    write_text(args.output, text)
    print(f"\nwrote {args.output}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
