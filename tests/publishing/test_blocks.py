"""retrieval_lab.publishing.blocks: every table README.md and docs/ publish is what the committed JSON renders."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from beir_fixtures import REPO

from retrieval_lab.core.errors import InputError
from retrieval_lab.publishing import blocks

PARAMS = REPO / "params.yaml"


def _publish(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "retrieval_lab.publishing", *args], check=False,
                          capture_output=True, text=True, env=env, timeout=120)


def test_every_published_block_and_page_is_what_the_committed_files_give():
    result = _publish("--check")
    assert result.returncode == 0, result.stderr
    used = blocks.used_blocks(REPO)
    assert used[REPO / "README.md"] == ["headline"]
    assert sorted(n for names in used.values() for n in names) == sorted(blocks.BLOCKS)  # every renderer is used


def _compare(pairs: dict) -> dict:
    return {"measure": "nDCG@10", "adjustment": "bonferroni", "family_size": len(pairs), "family_level": 0.95,
            "level": 0.95, "permutations": 1000, "seed": 1, "power": 0.8, "pairs": pairs}


def _metrics(folder, runs: dict[str, dict]):
    folder.mkdir(parents=True, exist_ok=True)
    for name, values in runs.items():
        (folder / f"{name}.json").write_text(json.dumps({"queries_evaluated": 2, **values}))
    return folder


def test_support_tables_are_rendered_to_four_decimals(tmp_path):
    # bm25: 0.57155 rounds up to 0.5716; R@100 is missing ("-"); "zeta" is no known run: it follows the known
    # ones under its own name
    metrics = _metrics(tmp_path / "metrics", {
        "zeta": {"nDCG@10": 1, "R@10": 1, "R@100": 1, "RR@10": 1, "AP@100": 1, "Success@1": 1},
        "bm25": {"nDCG@10": 0.57155, "R@10": 0.5, "RR@10": 1 / 3, "AP@100": 0.25, "Success@1": 0.0}})
    assert blocks.support_table(metrics, PARAMS) == (
        "| run | nDCG@10 | R@10 | R@100 | RR@10 | AP@100 | Success@1 |\n"
        "|---|---:|---:|---:|---:|---:|---:|\n"
        "| bm25 | 0.5716 | 0.5000 | - | 0.3333 | 0.2500 | 0.0000 |\n"
        "| zeta | 1.0000 | 1.0000 | 1.0000 | 1.0000 | 1.0000 | 1.0000 |")
    pair = {"baseline": "bm25", "candidate": "zeta", "queries": 2, "queries_only_in_one": 0,
            "baseline_mean": 0.57155, "candidate_mean": 1.0, "mean_difference": 0.42846, "ci_low": 0.1,
            "ci_high": 0.7, "p_value": 0.01, "p_adjusted": 0.01, "mde": 0.3, "wins": 2, "ties": 0, "losses": 0,
            "verdict": "candidate better", "level": 0.95, "tail": 10}
    (metrics / "compare.json").write_text(json.dumps(_compare({"bm25 vs zeta": pair})))
    assert "| bm25 | zeta | 2 | 0.5716 | 1.0000 | +0.4285 | [+0.1000, +0.7000] |" in blocks.compare_block(metrics)


def test_the_headline_shows_support_and_scifact_with_its_strata(tmp_path):
    support = _metrics(tmp_path / "support", {"bm25": {"nDCG@10": 0.5}, "dense": {"nDCG@10": 0.25}})
    scifact = _metrics(tmp_path / "scifact", {
        "bm25": {"nDCG@10": 0.6, "seen": {"queries": 1, "nDCG@10": 0.7}, "unseen": {"queries": 1, "nDCG@10": 0.5}},
        "dense": {"nDCG@10": 0.123456, "seen": {"queries": 1}, "unseen": {"queries": 1}}})
    lines = blocks.headline_table(support, scifact).splitlines()
    assert lines[0] == ("| nDCG@10 on the test split | support (2 queries) | SciFact (2 queries) | SciFact seen (1 queries) "
                        "| SciFact unseen (1 queries) |")
    assert lines[2] == "| bm25 | 0.5000 | 0.6000 | 0.7000 | 0.5000 |"
    assert lines[3] == "| dense (base all-MiniLM-L6-v2) | 0.2500 | 0.1235 | - | - |"
    assert lines[4] == "| dense-ft-hard | - | - | - | - |"  # a run neither folder holds


def test_fill_replaces_only_stale_blocks_and_check_names_them(tmp_path):
    text = ("intro\n<!-- BEGIN generated:headline -->\nold\n<!-- END generated:headline -->\nmid\n"
            "<!-- BEGIN generated:support-results -->\nsame\n<!-- END generated:support-results -->\nend\n")
    filled, stale = blocks.fill(text, {"headline": "new\ntable", "support-results": "same"}, "x.md")
    assert stale == ["headline"]
    assert filled == text.replace("\nold\n", "\nnew\ntable\n")
    assert blocks.fill(filled, {"headline": "new\ntable", "support-results": "same"}, "x.md") == (filled, [])


def test_the_numbers_of_the_experiments_table_may_move_one_unit_of_their_last_digit():
    assert blocks.same_numbers("| 0.7025 [+0.0006, -0.0309] |", "| 0.7026 [+0.0005, -0.0309] |")
    assert not blocks.same_numbers("| 0.7025 |", "| 0.7027 |")
    assert not blocks.same_numbers("| 0.7025 * |", "| 0.7025 |")


@pytest.mark.parametrize("text, said", [
    ("<!-- BEGIN generated:nope -->\n<!-- END generated:nope -->\n", "x.md:1: no renderer for generated:nope (known: headline, support-results, support-compare, experiments-support, faiss-real, msmarco-scale, msmarco-peer, msmarco-quiet, msmarco-tantivy, sharded, dense-sharded, scale-billion)"),
    ("<!-- BEGIN generated:headline -->\n", "x.md: generated:headline has no END marker"),
    ("a\n<!-- END generated:headline -->\n", "x.md:2: END generated:headline without its BEGIN"),
    ("<!-- BEGIN generated:headline -->\n<!-- END generated:headline -->\n" * 2, "x.md:3: generated:headline appears twice"),
])
def test_bad_markers_are_one_line_naming_file_and_line(text, said):
    with pytest.raises(InputError) as err:
        blocks.fill(text, {}, "x.md")
    assert str(err.value) == said


def test_a_stale_readme_fails_the_check_and_is_rewritten(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("<!-- BEGIN generated:headline -->\n| stale |\n<!-- END generated:headline -->\n")
    (tmp_path / "docs").mkdir()
    rendered = blocks.render_all(REPO, ["headline"])
    filled, stale = blocks.fill(readme.read_text(), rendered, str(readme))
    assert stale == ["headline"] and "| stale |" not in filled
    assert "| bm25 | 0.5716 |" in filled  # the committed support metrics' BM25 nDCG@10


def test_msmarco_scale_block_says_how_the_search_ran_and_each_goal_met_or_not(tmp_path):
    step = {"seconds": [10.0, 100.0], "peak_mb": [100.0, 900.0], "exponents": [1.02]}
    ours = {"index": {"index_mb": 6.0, "postings": 2**20, "tf_dtype": "uint16"}, "search": {"means": {"nDCG@10": 0.91}}}
    data = {"sizes": [1000, 10000], "queries": 70, "depth": 1000, "workers": 2,
            "table": {"bm25_index": step, "bm25_search": {**step, "seconds": [40.0, 400.0]}},
            "goals": {"index_seconds_at_msmarco": 900, "search_seconds_at_msmarco": 300, "peak_mb": 12288,
                      "exponent": 1.1},
            "results": [{"documents": 1000, "identical_to_reference": True, "ours": ours},
                        {"documents": 10000, "ours": ours, "bm25_seconds": 50.0, "bm25s_seconds": 200.0,
                         "time_ratio": 0.25, "peak_mb": 900.0, "bm25s_peak_mb": 1800.0, "peak_ratio": 0.5}],
            "machine": {"cpu": "CPU", "usable_cores": 2}}
    path = tmp_path / "scale.json"
    path.write_text(json.dumps(data))
    text = blocks.msmarco_scale_table(path)
    assert "the search in 2 processes (`bm25.workers: 2`; its peak counts each worker's)" in text
    assert "| 70 queries ≤ 300 s | 400 s | **not met** |" in text
    assert "| index ≤ 900 s | 100 s | met |" in text
    assert "6.0 bytes a posting on disk (1,048,576 postings, uint16 tf)" in text  # an index of format /1
    ours["index"] = {"index_mb": 2.0, "postings": 2**20, "postings_bytes": 1_782_579}  # format /2: varint postings
    path.write_text(json.dumps(data))
    assert "2.0 bytes a posting on disk (1,048,576 postings, varint postings of 1.70 bytes each)" in \
        blocks.msmarco_scale_table(path)
    assert "| run at 1,000 identical to the reference code's | yes | met |" in text
    assert "| `bm25_search` | 40 | 400 | 100 | 900 | 1.00 |" in text  # log(400 / 40) / log(10000 / 1000)
    assert "- **1,000 passages**: run byte-identical to the reference code's; index 6.0 bytes a posting" in text
    assert ("- **10,000 passages**: ours (index + load + search) 50.0 s against bm25s's 200.0 s (**0.25x**), peak 900 "
            "against 1,800 MiB (**0.50x**)") in text
    data["results"][0]["identical_to_reference"] = False
    del data["workers"]
    path.write_text(json.dumps(data))
    text = blocks.msmarco_scale_table(path)
    assert "at depth 1,000, one thread," in text and "| no | **not met** |" in text


def test_msmarco_tantivy_block_shows_each_contender_and_each_goal_met_or_not(tmp_path):
    def step(seconds, peak):
        return {"seconds": seconds, "peak_mb": peak}

    def peer(index, search, peak, ndcg, ours_seconds=50.0, ours_peak=600.0):
        return {"steps": {"tantivy_index": step(index, 100.0), "tantivy_search": step(search, peak)},
                "seconds": index + search, "peak_mb": peak, "means": {"nDCG@10": ndcg},
                "time_ratio": ours_seconds / (index + search), "peak_ratio": ours_peak / peak}

    data = {"queries": 70, "depth": 1000, "repeats": 3, "cpu": 0, "tantivy_goals": {"time_ratio": 1.0, "peak_ratio": 1.0},
            "load_average": {"start": [3.25, 2.0, 1.0], "end": [4.0, 2.0, 1.0]},
            "machine": {"cpu": "CPU", "usable_cores": 2, "date": "2026-12-04"},
            "results": [{"documents": 10000, "bm25_seconds": 50.0, "peak_mb": 600.0, "peak_mb_all_steps": 660.0,
                         "ours": {"search": {
                "means": {"nDCG@10": 0.91}}}, "steps": {"bm25_index": step(20.0, 300.0),
                                                         "bm25_load_index": step(0.5, 80.0),
                                                         "bm25_search": step(29.5, 600.0)},
                         "tantivy": {"en_stem": peer(30.0, 40.0, 500.0, 0.905), "stop": peer(20.0, 20.0, 700.0, 0.91)},
                         "rounds": {"ours": [50.0, 52.5], "en_stem": [70.0, 71.0], "stop": [40.0, 44.0]}}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    text = blocks.msmarco_tantivy_table(path)
    assert "load average 3.2 at the start, 4.0 at the end" in text and "fastest of 3 round(s)" in text
    assert "one search thread on each side (every process of each bound to CPU 0), each index on disk" in text
    assert "| 10,000 | ours | 20.0 | 30.0 (opening the index included) | 50.0 | 600 | 0.9100 | | |" in text
    # 50 / 70 = 0.71 <= 1: met; 600 / 500 = 1.20 > 1: not met; 50 / 40 = 1.25: not met; 600 / 700 = 0.86: met
    assert "| | tantivy (`en_stem`) | 30.0 | 40.0 | 70.0 | 500 | 0.9050 | 0.71x: met | 1.20x: **not met** |" in text
    assert "| | tantivy (our stop list) | 20.0 | 20.0 | 40.0 | 700 | 0.9100 | 1.25x: **not met** | 0.86x: met |" in text
    assert "10,000: ours 50.0, 52.5; en_stem 70.0, 71.0; stop 40.0, 44.0." in text
    assert "writing the run to a TREC file afterwards, which no peer does, peaks at 660 MiB at 10,000 passages." in text


def test_sharded_block_renders_per_shard_ranges_the_rates_and_the_model(tmp_path):
    def shard(docs, build, search, peak):
        return {"documents": docs, "postings": docs * 37, "index_mb": docs * 6e-5, "build_seconds": build,
                "search_seconds": search, "worker_peak_mb": peak}

    data = {"documents": 1000, "queries": 10, "depth": 100,
            "single_index": {"build_seconds": 2.0, "search_seconds": 3.0, "peak_mb": 400.0},
            "sharded": [{"shards": 2, "workers": 2, "phases_seconds": {"dfs": 0.5, "merge": 0.004},
                         "per_shard": [shard(500, 1.0, 2.0, 300.0), shard(500, 1.5, 2.5, 310.0)],
                         "identical_to_single_index": True},
                        {"shards": 4, "workers": 2, "phases_seconds": {"dfs": 0.5, "merge": 0.012},
                         "per_shard": [shard(250, 0.5, 1.0, 290.0)] * 3 + [shard(250, 0.75, 1.0, 600.0)],
                         "identical_to_single_index": False}],
            "machine": {"cpu": "CPU", "usable_cores": 2, "date": "2026-12-04"}}
    path = tmp_path / "sharded.json"
    path.write_text(json.dumps(data))
    text = blocks.sharded_table(path)
    assert "| build seconds per shard (task) | 2.0 | 1.0, 1.5 | 0.5 to 0.8 |" in text
    assert "| build ms per passage (task) | 2.000 | 2.000, 3.000 | 2.000 to 3.000 |" in text
    assert "| documents per shard | 1,000 | 500 | 250 |" in text  # equal values once
    # merge per entry: 0.004 s / (10 x 2 x 100) = 2 µs, 0.012 s / (10 x 4 x 100) = 3 µs
    assert "| merge µs per entry (queries × shards × depth) | – | 2.00 | 3.00 |" in text
    assert "| run identical to the single index's | – | yes | **no** |" in text
    # slowest rates: 3 ms a passage, 6e-5 MiB a passage, 3 µs an entry; 8,841,823 passages in 16 shards
    assert "16 shards of 552,613 build in about 27.6 minutes each" in text  # 3e-3 * 8841823 / 16 / 60
    assert "into about 0.03 GiB of index arrays each" in text  # 6e-5 * 8841823 / 16 / 1024
    assert "leave 112M entries for the client to merge, about 5.6 minutes" in text  # 3e-6 * 112e6 / 60


def _dense_row(factory, setting, per_shard, merge=0.0, recall=1.0, **extra):
    return {"factory": factory, "setting": setting, "shards": len(per_shard), "merge_seconds": merge,
            "recall@100_vs_flat": recall, "per_shard": [
                {"documents": d, "index_bytes": b, "build_seconds": s, "search_seconds": q, "worker_peak_mb": m}
                for d, b, s, q, m in per_shard], **extra}


DENSE = {"documents": 1000, "real_documents": 100, "dim": 384, "queries": 10, "depth": 100, "workers": 2,
         "machine": {"cpu": "CPU", "usable_cores": 2, "date": "2026-12-05"},
         "rows": [_dense_row("Flat", None, [(1000, 1536e3, 0.1, 0.05, 300.0)]),
                  _dense_row("Flat", None, [(500, 768e3, 0.05, 0.02, 300.0), (500, 768e3, 0.05, 0.04, 310.0)],
                             merge=0.0002, scores_identical_to_one_flat_index=True),
                  _dense_row("HNSW32,SQ8", 256, [(1000, 640e3, 2.0, 0.01, 320.0)], recall=0.95),
                  _dense_row("IVF1024,SQ8", 16, [(1000, 400e3, 1.0, 0.001, 330.0)], recall=0.9)]}


def test_dense_sharded_block_renders_each_shard_the_merge_and_recall(tmp_path):
    path = tmp_path / "dense-sharded.json"
    path.write_text(json.dumps(DENSE))
    text = blocks.dense_sharded_table(path)
    # 10 queries in 0.02 and 0.04 s: 500 and 250 queries/s; 768e3 bytes for 500 vectors: 1,536 a vector
    assert "| `Flat` | exact | 2 | 500 | 1,536 | 0.1 | 250 to 500 | 300 to 310 | 0.2 | 1.000 (scores identical) |" in text
    assert "| `HNSW32,SQ8` | efSearch 256 | 1 | 1,000 | 640 | 2.0 | 1,000 | 320 | 0.0 | 0.950 |" in text
    assert "| `IVF1024,SQ8` | nprobe 16 | 1 | 1,000 | 400 | 1.0 | 10,000 | 330 | 0.0 | 0.900 |" in text


def test_the_billion_model_is_worked_from_the_per_shard_figures(tmp_path):
    """Hand-worked: 10M passages a shard -> 100 shards; every figure below from the files written here."""
    results = tmp_path / "bench-results"
    results.mkdir()
    scale = {"sizes": [1000, 10_000_000], "queries": 1000, "depth": 1000, "workers": 2,
             "machine": {"usable_cores": 2},
             "table": {"bm25_index": {"seconds": [1.0, 600.0], "peak_mb": [10.0, 3000.0]},
                       "bm25_search": {"seconds": [1.0, 200.0], "peak_mb": [10.0, 4096.0]}},
             "results": [{"ours": {"index": {"index_mb": 2048.0}}}]}
    sharded = {"queries": 10, "depth": 100, "sharded": [{"shards": 2, "phases_seconds": {"merge": 0.004}}]}
    faiss = {"documents": 1_000_000, "depth": 100, "machine": {"cpu_count": 2},
             "rows": [{"factory": "Flat", "setting": None, "queries_per_second": 200.0, "build_seconds": 3.0},
                      {"factory": "HNSW32,SQ8", "setting": 256, "queries_per_second": 2000.0, "build_seconds": 100.0},
                      {"factory": "IVF4096,SQ8", "setting": 64, "queries_per_second": 1000.0, "build_seconds": 50.0}]}
    encode = {"rows": [{"contender": "ours", "docs_per_s": 25.0}, {"contender": "st", "docs_per_s": 99.0}]}
    for name, data in (("scale-msmarco-8.8m", scale), ("sharded", sharded), ("faiss-real", faiss),
                       ("dense-sharded", DENSE), ("encode", encode)):
        (results / f"{name}.json").write_text(json.dumps(data))
    text = blocks.billion_table(tmp_path)
    assert "**1,000,000,000 passages in 100 shards of 10,000,000**" in text
    assert "| BM25 index build | 10.0 min | 10.0 min wall, 100 machines |" in text
    assert "| BM25 index on disk | 2.00 GiB | 0.20 TiB |" in text  # 2 GiB x 100 / 1024
    # 1000 queries in 200 s: 5.0 a second; the merge: 0.004 s / (10 x 2 x 100) = 2 µs an entry, 100 x 1000 entries
    # a query: 200 ms, 5.0 queries/s; at depth 100, 20 ms
    assert "| BM25 queries/s at depth 1,000 | 5.0 | 5.0 | every query visits every shard; the client merges 100,000 " \
           "entries a query in 200 ms (5.0 queries/s on its one thread) |" in text
    assert "| BM25 at depth 100 | 5.0 | 5.0 | a tenth of the entries to merge (20.0 ms a query)" in text
    # Flat: 1,536 bytes a vector: 14.31 GiB a shard, 1.40 TiB in all; 200 q/s at 1M, a tenth at 10M; dense merge
    # 0.0002 s / 2,000 entries = 100 ns, 100 x 100 entries a query: 1.00 ms
    assert "| dense `Flat` (exact): index in memory | 14.31 GiB | 1.40 TiB | 1,536 bytes a vector" in text
    assert "| dense `Flat` (exact): queries/s at depth 100 | 20 | 20 | 200 at 1,000,000 (2 cores), search and build " \
           "∝ n; the client merges a query's 10,000 entries in 1.00 ms (100 ns an entry" in text
    assert "| dense `Flat` (exact): index build | 0.5 min | 0.5 min wall |" in text  # 3 s x 10
    # HNSW: 2000 x ln(1e6) / ln(1e7) = 1,714 (capped by the merge at 1,000); build 100 x 10 x 7/6 = 1,167 s
    assert "| dense `HNSW32,SQ8` (efSearch 256): queries/s at depth 100 | 1,714 | 1,000 |" in text
    assert "| dense `HNSW32,SQ8` (efSearch 256): index build | 19.4 min |" in text
    assert "| dense `HNSW32,SQ8` (efSearch 256): index in memory | 5.96 GiB | 0.58 TiB | 640 bytes" in text
    # IVF: a tenth of 1,000 q/s, ten times 50 s; the codec's bytes from the IVF1024,SQ8 row
    assert "| dense `IVF4096,SQ8` (nprobe 64): queries/s at depth 100 | 100 | 100 |" in text
    assert "| dense `IVF4096,SQ8` (nprobe 64): index in memory | 3.73 GiB | 0.36 TiB | 400 bytes" in text
    assert "| encoding (CPU, base model) | 111 h | 111 h wall, 100 machines | 25.0 SciFact abstracts/s" in text
