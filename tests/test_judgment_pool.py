import pytest
from beir_fixtures import write_beir
from command_runner import run_command

from retrieval_lab.core.data import Doc, Query, read_qrels
from retrieval_lab.core.errors import InputError
from retrieval_lab.judgment_pool import COLUMNS, merge, pool, read_labels
from retrieval_lab.runs import write_run

QUERIES = {"q1": Query("q1", "printer\toffline"), "q2": Query("q2", "vpn drops")}
CORPUS = {
    "d1": Doc("d1", "Printer", "line one\tcell\nline two"),
    "d2": Doc("d2", "Spooler", "restart the spooler"),
    "d3": Doc("d3", "Long", "x" * 400),
    "d4": Doc("d4", "VPN", "reconnect the tunnel"),
    "d5": Doc("d5", "MTU", "lower the MTU"),
}
RUN_A = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d4": 1.0}}
RUN_B = {"q1": {"d3": 5.0, "d4": 4.0, "d1": 3.0}, "q2": {"d5": 2.0, "d4": 1.0}}


def test_pool_union_dedup_and_order_by_hand():
    rows = pool({"a": RUN_A, "b": RUN_B}, 2, QUERIES, CORPUS, judged={"q1": {"d2": 0}})
    # q1: a's top 2 = d1 (1), d2 (2, already judged: dropped); b's top 2 = d3 (1), d4 (2)
    # q2: a's top 2 = d4 (1); b's = d5 (1), d4 (2): d4 best rank 1, found by both
    # order: best rank, then doc id
    assert [(r.query_id, r.doc_id, r.best_rank, r.retrievers) for r in rows] == [
        ("q1", "d1", 1, ("a",)), ("q1", "d3", 1, ("b",)), ("q1", "d4", 2, ("b",)),
        ("q2", "d4", 1, ("a", "b")), ("q2", "d5", 1, ("b",))]
    assert rows[0].query_text == "printer offline"  # tab collapsed
    assert rows[0].snippet == "line one cell line two"
    assert rows[1].snippet == "x" * 300
    assert pool({"b": RUN_B, "a": RUN_A}, 2, QUERIES, CORPUS, judged={"q1": {"d2": 0}}) == rows


def test_pool_rejects_unknown_ids():
    with pytest.raises(InputError, match="query 'zz' unknown"):
        pool({"a": {"zz": {"d1": 1.0}}}, 2, QUERIES, CORPUS)
    with pytest.raises(InputError, match="retrieved 'd9'"):
        pool({"a": {"q1": {"d9": 1.0}}}, 2, QUERIES, CORPUS)


def write_labels(path, rows):
    lines = ["\t".join(COLUMNS)]
    for qid, doc, score in rows:
        lines.append(f"{qid}\tquery text\t{doc}\ttitle\tsnippet\t1\ta\t{score}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_read_and_merge_labels(tmp_path):
    path = write_labels(tmp_path / "l.tsv", [("q1", "d1", "2"), ("q2", "d4", "0"),
                                             ("q2", "d4", "0"), ("q1", "d2", "1")])
    labels = read_labels(path, 0, 2)
    assert labels.qrels == {"q1": {"d1": 2, "d2": 1}, "q2": {"d4": 0}}
    assert labels.repeated == 1
    merged, report = merge({"q1": {"d2": 1, "d5": 0}}, labels, str(path))
    assert merged == {"q1": {"d2": 1, "d5": 0, "d1": 2}, "q2": {"d4": 0}}
    assert (report["added"], report["already_judged_same"], report["judgments"]) == (2, 1, 4)


@pytest.mark.parametrize("rows, message", [
    ([("q1", "d1", "1"), ("q1", "d2", "yes")], r"l.tsv:3 field 'score': label 'yes' is not an integer"),
    ([("q1", "d1", "3")], r"l.tsv:2 field 'score': label 3 outside 0..2"),
    ([("q1", "d1", "1"), ("q2", "d4", "0"), ("q1", "d1", "2")],
     r"l.tsv:4 field 'score': pair \(q1, d1\) labelled 1 on line 2 and 2 here"),
    ([("q1", "d9", "1")], r"l.tsv:2 field 'doc_id': unknown document id 'd9'"),
    ([("q7", "d1", "1")], r"l.tsv:2 field 'query_id': unknown query id 'q7'"),
    # a row the annotator skipped: an error, not a pair silently left out of the judgments
    ([("q1", "d1", "1"), ("q1", "d3", "")], r"l.tsv:3 field 'score': blank label: fill it in, or delete the row"),
    ([("q1", "d1", " ")], r"l.tsv:2 field 'score': blank label"),
    # Arabic-Indic two: int() takes it, the qrels reader does not
    ([("q1", "d1", "\u0662")], r"l.tsv:2 field 'score': label '\u0662' is not an integer"),
])
def test_label_errors_name_file_and_line(tmp_path, rows, message):
    path = write_labels(tmp_path / "l.tsv", rows)
    with pytest.raises(InputError, match=message):
        read_labels(path, 0, 2, QUERIES, CORPUS)


@pytest.mark.parametrize("doc, message", [
    ("", "field 'doc_id': empty id"),
    ("d 1", r"field 'doc_id': id 'd 1' contains whitespace \(U\+0020 SPACE\)"),
])
def test_labels_without_a_dataset_still_refuse_ids_the_merged_qrels_could_not_carry(tmp_path, doc, message):
    # without --dataset the ids are not looked up, but one qrels could not hold is refused where it enters
    path = write_labels(tmp_path / "l.tsv", [("q1", "d2", "1"), ("q1", doc, "1")])
    with pytest.raises(InputError, match=f"l.tsv:3 {message}"):
        read_labels(path, 0, 2)


def test_label_file_structure_errors(tmp_path):
    path = tmp_path / "l.tsv"
    path.write_text("query_id\tdoc_id\n")
    with pytest.raises(InputError, match=r"l.tsv:1: header lacks column\(s\) score"):
        read_labels(path)
    path.write_text("query_id\tdoc_id\tscore\nq1\td1\n")
    with pytest.raises(InputError, match=r"l.tsv:2: expected 3 tab-separated columns, got 2"):
        read_labels(path)


def test_label_conflicting_with_existing_judgment(tmp_path):
    path = write_labels(tmp_path / "l.tsv", [("q1", "d1", "0"), ("q1", "d2", "2")])
    with pytest.raises(InputError, match=r"l.tsv:3 field 'score': pair \(q1, d2\) is already judged 1"):
        merge({"q1": {"d2": 1}}, read_labels(path), str(path))


def test_pool_and_merge_commands(tmp_path, capsys):
    dataset = write_beir(tmp_path / "ds", [{"_id": d.id, "title": d.title, "text": d.text} for d in CORPUS.values()],
                         [{"_id": q.id, "text": q.text} for q in QUERIES.values()], {"test": [("q1", "d2", 0)]})
    write_run(tmp_path / "a.trec", RUN_A, "a")
    write_run(tmp_path / "b.trec", RUN_B, "b")
    qrels = dataset / "qrels" / "test.tsv"
    argv = ["--dataset", str(dataset), "--runs", str(tmp_path / "a.trec"), str(tmp_path / "b.trec"),
            "--depth", "2", "--qrels", str(qrels), "--output", str(tmp_path / "pool.tsv")]
    assert run_command("pool", argv) == 0
    # what the judgments held back is counted (a hostile try: "already judged pairs left out", no count, and said
    # without --qrels too); q1's d2 is judged and in both runs' top 2: one pair
    assert f"(top 2 of 2 runs, 1 pairs {qrels} judges already left out)" in capsys.readouterr().out
    lines = (tmp_path / "pool.tsv").read_text().splitlines()
    assert lines[0].split("\t") == list(COLUMNS)
    assert lines[4].split("\t") == ["q2", "vpn drops", "d4", "VPN", "reconnect the tunnel", "1", "a,b", ""]
    assert len(lines) == 6  # header + the five rows of the hand-worked case
    # a judge fills in two labels and leaves the rest blank: refused at the first blank, nothing written
    filled = [line + "1" if i in (1, 4) else line for i, line in enumerate(lines)]
    (tmp_path / "labelled.tsv").write_text("\n".join(filled) + "\n")
    argv = ["--merge", str(tmp_path / "labelled.tsv"), "--qrels", str(qrels), "--dataset", str(dataset),
            "--output", str(tmp_path / "new.tsv")]
    assert run_command("pool", argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    said = f"{tmp_path / 'labelled.tsv'}:3 field 'score': blank label: fill it in, or delete the row to leave"
    assert err == [f"error: {said} the pair unjudged"], err
    assert not (tmp_path / "new.tsv").exists()
    # the rows left unjudged on purpose are deleted; the same row pasted twice is counted, not dropped unsaid
    kept = [line for line in filled if not line.endswith("\t")]
    (tmp_path / "labelled.tsv").write_text("\n".join(kept + [kept[2]]) + "\n")
    assert run_command("pool", argv) == 0
    assert ("2 labelled rows (2 new judgments, 0 agreeing with existing ones), 1 rows repeating an earlier row's "
            "label; 3 judgments" in capsys.readouterr().out)
    assert read_qrels(tmp_path / "new.tsv") == {"q1": {"d2": 0, "d1": 1}, "q2": {"d4": 1}}
    assert run_command("pool", ["--runs", str(tmp_path / "a.trec"), "--output", str(tmp_path / "p")]) == 2


def test_pool_and_merge_read_a_gzipped_collection(tmp_path, capsys):
    # a newcomer's try: collection.md says a BEIR folder's .gz files are read when the plain ones are absent, but
    # pool (and judge) opened corpus.jsonl by name: "file not found"
    import gzip

    from beir_fixtures import write_beir
    from command_runner import run_command

    col = write_beir(tmp_path / "col", [{"_id": f"d{i}", "title": "", "text": f"word{i}"} for i in range(3)],
                     [{"_id": "q1", "text": "word1"}], {"test": [("q1", "d1", 1)]})
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        plain = col / name
        (col / (name + ".gz")).write_bytes(gzip.compress(plain.read_bytes(), mtime=0))
        plain.unlink()
    run = tmp_path / "a.trec"
    run.write_text("q1 Q0 d1 1 2.0 a\nq1 Q0 d2 2 1.0 a\n")
    assert run_command("pool", ["--runs", str(run), "--dataset", str(col), "--depth", "2",
                                "--output", str(tmp_path / "pool.tsv")]) == 0
    pool = (tmp_path / "pool.tsv").read_text().splitlines()
    assert len(pool) == 3 and "word1" in pool[1]
    labelled = tmp_path / "labelled.tsv"  # the score column is the last: label d1 relevant, d2 not
    labelled.write_text("\n".join([pool[0]] + [line + ("1" if "\td1\t" in line else "0") for line in pool[1:]]) + "\n")
    assert run_command("pool", ["--merge", str(labelled), "--dataset", str(col), "--max-label", "1",
                                "--output", str(tmp_path / "qrels.tsv")]) == 0
    assert (tmp_path / "qrels.tsv").read_text() == "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\n"


def test_a_label_file_naming_a_column_twice_is_refused(tmp_path):
    # a hostile try: judge refused such a pool, pool --merge took the first of the two score columns silently
    path = tmp_path / "labelled.tsv"
    path.write_text("query_id\tdoc_id\tscore\tscore\nq1\td1\t0\t1\n")
    with pytest.raises(InputError, match=r"labelled.tsv:1 field 'score': column 'score' twice \(columns 3 and 4\)"):
        read_labels(path)


def test_merge_takes_its_label_range_from_params_as_judge_does(tmp_path, capsys):
    # the range had its own defaults (0..2) in the command; judge.min_label/max_label is the one default
    labelled = tmp_path / "labelled.tsv"
    labelled.write_text("query_id\tdoc_id\tscore\nq1\td1\t2\nq1\td2\t0\n")
    out = ["--output", str(tmp_path / "qrels.tsv")]
    (tmp_path / "params.yaml").write_text("judge:\n  max_label: 1\n")
    assert run_command("pool", ["--merge", str(labelled), "--params", str(tmp_path / "params.yaml"), *out]) == 2
    assert "labelled.tsv:2 field 'score'" in capsys.readouterr().err and not (tmp_path / "qrels.tsv").exists()
    assert run_command("pool", ["--merge", str(labelled), "--set", "judge.max_label=1", *out]) == 2
    assert run_command("pool", ["--merge", str(labelled), "--set", "judge.max_label=1", "--max-label", "2", *out]) == 0
    assert (tmp_path / "qrels.tsv").read_text() == "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\n"
