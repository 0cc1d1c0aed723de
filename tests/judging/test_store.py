"""The judgments database: append-only rows, undo, resume, concurrent writers, and a database from elsewhere
checked like every other input (one line naming file, row and field)."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from judge_fixtures import PAIRS, write_tiny_pool

from retrieval_lab.core.errors import InputError
from retrieval_lab.judging import read_pool
from retrieval_lab.judging.store import LabelRange, assign, create_store, open_store


@pytest.fixture
def store(tmp_path):
    pool = read_pool(write_tiny_pool(tmp_path / "pool.tsv"))
    create_store(tmp_path / "j.sqlite", pool, LabelRange(0, 2))
    return open_store(tmp_path / "j.sqlite", pool)


def test_a_new_database_is_in_wal_mode_and_holds_the_pool(store):
    con = sqlite3.connect(store.path)
    assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert store.pairs == tuple(PAIRS) and store.labels == LabelRange(0, 2)


def test_labels_skips_and_undo_are_rows_never_rewritten(store):
    first = store.label("alice", PAIRS[0], 1)
    store.label("alice", PAIRS[0], 2)  # relabelled: the newest label is in force, the first kept
    store.skip("alice", PAIRS[1])
    store.label("bob", PAIRS[0], 0)
    state = store.state()
    assert state.labels[("alice", *PAIRS[0])].label == 2 and ("alice", *PAIRS[1]) in state.skipped
    assert store.undo("alice").kind == "skip"  # the newest act of alice's
    taken = store.undo("alice")
    assert taken.label == 2
    state = store.state()
    assert state.labels[("alice", *PAIRS[0])].id == first.id  # the earlier label is back in force
    assert ("alice", *PAIRS[1]) not in state.skipped and state.labels[("bob", *PAIRS[0])].label == 0
    assert [r.kind for r in store.rows()] == ["label", "label", "skip", "label", "undo", "undo"]
    con = sqlite3.connect(store.path, isolation_level=None)
    for statement in ("UPDATE judgment SET label = 0", "DELETE FROM judgment"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            con.execute(statement)
    con.close()
    with pytest.raises(InputError, match="not a judgment of 'bob' in force"):
        store.undo("bob", first.id)  # another assessor's row
    assert store.undo("carol") is None


@pytest.mark.parametrize(("call", "said"), [
    (lambda s: s.label("alice", ("q1", "d9"), 1), "not in the pool"),
    (lambda s: s.label("alice", PAIRS[0], 3), "outside 0..2"),
    (lambda s: s.label("alice", PAIRS[0], True), "outside 0..2"),
    (lambda s: s.label("<b>x</b>", PAIRS[0], 1), "expected a name"),
    (lambda s: s.label("", PAIRS[0], 1), "expected a name"),
])
def test_a_bad_write_is_refused_and_writes_nothing(store, call, said):
    with pytest.raises(InputError, match=said):
        call(store)
    assert store.rows() == ()


def test_two_writers_at_once_lose_nothing(store):
    """Two threads (two tabs) write 30 labels each on the same pairs at once: all 60 rows are kept."""
    barrier = threading.Barrier(2)
    errors = []

    def tab(name: str, label: int) -> None:
        barrier.wait()
        try:
            for i in range(30):
                store.label(name, PAIRS[i % len(PAIRS)], label)
        except Exception as exc:  # noqa: BLE001 - the test reports any
            errors.append(exc)

    threads = [threading.Thread(target=tab, args=("alice", 1)), threading.Thread(target=tab, args=("alice", 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    rows = store.rows()
    assert len(rows) == 60 and sorted(r.label for r in rows) == [1] * 30 + [2] * 30
    assert len({r.id for r in rows}) == 60


def test_assignment_shares_the_overlap_and_deals_the_rest():
    queries = [f"q{i}" for i in range(10)]
    given = assign(queries, ["alice", "bob"], 0.2, seed=3)
    shared = set(given["alice"]) & set(given["bob"])
    assert len(shared) == 2 and len(given["alice"]) == len(given["bob"]) == 6
    assert set(given["alice"]) | set(given["bob"]) == set(queries)
    assert given == assign(queries, ["alice", "bob"], 0.2, seed=3)  # the seed decides
    assert all(given[a] == sorted(given[a], key=queries.index) for a in given)  # in the pool's order
    assert assign(queries, ["a", "b", "c"], 1.0, 0) == {n: queries for n in "abc"}


def test_an_assignment_is_kept_for_the_session(store):
    assignment = assign(["q1", "q2", "q3"], ["alice", "bob"], 0.0, 1)
    assert store.set_assignment(assignment) is True
    assert store.set_assignment(assignment) is False
    with pytest.raises(InputError, match="already assigns the queries to alice, bob"):
        store.set_assignment(assign(["q1", "q2", "q3"], ["alice", "carol"], 0.0, 1))


# ----------------------------------------------------------------------------- a database from elsewhere


def _damaged(tmp_path, store, sql: str) -> str:
    store.label("alice", PAIRS[0], 1)
    con = sqlite3.connect(store.path)
    con.executescript(sql)
    con.close()
    with pytest.raises(InputError) as info:
        open_store(store.path)
    assert "\n" not in str(info.value)
    return str(info.value)


def _insert(columns: str, values: str) -> str:
    return f"INSERT INTO judgment (assessor, kind, query_id, doc_id, {columns}, time) VALUES ({values})"


WHEN = "'2026-01-01T00:00:00Z'"


@pytest.mark.parametrize(("sql", "said"), [
    (_insert("label", "'bob', 'label', 'q1', 'd1', 7, " + WHEN), ":2 field 'label': label 7 outside 0..2"),
    (_insert("label", "'bob', 'label', 'q9', 'd1', 1, " + WHEN), ":2 field 'doc_id': pair (q9, d1) is not"),
    (_insert("label", "'<script>', 'label', 'q1', 'd1', 1, " + WHEN), ":2 field 'assessor'"),
    (_insert("label", "'bob', 'erase', 'q1', 'd1', NULL, " + WHEN), ":2 field 'kind'"),
    (_insert("undoes", "'bob', 'undo', 'q1', 'd1', 1, " + WHEN), ":2 field 'undoes'"),
    (_insert("label", "'bob', 'label', 'q1', 'd1', 1, 'yesterday'"), ":2 field 'time'"),
    ("UPDATE meta SET value = '9' WHERE key = 'version'", "field 'meta.version': version '9'"),
    ("UPDATE meta SET value = 'photos' WHERE key = 'format'", "field 'meta.format'"),
    ("INSERT INTO pool (position, query_id, doc_id) VALUES (99, 'q1', 'd9')", "field 'pool': its pool table does"),
    ("DROP TRIGGER judgment_no_update; DROP TABLE assignment", "no table 'assignment'"),
], ids=["label", "pair", "assessor", "kind", "undo", "time", "version", "format", "pool", "schema"])
def test_a_tampered_database_is_refused_in_one_line(tmp_path, store, sql, said):
    assert said in _damaged(tmp_path, store, sql)


def test_not_a_database_and_another_pool_are_refused(tmp_path, store):
    fake = tmp_path / "notes.sqlite"
    fake.write_text("not a database at all, but long enough to have a header " * 20)
    with pytest.raises(InputError, match=r"notes.sqlite field '--db': .*file is not a database"):
        open_store(fake)
    with pytest.raises(InputError, match=r"field '--db': no judgments database here"):
        open_store(tmp_path / "missing.sqlite")
    other = tmp_path / "other.tsv"
    lines = (tmp_path / "pool.tsv").read_text().splitlines()
    other.write_text("\n".join(lines[:-1]) + "\n")  # the last pair left out
    with pytest.raises(InputError, match=r"field '--pool': was made for another pool .*\(q3, d6\) is in it"):
        open_store(store.path, read_pool(other))
    with pytest.raises(InputError, match=r"field '--max-label': was made for labels 0..2, not 0..1"):
        open_store(store.path, labels=LabelRange(0, 1))


FLIP = ("DROP TRIGGER judgment_no_update; DROP TRIGGER judgment_no_delete; "
        "CREATE TRIGGER flip AFTER INSERT ON judgment BEGIN "
        "UPDATE judgment SET label = 2 - label WHERE id = NEW.id; DELETE FROM judgment WHERE id < NEW.id; END;")


@pytest.mark.parametrize(("sql", "said"), [
    (FLIP, "field 'sqlite_master': its trigger 'flip' is not the one retrieval-lab makes"),
    ("DROP TRIGGER judgment_no_delete", "its trigger 'judgment_no_delete' is missing"),
    (("DROP TRIGGER judgment_no_update; CREATE TRIGGER judgment_no_update BEFORE UPDATE ON judgment BEGIN SELECT 1; "
      "END;"), "its trigger 'judgment_no_update' is changed from the one retrieval-lab makes"),
    ("CREATE INDEX by_label ON judgment (label)", "its index 'by_label' is not the one"),
    ("CREATE VIEW everything AS SELECT * FROM judgment", "its view 'everything' is not the one"),
], ids=["flip", "dropped", "replaced", "index", "view"])
def test_a_schema_other_than_ours_is_refused_in_one_line(tmp_path, store, sql, said):
    # hostile S11: judge accepted a database whose append-only triggers were dropped and replaced by one that
    # rewrites every label and deletes the earlier rows after each insert
    assert said in _damaged(tmp_path, store, sql)


def test_the_judge_command_refuses_a_replaced_trigger(tmp_path, store, capsys):
    from command_runner import run_command

    _damaged(tmp_path, store, FLIP)
    code = run_command("judge", ["--pool", str(tmp_path / "pool.tsv"), "--db", str(store.path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "trigger 'flip'" in err, err


def test_sqlites_own_statistics_are_no_tampering(tmp_path, store):
    store.label("alice", PAIRS[0], 1)
    con = sqlite3.connect(store.path)
    con.execute("ANALYZE")
    con.close()
    assert [r.label for r in open_store(store.path).rows()] == [1]
