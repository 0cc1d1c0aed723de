"""The judging export's writers (retrieval_lab.judging.export) obey the library's output rule."""

from __future__ import annotations

import pytest


def test_the_library_writers_refuse_to_replace_a_collections_files(tmp_path):
    # issue 52: every rule in the library: an export never replaces a corpus or lies inside a BEIR folder
    from beir_fixtures import write_beir

    from retrieval_lab.core.errors import InputError
    from retrieval_lab.judging.export import write_provenance, write_qrels_file

    col = write_beir(tmp_path / "col", [{"_id": "d1", "title": "", "text": "x"}], [{"_id": "q1", "text": "x"}], {})
    corpus = (col / "corpus.jsonl").read_bytes()
    with pytest.raises(InputError):
        write_qrels_file(col / "corpus.jsonl", {"q1": {"d1": 1}}, "beir")
    with pytest.raises(InputError):
        write_qrels_file(col / "qrels" / "new.tsv", {"q1": {"d1": 1}}, "beir")
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 d1 1 1.0 x\n")
    with pytest.raises(InputError):
        write_provenance(run, [])
    assert (col / "corpus.jsonl").read_bytes() == corpus and run.read_text() == "q1 Q0 d1 1 1.0 x\n"
    write_qrels_file(tmp_path / "qrels.tsv", {"q1": {"d1": 1}}, "beir")
    assert (tmp_path / "qrels.tsv").read_text() == "query-id\tcorpus-id\tscore\nq1\td1\t1\n"
