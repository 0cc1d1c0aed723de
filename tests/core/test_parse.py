"""A number too long to convert is bad input at its file, line and field, in every JSON and YAML reader (hostile
case S3): an integer of more than 4,300 digits made each of them end in ``ValueError: Exceeds the limit (4300
digits)``, a traceback and exit 1, before ``core/parse.py`` took every reader's parse.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from beir_fixtures import write_beir
from command_runner import run_command

from retrieval_lab import (
    comparison,
    latency,
    mining,
    model_files,
    negatives,
    page,
    pipeline_names,
    reproducibility,
)
from retrieval_lab.core import fingerprint
from retrieval_lab.core.data import Dataset, read_corpus, read_queries
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params_file import load_params
from retrieval_lab.core.parse import LONGEST_INTEGER, json_loads
from retrieval_lab.publishing import blocks
from retrieval_lab.retrievers.bm25 import BM25Index

BIG = "9" * 5000
REASON = f"an integer of 5000 digits (more than {LONGEST_INTEGER}"
CORPUS = [{"_id": "d1", "title": "", "text": "alpha beta"}, {"_id": "d2", "title": "", "text": "gamma"}]
QUERIES = [{"_id": "q1", "text": "alpha"}, {"_id": "q2", "text": "gamma"}]


def _json_file(path, body: str):
    """``body`` with ``BIG`` in place of the word ``BIG``, on its own line (line 3)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body.replace("BIG", BIG), encoding="utf-8")
    return path


def _per_query(tmp_path):
    path = _json_file(tmp_path / "per_query.json", '{"queries": {"q1":\n {"measures":\n  {"nDCG@10": BIG}}}}')
    return lambda: comparison.per_query_measures(path.read_text(), str(path)), path, 3, "queries.q1.measures.nDCG@10"


def _timing(tmp_path):
    path = _json_file(tmp_path / "t.json", '{"retriever": "x",\n "summary":\n  {"p50": BIG}}')
    return lambda: latency.read_summary(path), path, 3, "summary.p50"


def _bm25_index(tmp_path):
    path = _json_file(tmp_path / "idx" / "index.json", '{"format": "x",\n "documents":\n BIG}')
    return lambda: BM25Index.load(tmp_path / "idx"), path, 3, "documents"


def _fingerprint(tmp_path):
    path = _json_file(tmp_path / "idx" / fingerprint.FILE, '{"file": "corpus.jsonl",\n "bytes":\n BIG}')
    return lambda: fingerprint.read(tmp_path / "idx"), path, 3, "bytes"


def _lock(tmp_path):
    path = _json_file(tmp_path / "m.lock.json", '{"source": "x",\n "files":\n {"a": BIG}}')
    return lambda: model_files.read_lock(path), path, 3, "files.a"


def _model_config(tmp_path):
    path = _json_file(tmp_path / "model" / "config.json", '{"model_type": "bert",\n "hidden_size":\n BIG}')
    return lambda: model_files.check_loadable(tmp_path / "model"), path, 3, "hidden_size"


def _mining_audit(tmp_path):
    path = _json_file(tmp_path / "neg" / negatives.AUDIT_FILE, '{"strategy": "hard",\n "count":\n BIG}')
    return lambda: negatives.read_strategy(tmp_path / "neg" / "negatives.jsonl"), path, 3, "count"


def _split(tmp_path):
    path = _json_file(tmp_path / "prep" / "split.json", '{"mode": "family",\n "seed":\n BIG}')
    return lambda: mining.split_mode(Dataset(tmp_path / "prep", {}, {}, {})), path, 3, "seed"


def _page_file(tmp_path):
    path = _json_file(tmp_path / "diagnosis.json", '{"queries":\n [{"query": "q1",\n "rank": BIG}]}')
    return lambda: page._json_file(path, ""), path, 3, "queries[0].rank"


def _committed_block(tmp_path):
    path = _json_file(tmp_path / "bench.json", '{"measure": "x",\n "n":\n [1, BIG]}')
    return lambda: blocks._read_json(path), path, 3, "n[1]"


def _embeddings_report(tmp_path):
    folder = tmp_path / "emb"
    folder.mkdir()
    for kind in ("doc", "query"):
        (folder / f"{kind}_ids.txt").write_text("x1\n", encoding="utf-8")
        np.save(folder / f"{kind}_embeddings.npy", np.ones((1, 2), np.float32))
    path = _json_file(folder / "encode_report.json", '{"model": {},\n "documents":\n BIG}')

    def read():
        from retrieval_lab.encoder import load_embeddings

        return load_embeddings(folder)
    return read, path, 3, "documents"


def _metrics_drift(tmp_path):
    for side in ("committed", "produced"):
        _json_file(tmp_path / side / "bm25.json", '{"queries_evaluated": 3,\n "nDCG@10":\n 0.5}')
    path = _json_file(tmp_path / "produced" / "bm25.json", '{"queries_evaluated": 3,\n "nDCG@10":\n BIG}')
    return (lambda: reproducibility.drift(tmp_path / "committed", tmp_path / "produced")), path, 3, "nDCG@10"


READERS = {f.__name__[1:]: f for f in (_metrics_drift, _per_query, _timing, _bm25_index, _fingerprint, _lock, _model_config,
                                        _mining_audit, _split, _page_file, _committed_block, _embeddings_report)}


@pytest.mark.parametrize("reader", list(READERS))
def test_every_json_reader_names_file_line_and_field_of_a_number_too_long(tmp_path, reader):
    read, path, line, field = READERS[reader](tmp_path)
    with pytest.raises(InputError) as info:
        read()
    error = info.value
    assert (error.path, error.line, error.field) == (str(path), line, field), str(error)
    assert REASON in str(error) and "\n" not in str(error)


@pytest.mark.parametrize("kind", ["corpus", "queries"])
def test_a_number_too_long_in_a_jsonl_record_is_its_line_and_key(tmp_path, kind):
    records = [dict(r) for r in (CORPUS if kind == "corpus" else QUERIES)]
    path = tmp_path / f"{kind}.jsonl"
    path.write_text(json.dumps(records[0]) + "\n" + json.dumps(records[1])[:-1] + ', "metadata": {"n": ' + BIG
                    + "}}\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        (read_corpus if kind == "corpus" else read_queries)(path)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 2, "metadata.n")


def test_a_hex_integer_past_the_limit_in_yaml_is_refused_too(tmp_path):
    # 0x + 3,600 hex digits: int() takes it, but its 4,335 decimal digits cannot be printed in any message
    path = tmp_path / "params.yaml"
    path.write_text("bm25:\n  workers: 0x" + "f" * 3600 + "\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_params(path)
    assert (info.value.line, info.value.field) == (2, "bm25.workers") and "more than 4300" in str(info.value)


def test_the_names_block_of_dvc_yaml_names_its_line(tmp_path):
    text = "stages:\n  # BEGIN generated names\n  - names:\n      dataset: " + BIG + "\n  # END generated names\n"
    with pytest.raises(InputError) as info:
        pipeline_names.declared(text, "dvc.yaml")
    assert (info.value.path, info.value.line, info.value.field) == ("dvc.yaml", 4, "[0].names.dataset")


def test_the_parse_is_json_loads_below_the_limit():
    edge = "7" * LONGEST_INTEGER
    assert json_loads(f'{{"a": [{edge}, -{edge}, 1.5, 2]}}') == {"a": [int(edge), -int(edge), 1.5, 2]}


# ----------------------------------------------------------------------------- through the commands


def _one_line(capsys) -> str:
    printed = capsys.readouterr()
    assert printed.err.count("\n") == 1 and "Traceback" not in printed.err, printed.err
    return printed.err


def test_evaluate_and_retrieve_refuse_a_corpus_or_queries_number_in_one_line(tmp_path, capsys):
    beir = write_beir(tmp_path / "c", CORPUS, QUERIES, {"test": [("q1", "d1", 1), ("q2", "d2", 1)]})
    run = tmp_path / "r.trec"
    run.write_text("q1 Q0 d1 1 2.0 x\nq2 Q0 d2 1 1.0 x\n", encoding="utf-8")
    corpus = beir / "corpus.jsonl"
    corpus.write_text(corpus.read_text().replace('"_id": "d2"', f'"_id": "d2", "v": {BIG}'), encoding="utf-8")
    code = run_command("evaluate", ["--dataset", str(beir), "--run", str(run), "--metrics", str(tmp_path / "m.json"),
                                    "--reports", str(tmp_path / "rep")])
    assert code == 2 and f"{corpus}:2 field 'v': {REASON}" in _one_line(capsys)
    assert not (tmp_path / "m.json").exists() and not (tmp_path / "rep").exists()
    corpus.write_text("\n".join(json.dumps(d) for d in CORPUS) + "\n", encoding="utf-8")
    queries = beir / "queries.jsonl"
    queries.write_text(json.dumps(QUERIES[0]) + '\n{"_id": "q2", "text": "x", "metadata": {"k": -' + BIG + "}}\n",
                       encoding="utf-8")
    code = run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--output", str(tmp_path / "o")])
    assert code == 2 and f"{queries}:2 field 'metadata.k': an integer of 5000 digits" in _one_line(capsys)
    assert not (tmp_path / "o").exists()


def test_params_yaml_and_set_name_the_key_of_a_number_too_long(tmp_path, capsys):
    beir = write_beir(tmp_path / "c", CORPUS, QUERIES, {"test": [("q1", "d1", 1)]})
    params = tmp_path / "params.yaml"
    params.write_text("bm25:\n  b: 0.5\n  k1: " + BIG + "\n", encoding="utf-8")
    out = tmp_path / "o.trec"
    code = run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--output", str(out),
                                    "--params", str(params)])
    assert code == 2 and f"{params}:3 field 'bm25.k1': {REASON}" in _one_line(capsys)
    code = run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--output", str(out),
                                    "--set", "bm25.k1=" + BIG])
    err = _one_line(capsys)
    assert code == 2 and f"field 'bm25.k1': {REASON}" in err and len(err) < 400, err
    assert not out.exists()
