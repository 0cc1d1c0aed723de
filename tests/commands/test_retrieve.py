import numpy as np
from beir_fixtures import default_params, write_beir
from command_runner import run_command

from retrieval_lab.core import fingerprint
from retrieval_lab.encoder import Embeddings, write_embeddings
from retrieval_lab.runs import read_run

CORPUS = [
    {"_id": "d1", "title": "Heart", "text": "blood pressure and heart disease"},
    {"_id": "d2", "title": "", "text": "cancer cells divide"},
    {"_id": "d3", "title": "Pressure", "text": "pressure pressure pressure"},
]
QUERIES = [{"_id": "q1", "text": "blood pressure"}, {"_id": "q2", "text": "cancer"}, {"_id": "q3", "text": "heart"}]
QRELS = {"train": [("q1", "d1", 1)], "test": [("q2", "d2", 1), ("q3", "d1", 1)]}


def _beir(tmp_path):
    return write_beir(tmp_path / "beir", CORPUS, QUERIES, QRELS)


def test_bm25_all_queries_then_one_split(tmp_path, capsys):
    beir = _beir(tmp_path)
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir),
                                    "--output", str(tmp_path / "all.trec")]) == 0
    assert set(read_run(tmp_path / "all.trec")) == {"q1", "q2", "q3"}
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--split", "test",
                                    "--depth", "1", "--output", str(tmp_path / "test.trec")]) == 0
    run = read_run(tmp_path / "test.trec")
    assert run == {"q2": {"d2": run["q2"]["d2"]}, "q3": {"d1": run["q3"]["d1"]}}
    assert (tmp_path / "test.trec").read_text().split()[5] == "bm25"  # the tag


def test_a_split_whose_qrels_file_is_empty_is_refused_not_an_empty_run(tmp_path, capsys):
    beir = _beir(tmp_path)
    (beir / "qrels" / "test.tsv").write_text("")  # truncated: a run of 0 queries would look like success
    out = tmp_path / "test.trec"
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--split", "test",
                                    "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{beir / 'qrels' / 'test.tsv'} field '--split': split 'test' judges no query" in err
    assert not out.exists()


def test_set_overrides_reach_the_retriever(tmp_path):
    beir = _beir(tmp_path)
    scores = []
    for b in ("0.0", "1.0"):
        out = tmp_path / f"b{b}.trec"
        assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--output", str(out),
                                        "--set", f"bm25.b={b}", "--params", str(default_params(tmp_path))]) == 0
        scores.append(read_run(out)["q1"]["d1"])
    # token counts d1 5, d2 3, d3 4 (avgdl 4): b = 1 penalises the longer-than-average d1, b = 0 does not
    assert scores[0] > scores[1]


def test_errors_exit_2_and_name_the_problem(tmp_path, capsys):
    beir = _beir(tmp_path)
    out = str(tmp_path / "x.trec")
    assert run_command("retrieve", ["--retriever", "splade", "--dataset", str(beir), "--output", out]) == 2
    assert "choices: bm25, dense, external, lsa" in capsys.readouterr().err
    assert run_command("retrieve", ["--retriever", "bm25", "--embeddings", str(beir), "--output", out]) == 2
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--split", "val",
                                    "--output", out]) == 2
    assert "val.tsv" in capsys.readouterr().err
    assert not (tmp_path / "x.trec").exists()


def test_dense_from_an_embeddings_folder(tmp_path):
    beir = _beir(tmp_path)
    docs = np.eye(3, dtype=np.float32)  # d1, d2, d3 are the three axes
    queries = np.array([[0.6, 0.0, 0.8], [0, 1, 0], [1, 0, 0]], dtype=np.float32)
    write_embeddings(Embeddings(["d1", "d2", "d3"], docs, ["q1", "q2", "q3"], queries,
                                {"dataset": str(beir), "corpus": fingerprint.of_dataset(beir)}), tmp_path / "emb")
    out = tmp_path / "dense.trec"
    assert run_command("retrieve", ["--retriever", "dense", "--embeddings", str(tmp_path / "emb"),
                                    "--output", str(out)]) == 0
    run = read_run(out)
    assert list(run["q1"]) == ["d3", "d1", "d2"] and run["q1"]["d3"] == np.float32(0.8)
    # --split reads the split's queries from the folder named in the embeddings report
    assert run_command("retrieve", ["--retriever", "dense", "--embeddings", str(tmp_path / "emb"),
                                    "--split", "train", "--output", str(out)]) == 0
    assert set(read_run(out)) == {"q1"}


def test_dense_embeddings_of_another_corpus_are_refused(tmp_path, capsys):
    beir = _beir(tmp_path)
    write_embeddings(Embeddings(["d1", "d2"], np.eye(2, dtype=np.float32), ["q1"], np.eye(2, dtype=np.float32)[:1]),
                     tmp_path / "emb")
    assert run_command("retrieve", ["--retriever", "dense", "--embeddings", str(tmp_path / "emb"),
                                    "--dataset", str(beir), "--output", str(tmp_path / "x.trec")]) == 2
    assert "2 documents are not the 3" in capsys.readouterr().err


def test_bm25_from_a_saved_index_gives_the_same_run_bytes_and_refuses_other_params(tmp_path, capsys):
    beir = _beir(tmp_path)
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir),
                                    "--output", str(tmp_path / "direct.trec")]) == 0
    assert run_command("index", ["--retriever", "bm25", "--dataset", str(beir), "--output", str(tmp_path / "idx")]) == 0
    assert "3 documents, " in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == [
        ".retrieval-lab-output", "corpus.json", "df.npy", "doc_ids.json", "index.json", "lengths.npy", "offsets.npy",
        "postings.npy", "vocab.json"]
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--corpus", str(tmp_path / "idx"),
                                    "--output", str(tmp_path / "indexed.trec")]) == 0
    assert "index " + str(tmp_path / "idx") in capsys.readouterr().out
    # --corpus naming --dataset itself is the default (what the pipeline gives lsa)
    assert run_command("retrieve", ["--retriever", "lsa", "--dataset", str(beir), "--corpus", str(beir),
                                    "--set", "lsa.dims=2", "--output", str(tmp_path / "lsa.trec")]) == 0
    assert (tmp_path / "indexed.trec").read_bytes() == (tmp_path / "direct.trec").read_bytes()
    # k1 and b apply at search time: the same index serves other values
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--corpus", str(tmp_path / "idx"),
                                    "--set", "bm25.b=0.0", "--output", str(tmp_path / "b0.trec")]) == 0
    assert (tmp_path / "b0.trec").read_bytes() != (tmp_path / "direct.trec").read_bytes()
    # an index of other tokens or fields would give another run: refused, nothing written
    out = tmp_path / "refused.trec"
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--corpus", str(tmp_path / "idx"),
                                    "--set", "tokenizer.stemmer=null", "--output", str(out)]) == 2
    assert "field 'tokenizer': built with tokenizer" in capsys.readouterr().err
    assert run_command("retrieve", ["--retriever", "bm25", "--dataset", str(beir), "--corpus", str(tmp_path / "idx"),
                                    "--set", "retrieve.fields=[text]", "--output", str(out)]) == 2
    assert run_command("retrieve", ["--retriever", "lsa", "--dataset", str(beir), "--corpus", str(tmp_path / "idx"),
                                    "--output", str(out)]) == 2
    assert run_command("index", ["--retriever", "lsa", "--dataset", str(beir), "--output", str(tmp_path / "x")]) == 2
    assert not out.exists() and not (tmp_path / "x").exists()


def test_dense_faiss_search_is_set_from_the_command_line_and_refused_where_the_index_lacks_it(tmp_path, capsys):
    rng = np.random.default_rng(5)
    docs, queries = (rng.standard_normal((n, 8)).astype(np.float32) for n in (300, 10))
    docs, queries = (x / np.linalg.norm(x, axis=1, keepdims=True) for x in (docs, queries))
    write_embeddings(Embeddings([f"d{i}" for i in range(300)], docs, [f"q{i}" for i in range(10)], queries),
                     tmp_path / "emb")
    argv = ["--retriever", "dense", "--embeddings", str(tmp_path / "emb")]
    assert run_command("retrieve", [*argv, "--output", str(tmp_path / "flat.trec")]) == 0
    # an IVF of 4 lists probing 16 (FAISS stops at 4): every list scanned, Flat's ranking
    assert run_command("retrieve", [*argv, "--output", str(tmp_path / "ivf.trec"), "--set",
                                    "dense.faiss_factory=IVF4,Flat", "--set", "dense.faiss_search=nprobe=16"]) == 0
    flat, ivf = read_run(tmp_path / "flat.trec"), read_run(tmp_path / "ivf.trec")
    assert all(list(ivf[q]) == list(flat[q]) for q in flat)
    capsys.readouterr()
    # Flat has no nprobe: one line naming the param, nothing written
    out = tmp_path / "x.trec"
    assert run_command("retrieve", [*argv, "--output", str(out), "--set", "dense.faiss_search=nprobe=4"]) == 2
    assert capsys.readouterr().err == ("error: field 'dense.faiss_search': search setting 'nprobe=4' does not apply "
                                       "to 'Flat': could not set parameter nprobe\n")
    # not of the shape name=value: refused by the params rule before any index is built
    assert run_command("retrieve", [*argv, "--output", str(out), "--set", "dense.faiss_search=nprobe"]) == 2
    assert capsys.readouterr().err == ("error: field 'dense.faiss_search': 'nprobe' is not name=value[,name=value] "
                                       "with values above 0 (e.g. efSearch=256, nprobe=64; null: FAISS's defaults) "
                                       "(from --set dense.faiss_search=nprobe)\n")
    assert not out.exists()
