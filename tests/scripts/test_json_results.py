"""A script's --json (scripts/_bench.py's JsonResult) obeys the commands' rule: it replaces only what the same
script wrote, never an input, nothing inside a dataset, and it refuses before any work, in one line."""

from __future__ import annotations

import inspect
import json
import sys
from argparse import Namespace

import pytest
from beir_fixtures import REPO, load_script

RUN_LINE = "q1 Q0 d1 1 2.5 bm25\n"
KEYS = ("rows", "ratio")
# every script with a --json, and what its command line needs besides it to be parsed
SCRIPTS = {
    "bench_bm25": [], "bench_dense_sharded": ["--embeddings", "{tmp}"], "bench_encode": [],
    "bench_faiss": ["--embeddings", "{tmp}"], "bench_finetune": ["--run", "{tmp}/missing.trec"],
    "bench_finetune_peers": [], "bench_metrics": [], "bench_page": [], "bench_recipes_scale": [],
    "bench_scale": [], "bench_sharded": [], "bench_train": [], "bench_train_levers": [],
    "bench_validation": ["--dataset", "{tmp}", "--negatives", "{tmp}/n.jsonl", "--base-embeddings", "{tmp}"],
    "check_gpu": [], "choose_int8_calibration": ["--dataset", "{tmp}"], "choose_int8_group": ["--dataset", "{tmp}"],
    "measure_float_drift": [], "time_repro": [],
}


@pytest.fixture(scope="module")
def bench():
    yield from load_script("_bench")


def _refused(result, args: Namespace) -> str:
    with pytest.raises(SystemExit) as refused:
        result.check(args)
    message = str(refused.value.code)
    assert "\n" not in message
    return message


def test_it_replaces_its_own_result_an_empty_file_or_nothing(bench, tmp_path):
    result = bench.JsonResult("scripts/x.py", KEYS)
    out = tmp_path / "new" / "out.json"
    result.check(Namespace(json=str(out)))
    result.write(str(out), {"rows": [1], "ratio": 0.5, "goal": 1.0})
    assert json.loads(out.read_text(encoding="utf-8")) == {"rows": [1], "ratio": 0.5, "goal": 1.0}
    result.check(Namespace(json=str(out)))  # what it wrote before: replaced
    result.write(str(out), {"rows": [], "ratio": 2.0})
    assert json.loads(out.read_text(encoding="utf-8")) == {"rows": [], "ratio": 2.0}
    empty = tmp_path / "empty.json"
    empty.touch()
    result.check(Namespace(json=str(empty)))
    result.check(Namespace(json=None))
    result.write(None, {"rows": [], "ratio": 1.0})  # no --json: nothing written anywhere
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.json", "new"]
    with pytest.raises(AssertionError, match="lacks its own keys"):  # a result must carry the keys it is known by
        result.write(str(out), {"rows": []})


def test_it_refuses_what_it_did_not_write_inputs_and_datasets(bench, tmp_path):
    result = bench.JsonResult("scripts/x.py", KEYS)
    files = {"run.trec": RUN_LINE, "note.md": "# my notes\n", "other.json": json.dumps({"rows": [], "goal": 1}, indent=2),
             "list.json": "[1, 2]\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    expected = {"run.trec": "is a TREC run; scripts/x.py replaces only its own results (a JSON object with rows, ratio)",
                "note.md": "is a file that is not a JSON object", "other.json": "is a JSON object without ratio",
                "list.json": "is a file that is not a JSON object"}
    for name, words in expected.items():
        path = tmp_path / name
        assert _refused(result, Namespace(json=str(path))) == (
            f"{path}: --json {words}" + ("" if name == "run.trec" else
                                         "; scripts/x.py replaces only its own results (a JSON object with rows, "
                                         "ratio)") + "; choose another --json")
    # an input named on the command line, as itself or as a folder holding the output
    own = tmp_path / "earlier.json"
    own.write_text(json.dumps({"rows": [], "ratio": 1.0}), encoding="utf-8")  # a result of its own, yet read here
    assert _refused(result, Namespace(json=str(own), merge=[str(own)])) == (
        f"{own}: --json is {own}, which scripts/x.py reads; choose another --json")
    folder = tmp_path / "embeddings"
    folder.mkdir()
    assert "lies inside" in _refused(result, Namespace(json=str(folder / "r.json"), embeddings=str(folder)))
    # a dataset: the BEIR folder holding the output, wherever the command line points
    beir = tmp_path / "col"
    (beir / "qrels").mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl"):
        (beir / name).write_text('{"_id": "1", "text": "a"}\n', encoding="utf-8")
    assert _refused(result, Namespace(json=str(beir / "qrels" / "r.json"))) == (
        f"{beir / 'qrels' / 'r.json'}: --json lies inside the BEIR folder {beir}; scripts/x.py never writes into a "
        "dataset")
    assert "is a file, not" in _refused(result, Namespace(json=str(tmp_path / "run.trec" / "r.json")))
    assert "folder" in _refused(result, Namespace(json=str(folder)))
    for name, text in files.items():
        assert (tmp_path / name).read_text(encoding="utf-8") == text
    assert not (folder / "r.json").exists() and not (beir / "qrels" / "r.json").exists()


def test_what_appears_while_it_runs_is_refused_at_the_write(bench, tmp_path):
    result = bench.JsonResult("scripts/x.py", KEYS)
    out = tmp_path / "out.json"
    result.check(Namespace(json=str(out)))
    out.write_text(RUN_LINE, encoding="utf-8")  # a run written there meanwhile (hours of benchmark)
    with pytest.raises(SystemExit, match="is a TREC run"):
        result.write(str(out), {"rows": [], "ratio": 1.0})
    assert out.read_text(encoding="utf-8") == RUN_LINE


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_every_script_refuses_a_run_as_its_json_before_any_work(name, tmp_path, monkeypatch):
    """Each script checks its --json right after parsing: a run there is refused in one line, untouched, before
    the script reads anything (its other inputs here are empty folders and missing files)."""
    script = load_script(name)
    module = next(script)
    try:
        assert module.RESULT.script == f"scripts/{name}.py"
        run = tmp_path / "base.trec"
        run.write_text(RUN_LINE, encoding="utf-8")
        given = tmp_path / "in"  # the other inputs: an empty folder, or missing files in it
        given.mkdir()
        argv = [a.format(tmp=given) for a in SCRIPTS[name]] + ["--json", str(run)]
        monkeypatch.setattr(sys, "argv", [f"scripts/{name}.py", *argv])
        takes_argv = "argv" in inspect.signature(module.main).parameters
        with pytest.raises(SystemExit) as refused:
            module.main(*([argv] if takes_argv else []))
        assert "\n" not in str(refused.value.code) and f"{run}: --json is a TREC run" in str(refused.value.code)
        assert run.read_text(encoding="utf-8") == RUN_LINE and not any(given.iterdir())
    finally:
        script.close()


def test_every_script_with_a_json_option_is_covered():
    written = {p.stem for p in (REPO / "scripts").glob("*.py") if 'add_argument("--json"' in p.read_text(encoding="utf-8")}
    assert written == set(SCRIPTS)
    assert "write_json(" not in (REPO / "scripts" / "_bench.py").read_text(encoding="utf-8")


def test_the_module_loads_as_the_browser_tests_load_it(monkeypatch):
    """tests/browser.py executes scripts/_bench.py without registering it in sys.modules (a class that looks its
    module up there, a dataclass, broke every browser test of a fresh clone's suite): it must load so."""
    import importlib.util

    monkeypatch.delitem(sys.modules, "_bench", raising=False)
    spec = importlib.util.spec_from_file_location("_bench", REPO / "scripts" / "_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.JsonResult("scripts/x.py", KEYS).keys == KEYS and "_bench" not in sys.modules
