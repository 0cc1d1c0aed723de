"""Every rule in the library (issue 52, item 1): each function ``import retrieval_lab as rl`` exports refuses the
hostile values the CLI's cases refuse, with the same words, and nothing is written.

The values come from the CLI's own cases (tests/test_bad_input.py: ``RUN_CASES``, ``DATASET_CASES``;
tests/test_output_safety.py); the functions from the API's signatures: a function of ``rl.__all__`` taking a
run, qrels, a k or an output path that no table below lists fails :func:`test_every_api_argument_is_covered`.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from beir_fixtures import write_beir
from test_bad_input import DATASET_CASES, RUN_CASES

import retrieval_lab as rl
from retrieval_lab import cli

CORPUS = {f"d{i}": rl.Doc(f"d{i}", "", f"document about topic {i}") for i in range(1, 4)}
QUERIES = {f"q{i}": rl.Query(f"q{i}", f"topic {i}") for i in range(1, 4)}
QRELS = {"q2": {"d2": 1}, "q3": {"d3": 1}}
GOOD = {"q2": {"d2": 2.0, "d1": 1.0}, "q3": {"d3": 3.0}}


def _same(reason: str, message: str) -> bool:
    """The CLI names a value as text ('nan'), the API as a Python value (nan): compared without quotes."""
    return reason.replace("'", "") in message.replace("'", "")


# ----------------------------------------------------------------------------- the API functions, by argument


class _Encoder:
    """Unit vectors from the text's last digit: enough for Dense to index and search without a model."""

    dim = 4

    def encode(self, texts, *args, **kwargs):
        out = np.zeros((len(texts), 4), np.float32)
        for i, text in enumerate(texts):
            out[i, int(text[-1]) % 4] = 1.0
        return out


def _dense():
    return rl.Dense(encoder=_Encoder()).index(CORPUS)


# run -> the call; each refuses a hostile run and accepts GOOD
RUN_TAKERS = {
    "evaluate": lambda run, tmp: rl.evaluate(QRELS, run, ["nDCG@10"]),
    "diagnose": lambda run, tmp: rl.diagnose(QRELS, run, QUERIES, CORPUS, k=10),
    "compare.base_run": lambda run, tmp: rl.compare(QRELS, run, GOOD, ["nDCG@10"], permutations=10),
    "compare.head_run": lambda run, tmp: rl.compare(QRELS, GOOD, run, ["nDCG@10"], permutations=10),
    "fuse": lambda run, tmp: rl.fuse([GOOD, run], "rrf"),
    "write_run": lambda run, tmp: rl.write_run(tmp / "out.trec", run, tag="t"),
}
# qrels -> the call
QRELS_TAKERS = {
    "evaluate": lambda qrels, tmp: rl.evaluate(qrels, GOOD, ["nDCG@10"]),
    "evaluate.train_qrels": lambda qrels, tmp: rl.evaluate(QRELS, GOOD, ["nDCG@10"], train_qrels=qrels),
    "diagnose": lambda qrels, tmp: rl.diagnose(qrels, GOOD, QUERIES, CORPUS),
    "compare": lambda qrels, tmp: rl.compare(qrels, GOOD, GOOD, ["nDCG@10"], permutations=10),
    "fuse": lambda qrels, tmp: rl.fuse([GOOD, GOOD], "rrf", qrels=qrels),
    "write_qrels": lambda qrels, tmp: rl.write_qrels(tmp / "out.tsv", qrels),
    "write_beir": lambda qrels, tmp: rl.write_beir(tmp / "out", CORPUS, QUERIES, {"test": qrels}),
}
# a k (depth) -> the call
K_TAKERS = {
    "diagnose": lambda k, tmp: rl.diagnose(QRELS, GOOD, QUERIES, CORPUS, k=k),
    "BM25.search": lambda k, tmp: rl.BM25().index(CORPUS).search({"q": "topic 2"}, k=k),
    "Dense.search": lambda k, tmp: _dense().search({"q": "topic 2"}, k=k),
    "write_run": lambda k, tmp: rl.write_run(tmp / "out.trec", GOOD, tag="t", depth=k),
}
# an output path -> the call
WRITERS = {
    "write_run": lambda path: rl.write_run(path, GOOD, tag="t"),
    "write_qrels": lambda path: rl.write_qrels(path, QRELS),
    "write_beir": lambda path: rl.write_beir(path, CORPUS, QUERIES, {"test": QRELS}),
}
# the names the tables cover, as test_every_api_argument_is_covered reads them off the signatures
COVERED = {"evaluate": {"run", "qrels", "train_qrels"}, "diagnose": {"run", "qrels", "k"},
           "compare": {"base_run", "head_run", "qrels"}, "fuse": {"runs", "qrels"},
           "write_run": {"run", "depth", "path"}, "write_qrels": {"qrels", "path"}, "write_beir": {"qrels", "path"},
           "BM25.search": {"k"}, "Dense.search": {"k"}}
CHECKED = {"run", "runs", "base_run", "head_run", "qrels", "train_qrels", "k", "depth", "path"}


def _api_callables():
    for name in rl.__all__:
        obj = getattr(rl, name)
        if inspect.isclass(obj) and name in ("BM25", "Dense"):
            yield f"{name}.search", obj.search
        elif inspect.isfunction(obj):
            yield name, obj


def test_every_api_argument_is_covered():
    found = {}
    for name, fn in _api_callables():
        args = set(inspect.signature(fn).parameters) & CHECKED
        if args and not name.startswith(("read_", "load_")):  # readers and loaders take a path to read
            found[name] = args
    assert found == COVERED


# ----------------------------------------------------------------------------- hostile runs


def _run_cases() -> dict:
    """The CLI's bad run lines (RUN_CASES) as the API's values: the score column, parsed as a reader would."""
    cases = {}
    for case, (_, line, _, reason) in RUN_CASES.items():
        parts = line.split()
        if reason.endswith(("is not finite", "is not a number")):
            text = parts[4]
            try:
                value = float(text)
            except ValueError:
                value = text
            cases[case] = ({"q2": {"d2": value, "d1": 1.0}, "q3": {"d3": 3.0}}, reason.replace("'", ""))
    cases["numpy_nan_score"] = ({"q2": {"d2": np.float32("nan")}, "q3": {"d3": 1.0}}, "is not finite")
    cases["numpy_infinite_score"] = ({"q2": {"d2": np.float64("inf")}, "q3": {"d3": 1.0}}, "is not finite")
    cases["bool_score"] = ({"q2": {"d2": True}, "q3": {"d3": 1.0}}, "is not a number")
    cases["int_beyond_a_double"] = ({"q2": {"d2": 10**400}, "q3": {"d3": 1.0}}, "is not finite")  # no traceback
    cases["id_with_a_space"] = ({"q2": {"d 2": 1.0}, "q3": {"d3": 1.0}}, "cannot carry it")
    return cases


RUNS = _run_cases()


def test_the_cli_cases_are_here():
    # nan, -inf and 'high' from the CLI's table: its rows feed this file, so a row renamed there is noticed here
    assert {"nan_score", "infinite_score", "non_numeric_score"} <= set(RUNS)
    assert RUNS["nan_score"][0]["q2"]["d2"] != RUNS["nan_score"][0]["q2"]["d2"]  # a real NaN


@pytest.mark.parametrize("case", list(RUNS))
@pytest.mark.parametrize("api", list(RUN_TAKERS))
def test_a_hostile_run_is_refused_by_every_function_taking_one(api, case, tmp_path):
    run, reason = RUNS[case]
    with pytest.raises(rl.InputError) as caught:
        RUN_TAKERS[api](run, tmp_path)
    assert _same(reason, str(caught.value)), str(caught.value)
    assert list(tmp_path.iterdir()) == []  # nothing written, no temporary left


@pytest.mark.parametrize("api", list(RUN_TAKERS))
def test_numpy_scores_are_numbers_and_good_runs_pass(api, tmp_path):
    RUN_TAKERS[api](GOOD, tmp_path)  # the control: the refusals above are the values' doing
    as_numpy = {q: {d: np.float32(s) for d, s in docs.items()} for q, docs in GOOD.items()}  # FAISS's scores
    RUN_TAKERS[api](as_numpy, tmp_path)
    if api == "write_run":  # written as the numbers they are, not as "np.float32(2.0)"
        assert rl.read_run(tmp_path / "out.trec") == GOOD


def test_the_issues_nan_case_against_the_cli(tmp_path, capsys):
    # rl.evaluate(qrels, {'q1': {'d1': nan, 'd2': 1.0}}, ['nDCG@10']) returned 1.0, NaN ranked first; inf too
    qrels = {"q1": {"d1": 1, "d2": 0}}
    for bad in (math.nan, math.inf):
        with pytest.raises(rl.InputError, match="is not finite"):
            rl.evaluate(qrels, {"q1": {"d1": bad, "d2": 1.0}}, ["nDCG@10"])
        (tmp_path / "q.tsv").write_text("q1 0 d1 1\nq1 0 d2 0\n")
        (tmp_path / "r.trec").write_text(f"q1 Q0 d1 1 {bad} t\nq1 Q0 d2 2 1.0 t\n")
        assert cli.main(["score-runs", str(tmp_path / "q.tsv"), str(tmp_path / "r.trec"), "-m", "nDCG@10"]) == 2
        assert "is not finite" in capsys.readouterr().err


@pytest.mark.parametrize("api", [a for a in RUN_TAKERS if a != "write_run" and a != "fuse"])
def test_a_run_sharing_no_query_is_refused(api, tmp_path, capsys):
    # the CLI's case: test_bad_input.test_run_for_another_dataset_in_score_runs
    with pytest.raises(rl.InputError, match="shares no query with the qrels"):
        RUN_TAKERS[api]({"x1": {"d1": 2.0}, "x2": {"d2": 1.0}}, tmp_path)


def test_fuse_refuses_an_empty_run_and_a_single_run():
    # the CLI's cases: test_empty_run_in_fuse, and `fuse --runs one.trec`
    with pytest.raises(rl.InputError, match="empty run"):
        rl.fuse([GOOD, {}], "rrf")
    with pytest.raises(rl.InputError, match="need at least 2 runs, got 1"):
        rl.fuse([GOOD], "rrf")


def test_diagnose_refuses_a_document_the_corpus_lacks():
    # the CLI: runs.check_documents names the line; the API names the query and the document
    with pytest.raises(rl.InputError, match="document 'd9' is not in the dataset's corpus"):
        rl.diagnose(QRELS, {"q2": {"d9": 1.0}}, QUERIES, CORPUS)


# ----------------------------------------------------------------------------- hostile qrels

_NON_INTEGER = DATASET_CASES["qrels_non_integer_score"]  # ('qrels/test.tsv', 3, 'q4\td4\t1.5', ..., "'1.5' ...")
QRELS_CASES = {
    "non_integer_score": ({"q2": {"d2": float(_NON_INTEGER[2].split()[-1])}}, _NON_INTEGER[5]),
    "bool_score": ({"q2": {"d2": True}}, "is not an integer"),
    "grade_beyond_c_int": ({"q2": {"d2": 2**31}}, "is outside"),
    "id_with_a_tab": ({"q\t2": {"d2": 1}}, "cannot carry it"),
    "not_a_mapping": ({"q2": ["d2"]}, "expected a mapping"),
}


@pytest.mark.parametrize("case", list(QRELS_CASES))
@pytest.mark.parametrize("api", list(QRELS_TAKERS))
def test_hostile_qrels_are_refused_by_every_function_taking_them(api, case, tmp_path):
    qrels, reason = QRELS_CASES[case]
    with pytest.raises(rl.InputError) as caught:
        QRELS_TAKERS[api](qrels, tmp_path)
    assert _same(reason, str(caught.value)), str(caught.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("api", list(QRELS_TAKERS))
def test_numpy_grades_pass(api, tmp_path):
    QRELS_TAKERS[api]({q: {d: np.int64(g) for d, g in judged.items()} for q, judged in QRELS.items()}, tmp_path)


# ----------------------------------------------------------------------------- k and depth


@pytest.mark.parametrize("k, reason", [(0, "must be positive, got 0"), (-3, "must be positive, got -3"),
                                       (2.0, "must be a whole number"), (True, "must be a whole number")])
@pytest.mark.parametrize("api", list(K_TAKERS))
def test_a_k_below_one_is_refused(api, k, reason, tmp_path):
    # the CLI's: `diagnose -k 0` ("k must be positive, got 0"), `retrieve --depth 0`
    with pytest.raises(rl.InputError, match=reason):
        K_TAKERS[api](k, tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("api", list(K_TAKERS))
def test_a_numpy_k_passes(api, tmp_path):
    K_TAKERS[api](np.int64(2), tmp_path)


def test_the_issues_k0_case_against_the_cli(tmp_path, capsys):
    # rl.diagnose(..., k=0) returned counts; the CLI refused -k 0
    beir = write_beir(tmp_path / "b", [{"_id": d, "title": "", "text": doc.text} for d, doc in CORPUS.items()],
                      [{"_id": q, "text": query.text} for q, query in QUERIES.items()],
                      {"test": [("q2", "d2", 1), ("q3", "d3", 1)]})
    (tmp_path / "r.trec").write_text("q2 Q0 d2 1 2.0 t\nq3 Q0 d3 1 3.0 t\n")
    assert cli.main(["diagnose", "--dataset", str(beir), "--run", str(tmp_path / "r.trec"), "-k", "0"]) == 2
    assert "k must be positive, got 0" in capsys.readouterr().err
    with pytest.raises(rl.InputError, match="k must be positive, got 0"):
        rl.diagnose(rl.read_qrels(beir / "qrels" / "test.tsv"), rl.read_run(tmp_path / "r.trec"),
                    rl.read_queries(beir / "queries.jsonl"), rl.read_corpus(beir / "corpus.jsonl"), k=0)


# ----------------------------------------------------------------------------- outputs over inputs


@pytest.fixture
def col(tmp_path):
    """tests/test_output_safety.py's layout: a BEIR folder col/, and loose files beside it."""
    write_beir(tmp_path / "col", [{"_id": "d1", "title": "", "text": "x"}], [{"_id": "q1", "text": "x"}],
               {"test": [("q1", "d1", 1)]})
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 2.0 t\n")
    (tmp_path / "judged.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    (tmp_path / "trec-qrels.txt").write_text("q1 0 d1 1\n")
    (tmp_path / "docs.jsonl").write_text('{"_id": "d1", "text": "x"}\n')
    return tmp_path


def _snapshot(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# (writer, path, words): the CLI refuses each through its guard (test_output_safety: "lies inside the input")
OUTPUT_CASES = [
    ("write_run", "col/corpus.jsonl", "lies inside the BEIR folder"),  # the issue's case
    ("write_run", "col/queries.jsonl", "lies inside the BEIR folder"),
    ("write_run", "col/bm25.trec", "lies inside the BEIR folder"),  # a new file, inside a dataset all the same
    ("write_qrels", "col/qrels/test.tsv", "lies inside the BEIR folder"),
    ("write_beir", "col/sub", "lies inside the BEIR folder"),
    ("write_beir", "col", "holding files retrieval-lab did not write"),  # a raw dataset is never replaced
    ("write_run", "judged.tsv", "is a qrels file; write_run writes a TREC run and replaces only that"),
    ("write_run", "trec-qrels.txt", "is a qrels file"),
    ("write_run", "docs.jsonl", "is a file of BEIR JSON lines"),
    ("write_qrels", "run.trec", "is a TREC run"),
    ("write_qrels", "docs.jsonl", "is a file of BEIR JSON lines"),
]


@pytest.mark.parametrize("writer, path, words", OUTPUT_CASES, ids=[f"{w}-{p}" for w, p, _ in OUTPUT_CASES])
def test_a_write_over_an_input_is_refused(col, writer, path, words):
    before = _snapshot(col)
    with pytest.raises(rl.InputError, match=words):
        WRITERS[writer](col / path)
    assert _snapshot(col) == before  # every byte, and nothing new


def test_each_writer_replaces_its_own_kind(col):
    rl.write_run(col / "run.trec", GOOD, tag="t")  # an earlier run
    rl.write_qrels(col / "judged.tsv", QRELS)  # earlier qrels
    rl.write_run(col / "notes.txt", GOOD, tag="t")  # a new name
    (col / "free.txt").write_text("a note no reader takes\n")
    with pytest.raises(rl.InputError, match="is a file retrieval-lab did not write; write_run writes a TREC run"):
        rl.write_run(col / "free.txt", GOOD, tag="t")  # a note is the user's: refused, as the CLI refuses it
    rl.write_beir(col / "out", CORPUS, QUERIES, {"test": QRELS})
    rl.write_beir(col / "out", CORPUS, QUERIES, {"test": QRELS})  # its own folder (marked): replaced whole
    assert rl.read_run(col / "notes.txt") == rl.read_run(col / "run.trec")
    assert (col / "free.txt").read_text() == "a note no reader takes\n"


# ----------------------------------------------------------------------------- hostile S12: settings from code

OTHER = {"q2": {"d1": 2.0, "d2": 1.0}, "q3": {"d3": 3.0, "d1": 1.0}}
# API setting -> (the call with the value, the params key the CLI reads it from)
SETTINGS = {
    "BM25.k1": (lambda v: rl.BM25(k1=v).index(CORPUS).search(QUERIES, k=5), "bm25.k1"),
    "BM25.b": (lambda v: rl.BM25(b=v).index(CORPUS).search(QUERIES, k=5), "bm25.b"),
    "fuse.value.rrf": (lambda v: rl.fuse([GOOD, OTHER], "rrf", value=v), "fusion.methods.rrf.value"),
    "fuse.value.weighted": (lambda v: rl.fuse([GOOD, OTHER], "weighted", value=v), "fusion.methods.weighted.value"),
    "compare.family_level": (lambda v: rl.compare(QRELS, GOOD, OTHER, ["nDCG@10"], family_level=v, permutations=10),
                             "evaluate.ci_level"),
    "compare.permutations": (lambda v: rl.compare(QRELS, GOOD, OTHER, ["nDCG@10"], permutations=v),
                             "evaluate.permutations"),
    "compare.seed": (lambda v: rl.compare(QRELS, GOOD, OTHER, ["nDCG@10"], permutations=10, seed=v),
                     "evaluate.seed"),
}
# value -> its YAML for --set
VALUES = {"nan": (math.nan, ".nan"), "inf": (math.inf, ".inf"), "-inf": (-math.inf, "-.inf"), "true": (True, "true"),
          "negative": (-1.0, "-1.0"), "text": ("x", "x"), "half": (0.5, "0.5"), "two": (2, "2")}


def _cli_reason(key: str, text: str) -> str | None:
    """Why the CLI refuses ``--set key=text`` (the schema when params load; a fusion value also the method's rule, as
    `fuse` applies it), or None."""
    from retrieval_lab import fusion
    from retrieval_lab.core.params_file import load_params

    try:
        params = load_params(None, [f"{key}={text}"])
        if key.startswith("fusion."):
            fusion._settings(key.split(".")[2], params.fusion)
    except rl.InputError as exc:
        return exc.reason.split(" (from --set")[0]
    return None


@pytest.mark.parametrize("value", list(VALUES))
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_a_setting_given_in_code_is_refused_exactly_when_the_cli_refuses_it(setting, value, tmp_path, monkeypatch):
    # before: rl.BM25(k1=nan) returned every query with no document, rl.fuse(..., "rrf", value=inf) scored every
    # document 0.0, rl.fuse(..., "weighted", value=True) fused; rl.compare took a NaN level
    monkeypatch.chdir(tmp_path)  # no params.yaml: the defaults, as the API's
    call, key = SETTINGS[setting]
    python_value, text = VALUES[value]
    reason = _cli_reason(key, text)
    if reason is None:
        call(python_value)
        return
    with pytest.raises(rl.InputError) as caught:
        call(python_value)
    # the same words; a params file hands a float setting 2 as 2.0, code as 2
    assert caught.value.reason == reason.replace("got 2.0", "got 2"), (str(caught.value), reason)
