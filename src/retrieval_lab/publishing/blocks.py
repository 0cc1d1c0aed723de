"""The generated blocks of README.md and docs/: each table rendered from committed JSON, between markers.

    python -m retrieval_lab.publishing           # rewrite every block (and the generated pages)
    python -m retrieval_lab.publishing --check   # change nothing; exit 1 naming each stale block

A block is ``<!-- BEGIN generated:NAME -->`` ... ``<!-- END generated:NAME -->``; NAME is one of
:data:`BLOCKS`. A file may hold any of them, each at most once; a name no renderer knows, or a
BEGIN without its END, is refused naming the file. The sources, all committed:

``headline``             README's one table: support (``metrics/support/``) and SciFact's quality
                         command, seed 42 (``bench-results/scifact-default-s42/``), seen and unseen
``support-results``      the evaluate stage's means per support run (``metrics/support/<run>.json``)
``support-compare``      the compare stage's table (``metrics/support/compare.json``)
``experiments-support``  ``retrieval-lab table`` over 3 support seeds (``docs/comparing-experiments/inputs.json``)
``faiss-real``           FAISS factories against Flat on real-shaped embeddings (``bench-results/faiss-real.json``)
``msmarco-scale``        BM25 at MS MARCO passage size, measured, and issue 46's goals (``scale-msmarco-8.8m.json``)
``msmarco-peer``         BM25 at 100k and 1M MS MARCO-shaped passages against bm25s (``scale-msmarco.json``)
``msmarco-quiet``        the same steps, ours only, on a quiet machine (``scale-msmarco-quiet.json``)
``msmarco-tantivy``      BM25 at MS MARCO-shaped passages against tantivy, issue 55's goals (``scale-msmarco-tantivy.json``)
``sharded``              sharded BM25 on Dask: cost per shard, DFS, merge, and the model (``sharded.json``)
``dense-sharded``        dense over shards on Dask: cost per shard, merge, recall@100 vs Flat (``dense-sharded.json``)
``scale-billion``        the cost model to a billion passages, from the per-shard figures of the JSON above
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from retrieval_lab.core.errors import InputError
from retrieval_lab.core.parse import json_loads

MEASURES = ["nDCG@10", "R@10", "R@100", "RR@10", "AP@100", "Success@1"]
# run -> its label in the table, in table order; a run not listed follows under its own name
LABELS = {
    "bm25": "bm25",
    "lsa": "lsa",
    "dense": "dense (base all-MiniLM-L6-v2)",
    "dense-ft-hard": "dense-ft-hard",
    "dense-ft-random": "dense-ft-random",
    "dense-ft-temperature": "dense-ft-temperature (τ = {temperature})",
    "dense-ft-query": "dense-ft-query (query side only)",
    "fused-rrf": "fused-rrf (bm25 + dense-ft-query)",
    "fused-weighted": "fused-weighted",
}
HEADLINE_RUNS = ["bm25", "dense", "dense-ft-hard", "dense-ft-query", "fused-rrf", "fused-weighted"]
SCIFACT_HEADLINE = Path("bench-results") / "scifact-default-s42"
_NUMBER = re.compile(r"[-+]?\d+\.(\d+)")


def _read_json(path: Path):
    try:
        return json_loads(path.read_text(encoding="utf-8"), str(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", str(path), exc.lineno) from None


def run_metrics(folder: Path) -> dict[str, dict]:
    """run name -> the evaluate stage's metrics (files with ``queries_evaluated``; compare.json is not one)."""
    found = {}
    for path in sorted(folder.glob("*.json")):
        data = _read_json(path)
        if isinstance(data, dict) and "queries_evaluated" in data:
            found[path.stem] = data
    if not found:
        raise InputError("no metrics file of the evaluate stage", str(folder))
    return found


def _four(value) -> str:
    return f"{value:.4f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def support_table(folder: Path, params_path: Path) -> str:
    """Markdown table: one row per run, ``MEASURES`` to 4 decimals ('-' where a measure is missing)."""
    from retrieval_lab.core.params_file import load_params

    variants = load_params(params_path).train.variants
    temperature = variants["temperature"].temperature if "temperature" in variants else "?"
    found = run_metrics(folder)
    runs = [r for r in LABELS if r in found] + sorted(r for r in found if r not in LABELS)
    lines = ["| run | " + " | ".join(MEASURES) + " |", "|---|" + "---:|" * len(MEASURES)]
    for run in runs:
        label = LABELS.get(run, run).format(temperature=temperature)
        lines.append(f"| {label} | " + " | ".join(_four(found[run].get(m)) for m in MEASURES) + " |")
    return "\n".join(lines)


def compare_block(folder: Path) -> str:
    """The compare stage's table and its notes, without the report's heading."""
    from retrieval_lab.comparison import Comparisons, to_markdown

    text = to_markdown(Comparisons.from_json(_read_json(folder / "compare.json")))
    return text.split("\n", 2)[2].strip("\n")  # drop "# Paired comparison on ..." and its blank line


def _stratum(metrics: dict, stratum: str, measure: str) -> tuple[str, int | None]:
    part = metrics.get(stratum)
    if not isinstance(part, dict):
        return "-", None
    return _four(part.get(measure)), part.get("queries")


def headline_table(support: Path, scifact: Path, measure: str = "nDCG@10") -> str:
    """One row per run of :data:`HEADLINE_RUNS`: support's mean, SciFact's mean and its seen / unseen strata."""
    ours, theirs = run_metrics(support), run_metrics(scifact)
    counts = {"support": None, "all": None, "seen": None, "unseen": None}
    rows = []
    for run in HEADLINE_RUNS:
        s, f = ours.get(run, {}), theirs.get(run, {})
        counts["support"] = counts["support"] or s.get("queries_evaluated")
        counts["all"] = counts["all"] or f.get("queries_evaluated")
        cells = [_four(s.get(measure)), _four(f.get(measure))]
        for stratum in ("seen", "unseen"):
            value, n = _stratum(f, stratum, measure)
            counts[stratum] = counts[stratum] or n
            cells.append(value)
        rows.append(f"| {LABELS.get(run, run).format(temperature='?')} | " + " | ".join(cells) + " |")

    def n(key: str) -> str:
        return f" ({counts[key]} queries)" if counts[key] else ""

    head = (f"| {measure} on the test split | support{n('support')} | SciFact{n('all')} | SciFact seen{n('seen')} "
            f"| SciFact unseen{n('unseen')} |")
    return "\n".join([head, "|---|---:|---:|---:|---:|", *rows])


FAISS_REAL = Path("bench-results") / "faiss-real.json"


def faiss_real_table(path: Path) -> str:
    """scripts/bench_faiss.py: each factory's recall@100 against Flat, queries/s, build time and peak memory."""
    data = _read_json(path)
    head = (f"{data['documents']:,} real-shaped documents ({data['real_documents']:,} of them SciFact's abstracts, "
            f"the rest moved from them with the embeddings' own covariance: median cosine to the origin "
            f"{data['nearest_other_cosine_real']:.3f}, a real abstract's to its nearest other), {data['queries']:,} "
            f"real SciFact claims, depth {data['depth']}, {data['machine']['cpu_count']} CPU cores, FAISS "
            f"{data['machine']['faiss']} (`{FAISS_REAL}`):")
    lines = [head, "",
             "| factory | search setting | recall@100 vs Flat | queries/s | build s | peak MB |",
             "|---|---|---:|---:|---:|---:|"]
    for row in data["rows"]:
        factory, setting = row["factory"], row["setting"]
        knob = "exact" if setting is None else (f"efSearch {setting}" if factory.startswith("HNSW")
                                                 else f"nprobe {setting}")
        lines.append(f"| `{factory}` | {knob} | {row['recall@100_vs_flat']:.3f} | {row['queries_per_second']:,.0f} "
                     f"| {row['build_seconds']:.1f} | {row['peak_mb']:,.0f} |")
    return "\n".join(lines)


MSMARCO_SCALE = Path("bench-results") / "scale-msmarco-8.8m.json"
MSMARCO_PEER = Path("bench-results") / "scale-msmarco.json"
MSMARCO_QUIET = Path("bench-results") / "scale-msmarco-quiet.json"
MSMARCO_PASSAGES = 8_841_823  # MS MARCO passage (v1)


def msmarco_steps_table(path: Path) -> str:
    """scripts/bench_scale.py --shape msmarco: each step's seconds and peak at each size, its growth exponent
    from the first size to the last; then, per size, ours against bm25s (when it ran), the check against the
    reference code's run (when made), the index's bytes per posting and nDCG@10."""
    return _msmarco_steps(_read_json(path), path.name)


def _msmarco_steps(data: dict, file_name: str) -> str:
    sizes, table = data["sizes"], data["table"]
    workers = data.get("workers", 1)  # files from before bm25.workers searched in one process
    threads = ("one thread" if workers == 1 else
               f"the search in {workers} processes (`bm25.workers: {workers}`; its peak counts each worker's), every "
               "other step one thread")
    lines = [(f"Synthetic passages of MS MARCO's length distribution, {data['queries']:,} queries at depth "
              f"{data['depth']:,}, {threads}, {data['machine'].get('cpu', 'CPU')} with "
              f"{data['machine'].get('usable_cores', '?')} cores (`{file_name}`):"), "",
             "| step | " + " | ".join(f"{n:,}: s" for n in sizes) + " | " + " | ".join(f"{n:,}: peak MiB" for n in sizes)
             + f" | exponent {sizes[0]:,} → {sizes[-1]:,} |", "|---|" + "---:|" * (2 * len(sizes) + 1)]
    for name, row in table.items():
        exponent = math.log(row["seconds"][-1] / row["seconds"][0]) / math.log(sizes[-1] / sizes[0])
        lines.append(f"| `{name}` | " + " | ".join(f"{s:,.3g}" if s < 100 else f"{s:,.0f}" for s in row["seconds"])
                     + " | " + " | ".join(f"{m:,.0f}" for m in row["peak_mb"]) + f" | {exponent:.2f} |")
    lines.append("")
    for result in data["results"]:
        n, facts = result["documents"], []
        if "bm25s_seconds" in result:
            facts.append(f"ours (index + load + search) {result['bm25_seconds']:,.1f} s against bm25s's "
                         f"{result['bm25s_seconds']:,.1f} s (**{result['time_ratio']:.2f}x**), peak {result['peak_mb']:,.0f} "
                         f"against {result['bm25s_peak_mb']:,.0f} MiB (**{result['peak_ratio']:.2f}x**)")
        if "identical_to_reference" in result:
            facts.append("run byte-identical to the reference code's" if result["identical_to_reference"]
                         else "run **differs** from the reference code's")
        index = result["ours"]["index"]
        # format /2 records its varint postings' bytes; /1 (runs before 2026-12-06) its tf array's dtype
        layout = (f"varint postings of {index['postings_bytes'] / index['postings']:.2f} bytes each"
                  if "postings_bytes" in index else f"{index['tf_dtype']} tf")
        facts.append(f"index {index['index_mb'] * 2**20 / index['postings']:.1f} bytes a posting on disk "
                     f"({index['postings']:,} postings, {layout})")
        facts.append(f"nDCG@10 {result['ours']['search']['means']['nDCG@10']:.3f}")
        lines.append(f"- **{n:,} passages**: " + "; ".join(facts) + ".")
    return "\n".join(lines)


def msmarco_scale_table(path: Path) -> str:
    """The steps at MS MARCO's size (:func:`msmarco_steps_table`), then each goal of issue 46 beside what was
    measured at the largest size, met or not."""
    data = _read_json(path)
    table, goals, big = data["table"], data["goals"], data["sizes"][-1]
    index, search = table["bm25_index"]["seconds"][-1], table["bm25_search"]["seconds"][-1]
    peak = max(row["peak_mb"][-1] for row in table.values())
    exponent = max(row["exponents"][-1] for row in table.values())

    def verdict(ok: bool) -> str:
        return "met" if ok else "**not met**"

    lines = [_msmarco_steps(data, path.name), "", f"| goal (issue 46, 2 cores, 24 GB) | measured at {big:,} | |",
             "|---|---:|---|",
             (f"| index ≤ {goals['index_seconds_at_msmarco']:,} s | {index:,.0f} s | "
              f"{verdict(index <= goals['index_seconds_at_msmarco'])} |"),
             (f"| {data['queries']:,} queries ≤ {goals['search_seconds_at_msmarco']:,} s | {search:,.0f} s | "
              f"{verdict(search <= goals['search_seconds_at_msmarco'])} |"),
             f"| peak ≤ {goals['peak_mb']:,} MiB in every step | {peak:,.0f} MiB | {verdict(peak <= goals['peak_mb'])} |",
             f"| every exponent ≤ {goals['exponent']} | {exponent:.2f} | {verdict(exponent <= goals['exponent'])} |"]
    for result in data["results"]:
        if "identical_to_reference" in result:  # bench_scale --reference-src: the run of earlier code, same collection
            lines.append(f"| run at {result['documents']:,} identical to the reference code's | "
                         f"{'yes' if result['identical_to_reference'] else 'no'} | "
                         f"{verdict(result['identical_to_reference'])} |")
    return "\n".join(lines)


MSMARCO_TANTIVY = Path("bench-results") / "scale-msmarco-tantivy.json"
TANTIVY_ANALYZERS = {"en_stem": "tantivy (`en_stem`)", "stop": "tantivy (our stop list)"}


def msmarco_tantivy_table(path: Path) -> str:
    """scripts/bench_scale.py --shape msmarco --tantivy ...: at each size ours and each tantivy analyzer, index,
    search, their sum, the peak and nDCG@10; ours / tantivy in time and peak against issue 55's goals, met or not."""
    data = _read_json(path)
    goals, machine = data["tantivy_goals"], data["machine"]
    load = data["load_average"]

    def verdict(ratio: float, goal: float) -> str:
        return f"{ratio:.2f}x: {'met' if ratio <= goal else '**not met**'}"

    head = (f"Synthetic passages of MS MARCO's length distribution, {data['queries']:,} queries at depth "
            f"{data['depth']:,}, one indexing and one search thread on each side"
            + (f" (every process of each bound to CPU {data['cpu']})" if data.get("cpu") is not None else "")
            + ", each index on disk; "
            f"{machine.get('cpu', 'CPU')} with {machine.get('usable_cores', '?')} cores shared with other jobs (load "
            f"average {load['start'][0]:.1f} at the start, {load['end'][0]:.1f} at the end), {machine.get('date', '')}; "
            f"each contender's fastest of {data['repeats']} round(s), the order alternating (`{path.name}`):")
    columns = (f"| passages | contender | index s | search s | index + search s | peak MiB | nDCG@10 | time ours / it "
               f"(goal ≤ {goals['time_ratio']:g}x) | peak ours / it (goal ≤ {goals['peak_ratio']:g}x) |")
    lines = [head, "", columns, "|---:|---|---:|---:|---:|---:|---:|---|---|"]
    for result in data["results"]:
        steps = result["steps"]
        lines.append(f"| {result['documents']:,} | ours | {steps['bm25_index']['seconds']:,.1f} | "
                     f"{steps['bm25_load_index']['seconds'] + steps['bm25_search']['seconds']:,.1f} (opening the index included) | "
                     f"{result['bm25_seconds']:,.1f} | {result['peak_mb']:,.0f} | "
                     f"{result['ours']['search']['means']['nDCG@10']:.4f} | | |")
        for analyzer, peer in result["tantivy"].items():
            lines.append(f"| | {TANTIVY_ANALYZERS.get(analyzer, analyzer)} | "
                         f"{peer['steps']['tantivy_index']['seconds']:,.1f} | "
                         f"{peer['steps']['tantivy_search']['seconds']:,.1f} | {peer['seconds']:,.1f} | "
                         f"{peer['peak_mb']:,.0f} | {peer['means']['nDCG@10']:.4f} | "
                         f"{verdict(peer['time_ratio'], goals['time_ratio'])} | "
                         f"{verdict(peer['peak_ratio'], goals['peak_ratio'])} |")
    lines += [f"\nOurs' peak is over the steps its time covers, the work tantivy does too (index, open, search into a "
              f"run held in memory); writing the run to a TREC file afterwards, which no peer does, peaks at "
              f"{result['peak_mb_all_steps']:,.0f} MiB at {result['documents']:,} passages."
              for result in data["results"] if "peak_mb_all_steps" in result]
    rounds = [f"{result['documents']:,}: " + "; ".join(f"{'ours' if name == 'ours' else name} "
                                                       + ", ".join(f"{s:,.1f}" for s in times)
                                                       for name, times in result["rounds"].items())
              for result in data["results"] if "rounds" in result]
    if rounds:
        lines += ["", "Index + search seconds of every round: " + " | ".join(rounds) + "."]
    return "\n".join(lines)


SHARDED = Path("bench-results") / "sharded.json"


def sharded_table(path: Path) -> str:
    """scripts/bench_sharded.py: the single index against each sharding, per shard (ranges where several),
    and whether each sharded run equals the single index's byte for byte."""
    data = _read_json(path)
    single, shardings = data["single_index"], data["sharded"]

    def spread(values: list[float], fmt: str) -> str:
        low, high = min(values), max(values)
        return format(low, fmt) if format(low, fmt) == format(high, fmt) else (
            ", ".join(format(v, fmt) for v in values) if len(values) == 2 else f"{format(low, fmt)} to {format(high, fmt)}")

    def column(key: str, fmt: str) -> list[str]:
        return [spread([shard[key] for shard in s["per_shard"]], fmt) for s in shardings]

    machine = data["machine"]
    rows = [("documents per shard", f"{data['documents']:,}", column("documents", ",.0f")),
            ("postings per shard", "–", [spread([p["postings"] / 1e6 for p in s["per_shard"]], ".2f") + "M"
                                           for s in shardings]),
            ("index arrays per shard, MiB", "–", column("index_mb", ".1f")),
            ("build seconds per shard (task)", f"{single['build_seconds']:.1f}", column("build_seconds", ".1f")),
            (f"search seconds per shard (task, {data['queries']:,} queries)", f"{single['search_seconds']:.1f}",
             column("search_seconds", ".1f")),
            ("worker peak RSS, MiB", f"{single['peak_mb']:,.0f} (process)", column("worker_peak_mb", ",.0f")),
            ("DFS (statistics gathered, summed), s", "–", [f"{s['phases_seconds']['dfs']:.1f}" for s in shardings]),
            ("merge on the client, s", "–", [f"{s['phases_seconds']['merge']:.1f}" for s in shardings]),
            ("build ms per passage (task)", f"{single['build_seconds'] / data['documents'] * 1e3:.3f}",
             [spread([p["build_seconds"] / p["documents"] * 1e3 for p in s["per_shard"]], ".3f") for s in shardings]),
            ("merge µs per entry (queries × shards × depth)", "–",
             [f"{s['phases_seconds']['merge'] / _entries(data, s['shards']) * 1e6:.2f}" for s in shardings]),
            ("run identical to the single index's", "–",
             ["yes" if s["identical_to_single_index"] else "**no**" for s in shardings])]
    lines = [(f"{data['documents']:,} MS MARCO-shaped passages, {data['queries']:,} queries at depth {data['depth']:,}, "
              f"{shardings[0]['workers']} Dask worker processes of one thread, {machine.get('cpu', 'CPU')} with "
              f"{machine.get('usable_cores', '?')} cores, {machine.get('date', '')} (`{path.name}`):"), "",
             "| | single index | " + " | ".join(f"{s['shards']} shards" for s in shardings) + " |",
             "|---|---:|" + "---:|" * len(shardings)]
    lines += [f"| {name} | {one} | " + " | ".join(cells) + " |" for name, one, cells in rows]
    # the model: per-passage build time and index bytes, per-entry merge time, the slowest measured
    per_shard = [p for s in shardings for p in s["per_shard"]]
    build = max(p["build_seconds"] / p["documents"] for p in per_shard)
    size = sum(p["index_mb"] for p in per_shard) / sum(p["documents"] for p in per_shard)
    merge = max(s["phases_seconds"]["merge"] / _entries(data, s["shards"]) for s in shardings)
    n, shards, queries, depth = MSMARCO_PASSAGES, 16, 7_000, 1_000
    entries = queries * shards * depth
    lines += ["", (f"Extrapolated linearly from those rates (the slowest measured; **not measured**): "
               f"{n:,} passages in {shards} shards of {n // shards:,} build in about {build * n / shards / 60:.1f} "
               f"minutes each, in parallel, into about {size * n / shards / 1024:.2f} GiB of index arrays each; "
               f"{queries:,} queries at depth {depth:,} leave {entries / 1e6:,.0f}M entries for the client to merge, "
               f"about {merge * entries / 60:.1f} minutes.")]
    return "\n".join(lines)


def _entries(data: dict, shards: int) -> int:
    """Top-k entries the client merges: every shard's list for every query."""
    return data["queries"] * shards * data["depth"]


DENSE_SHARDED = Path("bench-results") / "dense-sharded.json"


def _knob(factory: str, setting) -> str:
    return "exact" if setting is None else (f"efSearch {setting}" if factory.startswith("HNSW") else f"nprobe {setting}")


def dense_sharded_table(path: Path) -> str:
    """scripts/bench_dense_sharded.py: per factory and shard count, each shard's cost, the merge's, and recall@100
    of the merged lists against one Flat index (Flat's own rows: whether its scores are one index's, rank for rank)."""
    data = _read_json(path)
    machine = data["machine"]
    lines = [(f"{data['documents']:,} real-shaped vectors ({data['real_documents']:,} of them SciFact's abstracts) of "
             f"{data['dim']} dimensions, {data['queries']:,} SciFact claims at depth {data['depth']}, a LocalCluster of "
             f"{data['workers']} Dask worker processes of one thread, {machine.get('cpu', 'CPU')} with "
             f"{machine.get('usable_cores', '?')} cores, {machine.get('date', '')} (`{path.name}`):"), "",
             ("| factory | search setting | shards | vectors per shard | index bytes per vector | build s per shard "
             "(task) | queries/s per shard (task) | worker peak MiB | merge ms | recall@100 vs one Flat index |"),
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in data["rows"]:
        shards = row["per_shard"]
        size = sum(s["index_bytes"] for s in shards) / sum(s["documents"] for s in shards)
        rate = [data["queries"] / s["search_seconds"] for s in shards]
        recall = f"{row['recall@100_vs_flat']:.3f}"
        if "scores_identical_to_one_flat_index" in row and row["shards"] > 1:
            recall += " (scores identical)" if row["scores_identical_to_one_flat_index"] else " (**scores differ**)"
        lines.append(f"| `{row['factory']}` | {_knob(row['factory'], row['setting'])} | {row['shards']} | "
                     f"{_spread([s['documents'] for s in shards], ',.0f')} | {size:,.0f} | "
                     f"{_spread([s['build_seconds'] for s in shards], '.1f')} | {_spread(rate, ',.0f')} | "
                     f"{_spread([s['worker_peak_mb'] for s in shards], ',.0f')} | {row['merge_seconds'] * 1e3:.1f} | "
                     f"{recall} |")
    return "\n".join(lines)


def _spread(values: list[float], fmt: str) -> str:
    """One value, or the range of several (their formats differing)."""
    low, high = format(min(values), fmt), format(max(values), fmt)
    return low if low == high else f"{low} to {high}"


BILLION = 1_000_000_000
ENCODE = Path("bench-results") / "encode.json"
# the dense factories of the cost model (bench_faiss.py's rows on 1M vectors), with their search setting
BILLION_DENSE = [("Flat", None), ("HNSW32,SQ8", 256), ("IVF4096,SQ8", 64)]


def billion_table(repo: Path) -> str:
    """The cost model to a billion passages: shards of the size one machine was measured at (BM25 at MS MARCO's
    8,841,823 passages), each figure of a shard read from committed JSON, every step beyond them extrapolated by
    the rule its row states; the merge on the client from the measured cost per entry."""
    scale, sharded = _read_json(repo / MSMARCO_SCALE), _read_json(repo / SHARDED)
    faiss_rows, dense = _read_json(repo / FAISS_REAL), _read_json(repo / DENSE_SHARDED)
    encode = _read_json(repo / ENCODE)
    n = scale["sizes"][-1]
    shards = math.ceil(BILLION / n)
    steps, last = scale["table"], scale["results"][-1]
    index_s, search_s = steps["bm25_index"]["seconds"][-1], steps["bm25_search"]["seconds"][-1]
    queries, depth = scale["queries"], scale["depth"]
    bm25_qps = queries / search_s
    disk = last["ours"]["index"]["index_mb"] / 1024
    peak = max(row["peak_mb"][-1] for row in steps.values()) / 1024
    merge_entry = max(s["phases_seconds"]["merge"] / _entries(sharded, s["shards"]) for s in sharded["sharded"])
    merge_query = merge_entry * shards * depth  # seconds of the client's one thread per query
    lines = [(f"**A shard, measured.** BM25: one machine ({scale['machine'].get('usable_cores', '?')} cores) with "
             f"{n:,} MS MARCO-shaped passages (`{MSMARCO_SCALE.name}`): index {index_s:,.0f} s, "
             f"{disk:.2f} GiB on disk, peak {peak:.1f} GiB (search in {scale.get('workers', 1)} processes), "
             f"{queries:,} queries at depth {depth:,} in {search_s:,.0f} s: **{bm25_qps:.1f} queries/s**. The "
             f"client's merge: {merge_entry * 1e6:.2f} µs per entry (queries × shards × depth; the slowest of "
             f"`{SHARDED.name}`). Dense: one index of {faiss_rows['documents']:,} real-shaped vectors "
             f"(`{FAISS_REAL.name}`, rows below); bytes per vector of each codec from `{DENSE_SHARDED.name}`'s "
             f"serialized indexes."), "",
             (f"**{BILLION:,} passages in {shards} shards of {n:,}** (one such machine each; **extrapolated, not "
             "measured**: BM25's time and size per passage as measured at that size, so no rule is needed for a "
             "shard; the rules below for dense):"), "",
             "| | per shard | all shards | rule |", "|---|---:|---:|---|",
             (f"| BM25 index build | {index_s / 60:,.1f} min | {index_s / 60:,.1f} min wall, {shards} machines "
             "| measured per shard; shards in parallel |"),
             f"| BM25 index on disk | {disk:.2f} GiB | {disk * shards / 1024:,.2f} TiB | measured per shard |",
             (f"| BM25 queries/s at depth {depth:,} | {bm25_qps:.1f} | {min(bm25_qps, 1 / merge_query):.1f} "
             f"| every query visits every shard; the client merges {shards * depth:,} entries a query in "
             f"{merge_query * 1e3:,.0f} ms ({1 / merge_query:.1f} queries/s on its one thread) |"),
             (f"| BM25 at depth 100 | {bm25_qps:.1f} | {min(bm25_qps, 10 / merge_query):.1f} "
             f"| a tenth of the entries to merge ({merge_query * 1e2:,.1f} ms a query); a shard's search at depth 100 "
             "not measured: its depth-1,000 rate is taken |")]
    by_factory = {(r["factory"], r["setting"]): r for r in faiss_rows["rows"]}
    measured_n = faiss_rows["documents"]
    dense_entry = max(r["merge_seconds"] / (dense["queries"] * r["shards"] * dense["depth"])
                      for r in dense["rows"] if r["shards"] > 1)  # the merge of top-k arrays, per entry
    dense_merge = dense_entry * shards * faiss_rows["depth"]  # seconds a query
    for factory, setting in BILLION_DENSE:
        row = by_factory[(factory, setting)]
        codec = _bytes_per_vector(dense, factory)
        growth = n / measured_n
        if factory.startswith("HNSW"):  # a search walks ~log n levels and neighbours; a build inserts n of them
            qps = row["queries_per_second"] * math.log(measured_n) / math.log(n)
            build = row["build_seconds"] * growth * math.log(n) / math.log(measured_n)
            rule = "search ∝ log n, build ∝ n log n"
        else:  # a scan, of every vector (Flat) or of a fixed share of the lists (IVF, lists and nprobe fixed)
            qps = row["queries_per_second"] / growth
            build = row["build_seconds"] * growth
            rule = "search and build ∝ n" + (" (lists and nprobe fixed)" if factory.startswith("IVF") else "")
        name = f"`{factory}` ({_knob(factory, setting)})"
        lines += [(f"| dense {name}: index in memory | {codec * n / 2**30:,.2f} GiB | "
                  f"{codec * n * shards / 2**40:,.2f} TiB | {codec:,.0f} bytes a vector (`{DENSE_SHARDED.name}`) |"),
                  (f"| dense {name}: queries/s at depth {faiss_rows['depth']} | {qps:,.0f} | "
                  f"{min(qps, 1 / dense_merge):,.0f} | {row['queries_per_second']:,.0f} at {measured_n:,} "
                  f"({faiss_rows['machine']['cpu_count']} cores), {rule}; the client merges a query's "
                  f"{shards * faiss_rows['depth']:,} entries in {dense_merge * 1e3:.2f} ms ({dense_entry * 1e9:.0f} ns "
                  f"an entry, `{DENSE_SHARDED.name}`) |"),
                  (f"| dense {name}: index build | {build / 60:,.1f} min | {build / 60:,.1f} min wall | "
                  f"{row['build_seconds']:,.1f} s at {measured_n:,}, {rule} |")]
    rate = max(r["docs_per_s"] for r in encode["rows"] if r["contender"] == "ours")
    lines.append(f"| encoding (CPU, base model) | {n / rate / 3600:,.0f} h | {n / rate / 3600:,.0f} h wall, "
                 f"{shards} machines | {rate:.1f} SciFact abstracts/s on one 2-core machine (`{ENCODE.name}`); "
                 "MS MARCO passages are about a third as long (not measured) |")
    return "\n".join(lines)


def _bytes_per_vector(dense: dict, factory: str) -> float:
    """Bytes a vector of ``factory``'s codec (its first part: Flat, HNSW32,SQ8, IVF...,SQ8) in the one-shard row of
    dense-sharded.json with the same codec."""
    def codec(name: str) -> str:
        parts = name.split(",")
        return ("IVF," if parts[0].startswith("IVF") else parts[0] + ",") + ",".join(parts[1:])

    for row in dense["rows"]:
        if row["shards"] == 1 and codec(row["factory"]) == codec(factory):
            shard = row["per_shard"][0]
            return shard["index_bytes"] / shard["documents"]
    raise InputError(f"no one-shard row of a {factory!r} codec", str(DENSE_SHARDED))


def experiments_table(repo: Path) -> str:
    """``retrieval-lab table --from-inputs`` over the committed worked example, without its heading."""
    from retrieval_lab import cli
    from retrieval_lab.publishing.experiments import BASELINE

    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):  # it prints the table
        out = Path(tmp)
        code = cli.main(["table", "--baseline", BASELINE, "--params", str(repo / "params.yaml"), "--from-inputs",
                         str(repo / "docs" / "comparing-experiments" / "inputs.json"),
                         "--markdown", str(out / "table.md"), "--csv", str(out / "table.csv")])
        if code:
            raise InputError(f"retrieval-lab table exited {code}", "docs/comparing-experiments/inputs.json")
        text = (out / "table.md").read_text(encoding="utf-8")
    body = text.split("\n", 2)[2].strip("\n")  # drop "# Retrievers across ..." and its blank line
    return re.sub(r"^## ", "#### ", body, flags=re.MULTILINE)  # the page's own headings sit above


def same_numbers(committed: str, rendered: str) -> bool:
    """Equal text around the numbers; each number within one unit of its last printed digit (sums and interval
    ends can differ in their last bits between CPUs, which can move a rounding that lies on the edge)."""
    if _NUMBER.sub("#", committed) != _NUMBER.sub("#", rendered):
        return False
    pairs = zip(_NUMBER.finditer(committed), _NUMBER.finditer(rendered))
    return all(abs(float(x.group()) - float(y.group())) <= 1.01 * 10.0 ** -len(x.group(1)) for x, y in pairs)


@dataclass(frozen=True)
class Block:
    name: str
    render: Callable[[Path], str]  # the repository root -> the block's text
    same: Callable[[str, str], bool] = str.__eq__  # committed, rendered


BLOCKS = {b.name: b for b in [
    Block("headline", lambda repo: headline_table(repo / "metrics" / "support", repo / SCIFACT_HEADLINE)),
    Block("support-results", lambda repo: support_table(repo / "metrics" / "support", repo / "params.yaml")),
    Block("support-compare", lambda repo: compare_block(repo / "metrics" / "support")),
    Block("experiments-support", experiments_table, same_numbers),
    Block("faiss-real", lambda repo: faiss_real_table(repo / FAISS_REAL)),
    Block("msmarco-scale", lambda repo: msmarco_scale_table(repo / MSMARCO_SCALE)),
    Block("msmarco-peer", lambda repo: msmarco_steps_table(repo / MSMARCO_PEER)),
    Block("msmarco-quiet", lambda repo: msmarco_steps_table(repo / MSMARCO_QUIET)),
    Block("msmarco-tantivy", lambda repo: msmarco_tantivy_table(repo / MSMARCO_TANTIVY)),
    Block("sharded", lambda repo: sharded_table(repo / SHARDED)),
    Block("dense-sharded", lambda repo: dense_sharded_table(repo / DENSE_SHARDED)),
    Block("scale-billion", billion_table),
]}
_MARKER = re.compile(r"<!-- (BEGIN|END) generated:([^ ]+) -->")


def _spans(text: str, source: str) -> dict[str, tuple[int, int]]:
    """name -> (start, end) of each block's content; every marker paired, every name known, none twice."""
    spans: dict[str, tuple[int, int]] = {}
    open_name, start = None, 0
    for m in _MARKER.finditer(text):
        kind, name = m.groups()
        line = text.count("\n", 0, m.start()) + 1
        if kind == "BEGIN":
            if open_name is not None:
                raise InputError(f"generated:{name} begins inside generated:{open_name}", source, line)
            if name not in BLOCKS:
                raise InputError(f"no renderer for generated:{name} (known: {', '.join(BLOCKS)})", source, line)
            if name in spans:
                raise InputError(f"generated:{name} appears twice", source, line)
            if not text.startswith("\n", m.end()):
                raise InputError(f"generated:{name}: the BEGIN marker must end its line", source, line)
            open_name, start = name, m.end() + 1
        else:
            if name != open_name:
                raise InputError(f"END generated:{name} without its BEGIN", source, line)
            spans[name] = (start, m.start())
            open_name = None
    if open_name is not None:
        raise InputError(f"generated:{open_name} has no END marker", source)
    return spans


def fill(text: str, rendered: dict[str, str], source: str) -> tuple[str, list[str]]:
    """``text`` with every block it holds replaced by its rendering, and the names of the blocks that changed."""
    spans = _spans(text, source)
    stale = [name for name, (a, b) in spans.items() if not BLOCKS[name].same(text[a:b].rstrip("\n"), rendered[name])]
    for name, (a, b) in sorted(spans.items(), key=lambda item: -item[1][0]):
        if name in stale:
            text = text[:a] + rendered[name] + "\n" + text[b:]
    return text, stale


def published_files(repo: Path) -> list[Path]:
    """README.md and every page of docs/ (generated or not: a marker can sit in any of them)."""
    return [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]


def render_all(repo: Path, names: list[str] | None = None) -> dict[str, str]:
    return {name: BLOCKS[name].render(repo) for name in names or BLOCKS}


def used_blocks(repo: Path) -> dict[Path, list[str]]:
    return {path: list(_spans(path.read_text(encoding="utf-8"), str(path))) for path in published_files(repo)}
