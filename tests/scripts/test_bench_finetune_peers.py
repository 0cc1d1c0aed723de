"""scripts/bench_finetune_peers.py: every contender one step on the toy dataset, the test read once and judged."""

from __future__ import annotations

import copy
import json
import re
import shlex
from pathlib import Path

import pytest
import pytrec_eval
from beir_fixtures import REPO, load_script
from training_fixtures import make_dataset

from retrieval_lab.core import memory
from retrieval_lab.core.data import load_dataset
from retrieval_lab.core.params_file import load_params
from retrieval_lab.encoder import encode_dataset, load
from retrieval_lab.runs import read_run

TINY = ["train.max_steps=1", "train.batch_size=4", "train.max_seq_length=16", "train.validate_candidates=3",
        "dense.max_seq_length=32", "dense.batch_size=8", "evaluate.permutations=200"]


@pytest.fixture(scope="module")
def bench():
    yield from load_script("bench_finetune_peers")


@pytest.mark.slow
def test_each_contender_trains_one_step_and_the_test_is_read_once(bench, tmp_path, monkeypatch):
    dataset_dir, negatives = make_dataset(tmp_path)
    params = load_params(REPO / "params.yaml", TINY)
    base = tmp_path / "base"
    encode_dataset(load("builtin", "cpu"), load_dataset(dataset_dir), base, params.dense, ["title", "text"])
    args = {"dataset": str(dataset_dir), "negatives": str(negatives), "base_embeddings": str(base),
            "params": str(REPO / "params.yaml"), "overrides": TINY, "workdir": str(tmp_path / "work"),
            "st_epochs": 1, "st_batch": 16, "st_lr": 5e-5, "tuned_lrs": [1e-5, 5e-5]}
    kept_for = []  # ours runs as the stage does, keeping freed memory (every command's setting); the peers do not
    monkeypatch.setattr(memory, "keep_freed_memory", lambda: kept_for.append(len(kept_for)) or True)
    rows = []
    for name in bench.CONTENDERS:
        calls = len(kept_for)
        rows.append(bench.contend(args, name, 42))
        assert len(kept_for) - calls == (name in ("ours-hard", "ours-query", "st-backend")), name
    # one step each: 6 claims x 2 positives = 12 rows, one batch of 16 (128 for the cached loss); ours and the
    # sentence-transformers backend behind our stage: max_steps 1
    assert [r["steps"] for r in rows] == [1, 1, 1, 1, 2, 1]
    backend = rows[5]
    assert backend["contender"] == "st-backend" and [v["step"] for v in backend["validation"]] == [0, 1]
    report = (tmp_path / "work" / "st-backend-s42" / "model" / "training.json").read_text()
    assert '"backend": "sentence-transformers"' in report and '"lr": 5e-05' in report
    for row in rows[2:5]:  # validated before training (epoch 0) and after its one epoch; the best kept
        for tried in row["tried"]:
            assert [c["epoch"] for c in tried["curve"]] == [0, 1]
            assert tried["value"] == max(c["nDCG@10"] for c in tried["curve"])
    tuned = rows[4]
    assert tuned["selected"]["lr"] == max(tuned["tried"], key=lambda t: t["value"])["lr"]
    # the base model's validation is the same number for every contender (the same validator, same weights)
    firsts = {rows[0]["validation"][0]["nDCG@10"], backend["validation"][0]["nDCG@10"],
              *(t["curve"][0]["nDCG@10"] for r in rows[2:5] for t in r["tried"])}
    assert len(firsts) == 1
    result = bench.score(str(dataset_dir), str(dataset_dir / "qrels" / "test.tsv"), rows, 0.95, 200, 5)
    assert result["strata"] == {"all": 2, "unseen": 2}  # the toy's test claims cite no training positive
    # each (contender, seed)'s test mean against pytrec_eval on its run file
    test = load_dataset(dataset_dir, ["test"]).qrels["test"]
    for row in rows:
        run = read_run(row["run"])
        values = pytrec_eval.RelevanceEvaluator(test, {"ndcg_cut"}).evaluate(run)
        expected = sum(v["ndcg_cut_10"] for v in values.values()) / len(test)
        assert row["test"]["all"]["nDCG@10"] == pytest.approx(expected, abs=1e-9)
    # the family: 2 of ours x 4 peers x 2 measures x 2 strata, comparisons of identical values counted once (one
    # training step moves few rankings on this fixture, so many are the same test); peer - ours of the seed means
    distinct = {(c["mean_difference"], c["ci_low"], c["ci_high"], c["queries"]) for c in result["comparisons"]}
    assert len(result["comparisons"]) == 32 and result["family"]["family_size"] == len(distinct)
    means = {r["contender"]: r["nDCG@10 all"]["mean"] for r in result["summary"]}
    for c in result["comparisons"]:
        if c["measure"] == "nDCG@10" and c["stratum"] == "all":
            assert c["mean_difference"] == pytest.approx(means[c["peer"]] - means[c["ours"]], abs=1e-12)
    assert {g["ours"] for g in result["goals"]} == {"ours-hard", "ours-query"}
    alone = bench.score(str(dataset_dir), str(dataset_dir / "qrels" / "test.tsv"), rows[5:], 0.95, 200, 5)
    assert alone["comparisons"] == [] and alone["family"] is None
    assert alone["summary"][0]["nDCG@10 all"]["mean"] == rows[5]["test"]["all"]["nDCG@10"]
    # each row keeps its per-query test values, whose mean is its figure
    for row in rows:
        assert set(row["per_query"]["nDCG@10"]) == set(test)
        assert sum(row["per_query"]["nDCG@10"].values()) / len(test) == pytest.approx(row["test"]["all"]["nDCG@10"])

    # st-mnrl-tuned given st-mnrl's run as its 5e-5 candidate trains only the other rate: the reused candidate is
    # the training it would do (the tuned run above trained it again: the same curve), and so is its run
    reused = bench.contend({**args, "reuse": {42: [bench.reusable(rows[2])]}}, "st-mnrl-tuned", 42)
    assert [t.get("reused_from") for t in reused["tried"]] == [None, "st-mnrl"]
    assert reused["tried"][1] == {**rows[2]["tried"][0], "reused_from": "st-mnrl"}
    assert [t["curve"] for t in reused["tried"]] == [t["curve"] for t in tuned["tried"]]
    assert reused["selected"] == tuned["selected"] and reused["steps"] == tuned["steps"]
    assert reused["seconds"] == pytest.approx(sum(t["seconds"] for t in reused["tried"]) + reused["encode_seconds"])
    assert Path(reused["run"]).read_bytes() == Path(tuned["run"]).read_bytes()

    # parts of the grid run apart and merged give what one run gives: the same summary, family and goals
    zen4 = {"cpu": "AMD EPYC", "cpu_id": "AuthenticAMD family 25 model 17 stepping 1", "cpu_isa": ["avx512_bf16"]}

    st = {"batch": 16, "lr": 5e-5, "epochs": 1, "tuned_lrs": [1e-5, 5e-5], "cmnrl": bench.CMNRL}  # as args

    def piece(part: list[dict], machine: dict = zen4, date: str | None = "2026-12-05", lr: float = 5e-5) -> dict:
        part = copy.deepcopy(part)
        scored = bench.score(str(dataset_dir), str(dataset_dir / "qrels" / "test.tsv"), part, 0.95, 200, 5)
        return {"overrides": TINY, "st": {**st, "lr": lr}, "machine": machine, "date": date, "rows": part,
                "ours_keeps_freed_memory": True, **scored, "finished": True}

    whole = piece(rows[:5])
    merged = bench.merge([("b.json", piece(rows[2:5])), ("a.json", piece(rows[:2]))], 0.95, 200, 5)
    assert [(r["contender"], r["seed"]) for r in merged["rows"]] == [(r["contender"], 42) for r in rows[:5]]
    for key in ("summary", "comparisons", "family", "strata"):
        assert merged[key] == whole[key], key
    # ours and every peer in other parts: each goal's time half compares two sessions' hosts, and is not judged
    assert [g["time_same_session"] for g in whole["goals"]] == [True, True]
    assert merged["goals"] == [{**g, "time_same_session": False, "time_met": None, "met": False}
                               for g in whole["goals"]]
    # ours with the best peer in one part: judged as in one run, whatever part the other peers ran in
    best = whole["goals"][0]["best_peer"]
    assert {g["best_peer"] for g in whole["goals"]} == {best}
    together = [r for r in rows[:5] if r["contender"] in {"ours-hard", "ours-query", best}]
    apart = [r for r in rows[:5] if r not in together]
    assert bench.merge([("b.json", piece(apart)), ("a.json", piece(together))], 0.95, 200, 5)["goals"] == whole["goals"]
    assert [p["file"] for p in merged["pieces"]] == ["b.json", "a.json"] and merged["seeds"] == [42]
    assert [p["date"] for p in merged["pieces"]] == ["2026-12-05"] * 2  # each part's own date, rendered beside its command
    refusals = {"a.json: ours-hard seed 42 is in an earlier piece too": [piece(rows[:2]), piece(rows[:3])],
                "a.json: field overrides differs from b.json's": [piece(rows[2:3]), {**piece(rows[:2]), "overrides": []}],
                # ours timed on glibc's defaults (a part made before ours kept freed memory as the stage does)
                "a.json: field ours_keeps_freed_memory differs from b.json's": [
                    piece(rows[2:3]), {k: v for k, v in piece(rows[:2]).items() if k != "ours_keeps_freed_memory"}],
                "a.json: run on 'other (": [piece(rows[2:3]), piece(rows[:2], {**zen4, "cpu": "other"})],
                # one masked name, two CPUs: a Zen 3 without AVX-512 is not the Zen 4 the first part ran on
                "a.json: run on 'AMD EPYC (AuthenticAMD family 25 model 1 stepping 1; no listed ISA)', b.json on 'AMD EPYC (": [
                    piece(rows[2:3]), piece(rows[:2], {**zen4, "cpu_id": "AuthenticAMD family 25 model 1 stepping 1",
                                                       "cpu_isa": []})],
                # a part that records the name only cannot be shown to share the CPU, on either side of the merge
                "a.json: records its CPU's model name only ('AMD EPYC')": [piece(rows[2:3]), piece(rows[:2], {"cpu": "AMD EPYC"})],
                "b.json: records its CPU's model name only": [piece(rows[2:3], {"cpu": "AMD EPYC"}), piece(rows[:2])],
                "a.json: an interrupted bench": [piece(rows[2:3]), {**piece(rows[:2]), "finished": False}],
                "a.json: rows without per-query test values": [
                    piece(rows[2:3]), {**piece(rows[:2]), "rows": [{"contender": "ours-hard", "seed": 42}]}],
                "an incomplete grid: ours-hard at [42, 43], ours-query at [42]": [
                    piece(rows[:2]), piece([{**rows[0], "seed": 43}])]}
    for message, (b, a) in refusals.items():
        with pytest.raises(SystemExit, match=re.escape(message)):
            bench.merge([("b.json", b), ("a.json", a)], 0.95, 200, 5)
    # the command: --merge writes the merged JSON (the family's settings from params.yaml under the pieces' --set)
    files = [tmp_path / "b.json", tmp_path / "a.json"]
    for path, part in zip(files, (rows[2:5], rows[:2])):
        path.write_text(json.dumps(piece(part)), encoding="utf-8")
    out = tmp_path / "merged.json"
    bench.main(["--merge", *map(str, files), "--json", str(out)])
    assert json.loads(out.read_text(encoding="utf-8"))["comparisons"] == json.loads(json.dumps(whole["comparisons"]))
    before = files[0].read_bytes()
    with pytest.raises(SystemExit):  # a part is never written over
        bench.main(["--merge", *map(str, files), "--json", str(files[0])])
    assert files[0].read_bytes() == before
    with pytest.raises(SystemExit):  # without --merge, the inputs of training are required
        bench.main(["--json", str(out)])
    with pytest.raises(SystemExit) as refused:  # nor is a part reused written over: argparse's refusal, first
        bench.main(["--dataset", str(dataset_dir), "--negatives", str(negatives), "--base-embeddings", str(base),
                    "--test-qrels", str(dataset_dir / "qrels" / "test.tsv"), "--reuse", str(files[0]), "--json",
                    str(files[0])])
    assert refused.value.code == 2 and files[0].read_bytes() == before

    # --reuse: an earlier part's st-mnrl is st-mnrl-tuned's candidate at its rate; only its validation reaches the
    # training process, and the part's test values become the row's if it wins (main), measured on these claims
    head = {"overrides": TINY, "st": st, "machine": zen4, "ours_keeps_freed_memory": True}
    candidate, part_row = bench.reuse_parts([str(files[0])], head, [42])[42][0]  # b.json: rows 2-4, st-mnrl first
    assert candidate["reused_from"] == "st-mnrl (b.json)" and candidate["run"] is None
    assert "per_query" not in candidate and "test" not in candidate and candidate["value"] == rows[2]["tried"][0]["value"]
    # the other rate's candidate reused from this run too (tuned's 1e-5 training), so nothing trains here
    kept_run = tmp_path / "tuned-run.trec"  # where the tuned row writes its own run: a copy of what it held
    kept_run.write_bytes(Path(tuned["run"]).read_bytes())
    other = bench.reusable({**tuned, "tried": tuned["tried"][:1], "run": str(kept_run)})
    won = bench.contend({**args, "reuse": {42: [other, {**candidate, "value": 2.0}]}}, "st-mnrl-tuned", 42)
    assert won["run"] is None and won["selected"] == {"lr": 5e-5, "epoch": candidate["selected_epoch"]}
    assert won["seconds"] == pytest.approx(other["seconds"] + candidate["seconds"] + candidate["encode_seconds"])
    assert won["peak_mb"] == max(other["peak_mb"], candidate["peak_mb"]) and won["steps"] == 1 + candidate["steps"]
    lost = bench.contend({**args, "reuse": {42: [other, {**candidate, "value": -1.0}]}}, "st-mnrl-tuned", 42)
    assert lost["selected"]["lr"] == 1e-5 and Path(lost["run"]).read_bytes() == kept_run.read_bytes()
    scored = bench.score(str(dataset_dir), str(dataset_dir / "qrels" / "test.tsv"),
                         [copy.deepcopy(rows[0]), {**won, "per_query": copy.deepcopy(part_row["per_query"])}], 0.95, 200, 5)
    assert scored["summary"][1]["nDCG@10 all"]["mean"] == pytest.approx(part_row["test"]["all"]["nDCG@10"], abs=1e-12)
    one_claim = {m: dict(list(v.items())[:1]) for m, v in part_row["per_query"].items()}
    with pytest.raises(SystemExit, match="measured on other test claims"):
        bench.score(str(dataset_dir), str(dataset_dir / "qrels" / "test.tsv"), [{**won, "per_query": one_claim}],
                    0.95, 200, 5)
    refused = {"an interrupted bench": {**piece(rows[2:3]), "finished": False},
               "field overrides differs": {**piece(rows[2:3]), "overrides": []},
               "field st differs": {**piece(rows[2:3]), "st": {**st, "batch": 32}},
               "not on this machine's": piece(rows[2:3], {**zen4, "cpu_id": "AuthenticAMD family 25 model 1 stepping 1"}),
               "no st-mnrl row at seeds [42]": piece(rows[:2]),
               # a candidate no selection here would read is refused, not dropped
               "st-mnrl seed 42 trained at lr 3e-05, not one of --tuned-lrs 1e-05 5e-05": piece(
                   [{**rows[2], "tried": [{**rows[2]["tried"][0], "lr": 3e-5}]}], lr=3e-5)}
    for message, part in refused.items():
        files[1].write_text(json.dumps(part), encoding="utf-8")
        with pytest.raises(SystemExit, match=re.escape(message)):
            bench.reuse_parts([str(files[1])], head, [42])
    # a won or lost row built on a part's candidate sums another session's training: its time half is not judged,
    # where a run's own st-mnrl reused in the same session is
    for peer, judged in ((won, False), (lost, False), (reused, True)):
        rows_ = [copy.deepcopy(rows[0]), {**peer, "per_query": copy.deepcopy(part_row["per_query"])}]
        goal = bench.summarise(rows_, scored["strata_queries"], 0.95, 200, 5)["goals"][0]
        assert goal["best_peer"] == "st-mnrl-tuned" and goal["time_same_session"] is judged
        assert goal["time_met"] is (goal["time_ratio"] <= 0.8 if judged else None)

    # the tuned contender's candidates run one part per rate (--only st-mnrl --st-lr RATE), hours each on a CPU,
    # and its run trains nothing: the winner's test values are its part's, its time every part's
    at_1e5 = {**copy.deepcopy(rows[2]), "tried": [{**tuned["tried"][0], "value": 2.0}], "run": None,
              "per_query": copy.deepcopy(rows[0]["per_query"])}  # ours-hard's values: which part's were taken shows
    slow = tmp_path / "st-mnrl-1e-05.json"
    slow.write_text(json.dumps(piece([at_1e5], lr=1e-5)), encoding="utf-8")
    files[1].write_text(json.dumps(piece(rows[2:3])), encoding="utf-8")
    found = bench.reuse_parts([str(files[1]), str(slow)], head, [42])[42]
    assert [(c["lr"], c["reused_from"]) for c, _ in found] == [
        (5e-5, "st-mnrl (a.json)"), (1e-5, "st-mnrl (st-mnrl-1e-05.json)")]
    with pytest.raises(SystemExit, match=re.escape("st-mnrl seed 42 at lr 1e-05 is in an earlier --reuse part too")):
        bench.reuse_parts([str(slow), str(slow)], head, [42])
    with pytest.raises(SystemExit, match="field st differs"):  # nor does a candidate's part merge as st-mnrl
        bench.merge([("a.json", piece(rows[2:3])), ("slow.json", piece([at_1e5], lr=1e-5))], 0.95, 200, 5)
    from retrieval_lab.publishing import benchmarks
    monkeypatch.setattr(benchmarks, "machine_info", lambda: zen4)  # the parts' CPU: this host's may be any
    out = tmp_path / "tuned-from-parts.json"
    bench.main(["--dataset", str(dataset_dir), "--negatives", str(negatives), "--base-embeddings", str(base),
                "--test-qrels", str(dataset_dir / "qrels" / "test.tsv"), *[a for o in TINY for a in ("--set", o)],
                "--seeds", "42", "--only", "st-mnrl-tuned", "--st-epochs", "1", "--st-batch", "16",
                "--tuned-lrs", "1e-5", "5e-5",
                "--reuse", str(files[1]), str(slow), "--json", str(out)])
    result = json.loads(out.read_text(encoding="utf-8"))
    row = result["rows"][0]
    assert row["steps"] == 2 and row["selected"]["lr"] == 1e-5  # nothing trained: each candidate's one step
    # where each candidate was trained, recorded and carried into a merge (the page shows those commands)
    assert [(r["file"], r["lr"], r["rows"], r["date"]) for r in result["reused"]] == [
        (str(files[1]), 5e-5, [["st-mnrl", 42]], "2026-12-05"), (str(slow), 1e-5, [["st-mnrl", 42]], "2026-12-05")]
    assert bench.merge([("t.json", result)], 0.95, 200, 5)["pieces"][0]["reused"] == result["reused"]
    assert [t["reused_from"] for t in row["tried"]] == ["st-mnrl (st-mnrl-1e-05.json)", "st-mnrl (a.json)"]
    assert row["per_query"] == json.loads(json.dumps(rows[0]["per_query"]))


def test_the_default_overrides_are_the_documented_quality_command(bench):
    page = (REPO / "docs" / "datasets.md").read_text(encoding="utf-8")
    match = re.search(r"# quality.*?\n(.*?dvc exp run -n scifact .*?)\n```", page, re.DOTALL)
    words = shlex.split(match.group(1).replace("\\\n", " "))
    assert [words[i + 1] for i, w in enumerate(words) if w == "-S" and words[i + 1] != "dataset=scifact"] == \
        bench.QUALITY


def test_the_lab_notes_merges_of_the_zen3_parts_reproduce_the_committed_merges(tmp_path):
    """Each merge command docs/lab-notes.md shows for the Zen 3's parts, run as written beside copies of the
    committed parts, gives the committed merged figures and intervals (to 1e-9: the merge sums floats, whose order a
    CPU's numpy may change in the last bits; the sign flips are seeded)."""
    import subprocess
    import sys

    notes = " ".join((REPO / "docs" / "lab-notes.md").read_text(encoding="utf-8").split())
    shown = re.findall(r"`(\.venv/bin/python scripts/bench_finetune_peers\.py --merge "
                       r"bench-results/issue53/peers-zen3-s4\d-partA\.json [^`]*)`", notes)
    assert len(shown) >= 2, "the lab notes no longer show the Zen 3 merges"
    for number, command in enumerate(shown):
        argv = shlex.split(command)
        parts = [a for a in argv if a.endswith(".json")]
        assert argv[-2] == "--json" and len(parts) >= 3
        where = tmp_path / str(number)
        (where / "bench-results" / "issue53").mkdir(parents=True)
        for part in parts[:-1]:
            (where / part).write_bytes((REPO / part).read_bytes())
        done = subprocess.run([sys.executable, str(REPO / argv[1]), *argv[2:]], cwd=where, capture_output=True,
                              text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        made = json.loads((where / parts[-1]).read_text(encoding="utf-8"))
        committed = json.loads((REPO / parts[-1]).read_text(encoding="utf-8"))
        for key in ("summary", "comparisons", "family", "goals", "pieces", "seeds"):
            assert _close(made[key], committed[key]), (command, key)
        assert [g["met"] for g in made["goals"]] == [False, False]  # time met, quality not, for both of ours


def _close(a, b) -> bool:
    """Equal structures, floats to 1e-9."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-9
    return a == b
