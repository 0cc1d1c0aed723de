"""Judgments in SQLite: one row per act (a label, a skip, an undo, an adjudication), never changed.

Why SQLite: one file the user keeps beside the pool, written by several threads (two browser tabs)
without losing a row, each label committed before its request returns (a process killed with SIGKILL
loses at most the label being typed), and readable by any tool. The database runs in WAL mode with
``synchronous=NORMAL`` (a commit is in the WAL file when it returns; the fsync waits for a checkpoint, so
only a crash of the machine itself, not of the process, could lose the newest labels); every write is one
``BEGIN IMMEDIATE`` transaction, so concurrent writers queue instead of overwriting each other.

Append-only: triggers refuse UPDATE and DELETE on ``judgment``. An undo is a row of its own that names
the row it takes back, so the history keeps both; the label in force for (assessor, query, document) is
that assessor's latest label row not taken back, and an adjudication's decision (the latest not taken
back) is the pair's label whatever the assessors said.

A database from elsewhere is checked when opened (:func:`open_store`): its format and version, its
schema, SQLite's own quick check, the pool it was made for and every row (assessor name, kind, label in
range, pair in the pool, what an undo names, the time); each problem is one line naming the file, the
row id (in the place of a line number) and the field.

Over 400 lines on purpose: one concern, the judgments file, whose writing and every check of it live here so
that no other module touches the database.
"""

from __future__ import annotations

import contextlib
import hashlib
import queue
import random
import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from ..core.atomic import atomic_path
from ..core.errors import InputError
from ..core.kinds import JUDGMENTS
from .pool_file import Pool

FORMAT = "retrieval-lab judgments"
VERSION = "1"
KINDS = ("label", "skip", "undo", "adjudicate")
NAME = re.compile(r"\w[\w .@+-]{0,62}[\w.]|\w")  # an assessor: a word or a few, no markup, no control character
_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE pool (position INTEGER PRIMARY KEY, query_id TEXT NOT NULL, doc_id TEXT NOT NULL,
                   UNIQUE (query_id, doc_id));
CREATE TABLE assignment (assessor TEXT NOT NULL, query_id TEXT NOT NULL, PRIMARY KEY (assessor, query_id));
CREATE TABLE judgment (id INTEGER PRIMARY KEY AUTOINCREMENT, assessor TEXT NOT NULL, kind TEXT NOT NULL,
                       query_id TEXT NOT NULL, doc_id TEXT NOT NULL, label INTEGER, undoes INTEGER,
                       time TEXT NOT NULL);
CREATE TRIGGER judgment_no_update BEFORE UPDATE ON judgment
    BEGIN SELECT RAISE(ABORT, 'judgments are append-only'); END;
CREATE TRIGGER judgment_no_delete BEFORE DELETE ON judgment
    BEGIN SELECT RAISE(ABORT, 'judgments are append-only'); END;
"""
_COLUMNS = {"meta": ["key", "value"], "pool": ["position", "query_id", "doc_id"],
            "assignment": ["assessor", "query_id"],
            "judgment": ["id", "assessor", "kind", "query_id", "doc_id", "label", "undoes", "time"]}
_BUSY_MS = 30_000  # a writer waits this long for another's transaction (two tabs, one export)

Pair = tuple[str, str]


@dataclass(frozen=True)
class LabelRange:
    """The labels a judgment may take, ``low``..``high``: one key each (0-9) on the page."""

    low: int
    high: int

    def __post_init__(self) -> None:
        if not 0 <= self.low <= self.high <= 9:
            raise InputError(f"labels {self.low}..{self.high}: expected 0 <= min <= max <= 9 (one key each)",
                             field="--max-label")

    @property
    def labels(self) -> tuple[int, ...]:
        return tuple(range(self.low, self.high + 1))

    def to_json(self) -> dict:
        return {"min": self.low, "max": self.high}


@dataclass(frozen=True)
class Judgment:
    """One row: who did what to which pair, and when (ISO 8601, UTC)."""

    id: int
    assessor: str
    kind: str  # label | skip | undo | adjudicate
    query_id: str
    doc_id: str
    label: int | None
    undoes: int | None
    time: str

    @property
    def pair(self) -> Pair:
        return self.query_id, self.doc_id

    def to_json(self) -> dict:
        return {"id": self.id, "assessor": self.assessor, "kind": self.kind, "query_id": self.query_id,
                "doc_id": self.doc_id, "label": self.label, "undoes": self.undoes, "time": self.time}


@dataclass(frozen=True)
class State:
    """What the rows mean now: the labels in force, the skips, the decisions and each one's history."""

    labels: dict[tuple[str, str, str], Judgment]  # (assessor, query, doc) -> the label row in force
    skipped: frozenset[tuple[str, str, str]]  # pairs an assessor skipped and has not labelled since
    decisions: dict[Pair, Judgment]  # (query, doc) -> the adjudication in force
    history: dict[str, tuple[Judgment, ...]]  # assessor -> rows in force (label, skip, adjudicate), in order
    last_id: int  # the newest row's id (0: none): a cache of anything derived from the state keys on it

    def assessors(self) -> tuple[str, ...]:
        """Everyone with a label in force, sorted."""
        return tuple(sorted({a for a, _, _ in self.labels}))

    def by_pair(self) -> dict[Pair, dict[str, int]]:
        """(query, doc) -> assessor -> label in force."""
        out: dict[Pair, dict[str, int]] = {}
        for (assessor, q, d), row in sorted(self.labels.items()):
            out.setdefault((q, d), {})[assessor] = row.label
        return out


def state_of(rows: Sequence[Judgment]) -> State:
    """Replay the rows in id order: an undo takes its row back (and so brings back what that row replaced)."""
    undone = {r.undoes for r in rows if r.kind == "undo"}
    labels: dict[tuple[str, str, str], Judgment] = {}
    latest: dict[tuple[str, str, str], Judgment] = {}
    decisions: dict[Pair, Judgment] = {}
    history: dict[str, list[Judgment]] = {}
    for row in rows:
        if row.kind == "undo" or row.id in undone:
            continue
        history.setdefault(row.assessor, []).append(row)
        key = (row.assessor, row.query_id, row.doc_id)
        if row.kind == "adjudicate":
            decisions[row.pair] = row
            continue
        latest[key] = row
        if row.kind == "label":
            labels[key] = row
    skipped = frozenset(k for k, row in latest.items() if row.kind == "skip" and k not in labels)
    return State(labels, skipped, decisions, {a: tuple(h) for a, h in history.items()},
                 max((r.id for r in rows), default=0))


def pool_fingerprint(pairs: Sequence[Pair]) -> str:
    return hashlib.sha256("".join(f"{q}\t{d}\n" for q, d in pairs).encode("utf-8")).hexdigest()


def check_name(name: object, what: str = "assessor", field: str = "assessor") -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InputError(f"{what} {name!r}: expected a name of 1-64 letters, digits, spaces or . _ @ + - "
                         "(no markup, no control character)", field=field)
    return name


def assign(queries: Sequence[str], assessors: Sequence[str], overlap: float, seed: int) -> dict[str, list[str]]:
    """assessor -> the queries they judge: a share ``overlap`` of the queries (drawn with ``seed``) goes to
    every assessor, so their agreement can be measured; the others are dealt out one assessor each, in turn."""
    names = list(dict.fromkeys(assessors))
    if not names:
        raise InputError("no assessor named", field="--assessors")
    for name in names:
        check_name(name, field="--assessors")
    order = list(queries)
    random.Random(seed).shuffle(order)
    shared = round(overlap * len(order))
    out: dict[str, list[str]] = {name: list(order[:shared]) for name in names}
    for i, qid in enumerate(order[shared:]):
        out[names[i % len(names)]].append(qid)
    position = {q: i for i, q in enumerate(queries)}
    return {name: sorted(qs, key=position.__getitem__) for name, qs in out.items()}


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _time_ok(text: object) -> bool:
    if not isinstance(text, str):
        return False
    try:
        datetime.fromisoformat(text)  # Python 3.11 reads the "Z"
    except ValueError:
        return False
    return True


@dataclass
class Store:
    """A judgments database, checked when opened. Thread-safe: each call takes a connection of its own from a
    small pool (one thread at a time per connection) and gives it back; kept open, they spare every request
    the checkpoint SQLite makes when its last connection closes. :meth:`close` closes them."""

    path: Path
    labels: LabelRange
    pairs: tuple[Pair, ...]  # the pool's pairs, in its order
    readonly: bool = False
    _in_pool: frozenset[Pair] = field(init=False, repr=False)
    _idle: queue.SimpleQueue = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._in_pool = frozenset(self.pairs)
        self._idle = queue.SimpleQueue()

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            con = self._idle.get_nowait()
        except queue.Empty:
            con = _connect(self.path, self.readonly, shared=True)
        try:
            yield con
        except BaseException:
            con.close()  # a connection that failed midway is not lent again
            raise
        self._idle.put(con)

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return

    # ------------------------------------------------------------------ reading

    def rows(self) -> tuple[Judgment, ...]:
        with self._connect() as con:
            return _rows(con)

    def state(self) -> State:
        return state_of(self.rows())

    def assignment(self) -> dict[str, tuple[str, ...]]:
        """assessor -> assigned queries in pool order ({}: no assignment, everyone judges every query)."""
        with self._connect() as con:
            found = con.execute("SELECT assessor, query_id FROM assignment").fetchall()
        order = {q: i for i, q in enumerate(dict.fromkeys(q for q, _ in self.pairs))}
        out: dict[str, list[str]] = {}
        for assessor, qid in found:
            out.setdefault(assessor, []).append(qid)
        return {a: tuple(sorted(qs, key=order.__getitem__)) for a, qs in sorted(out.items())}

    # ------------------------------------------------------------------ writing

    def _check(self, assessor: str, pair: Pair, label: int | None) -> None:
        check_name(assessor)
        if pair not in self._in_pool:
            raise InputError(f"pair ({pair[0]}, {pair[1]}) is not in the pool", field="doc_id")
        if label is not None and (not isinstance(label, int) or isinstance(label, bool)
                                  or label not in self.labels.labels):
            raise InputError(f"label {label!r} outside {self.labels.low}..{self.labels.high}", field="label")

    def _insert(self, con: sqlite3.Connection, assessor: str, kind: str, pair: Pair, label: int | None,
                undoes: int | None = None) -> Judgment:
        time = now()
        cur = con.execute("INSERT INTO judgment (assessor, kind, query_id, doc_id, label, undoes, time) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?)", (assessor, kind, pair[0], pair[1], label, undoes, time))
        return Judgment(cur.lastrowid, assessor, kind, pair[0], pair[1], label, undoes, time)

    def _append(self, assessor: str, kind: str, pair: Pair, label: int | None) -> Judgment:
        self._check(assessor, pair, label)
        with self._connect() as con, _transaction(con):
            return self._insert(con, assessor, kind, pair, label)

    def label(self, assessor: str, pair: Pair, label: int) -> Judgment:
        if label is None:
            raise InputError("a label is required", field="label")
        return self._append(assessor, "label", pair, label)

    def skip(self, assessor: str, pair: Pair) -> Judgment:
        return self._append(assessor, "skip", pair, None)

    def adjudicate(self, adjudicator: str, pair: Pair, label: int) -> Judgment:
        if label is None:
            raise InputError("a label is required", field="label")
        return self._append(adjudicator, "adjudicate", pair, label)

    def undo(self, assessor: str, row_id: int | None = None) -> Judgment | None:
        """Take back ``row_id`` (default: this assessor's newest row in force); returns the row taken back,
        None when there is nothing left to take back. Read and write are one transaction: another tab's
        label lands before or after, never in between."""
        check_name(assessor)
        with self._connect() as con, _transaction(con):
            history = state_of(_rows(con)).history.get(assessor, ())
            if row_id is None:
                if not history:
                    return None
                target = history[-1]
            else:
                target = next((r for r in history if r.id == row_id), None)
                if target is None:
                    raise InputError(f"row {row_id!r} is not a judgment of {assessor!r} in force", field="id")
            self._insert(con, assessor, "undo", target.pair, None, target.id)
            return target

    def set_assignment(self, assignment: dict[str, list[str]]) -> bool:
        """Store the assignment once; the same again is accepted (False), a different one refused."""
        wanted = {(a, q) for a, qs in assignment.items() for q in qs}
        queries = {q for q, _ in self.pairs}
        for _, q in wanted:
            if q not in queries:
                raise InputError(f"query {q!r} is not in the pool", field="--assessors")
        with self._connect() as con, _transaction(con):
            stored = set(con.execute("SELECT assessor, query_id FROM assignment").fetchall())
            if stored == wanted:
                return False
            if stored:
                names = ", ".join(sorted({a for a, _ in stored}))
                raise InputError(f"already assigns the queries to {names} (an assignment is kept for the whole "
                                 "session; start a new database for another)", str(self.path), field="--assessors")
            con.executemany("INSERT INTO assignment (assessor, query_id) VALUES (?, ?)", sorted(wanted))
            return True


@contextlib.contextmanager
def _transaction(con: sqlite3.Connection) -> Iterator[None]:
    con.execute("BEGIN IMMEDIATE")  # the write lock now: a read inside sees every earlier commit
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _connect(path: Path, readonly: bool, shared: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit); ``shared``: usable from any thread, one at
    a time (the store's pool hands each to one call)."""
    mode = "ro" if readonly else "rw"
    con = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode={mode}", uri=True, timeout=_BUSY_MS / 1000,
                          isolation_level=None, check_same_thread=not shared)
    con.execute(f"PRAGMA busy_timeout = {_BUSY_MS}")
    # a committed label is in the WAL file before the call returns, so a killed process (SIGKILL) loses none;
    # NORMAL leaves the fsync to checkpoints, so only a crash of the machine itself could lose the newest
    con.execute("PRAGMA synchronous = NORMAL")
    return con


def _rows(con: sqlite3.Connection) -> tuple[Judgment, ...]:
    return tuple(Judgment(*row) for row in con.execute(
        "SELECT id, assessor, kind, query_id, doc_id, label, undoes, time FROM judgment ORDER BY id"))


def create_store(path: str | Path, pool: Pool, labels: LabelRange) -> None:
    """A new database for ``pool``, made beside ``path`` and renamed into place whole (never half a schema)."""
    path = Path(path)
    with atomic_path(path, kind=JUDGMENTS) as tmp:
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode = WAL")  # kept in the file: every later connection uses it
            con.executescript(_SCHEMA)
            with _transaction(con):
                meta = {"format": FORMAT, "version": VERSION, "min_label": str(labels.low),
                        "max_label": str(labels.high), "pool": pool.source, "pool_pairs": str(len(pool.items)),
                        "pool_sha256": pool_fingerprint(pool.pairs), "created": now()}
                con.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta.items())
                con.executemany("INSERT INTO pool (position, query_id, doc_id) VALUES (?, ?, ?)",
                                [(i, q, d) for i, (q, d) in enumerate(pool.pairs)])
        finally:
            con.close()


def recorded_pool(path: str | Path) -> str | None:
    """The pool path a judgments database records (``meta.pool``, as given when it was made), or None where
    there is no readable database: what ``judge --export`` must never write over."""
    path = Path(path)
    if not path.is_file():
        return None
    try:  # immutable: no lock, no -wal or -shm made beside it; meta is written once, when the database is made
        con = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1", uri=True)
        try:
            row = con.execute("SELECT value FROM meta WHERE key = 'pool'").fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return row[0] if row and isinstance(row[0], str) and row[0] else None


def open_store(path: str | Path, pool: Pool | None = None, labels: LabelRange | None = None,
               readonly: bool = False) -> Store:
    """Open and check a judgments database: made by this format's version, for ``pool`` (when given) and the
    label range ``labels`` (when given), every row valid. Each problem is one InputError naming file, row
    and field."""
    path = Path(path)
    where = str(path)
    if path.is_dir():
        raise InputError("is a folder; expected a judgments database file", where, field="--db")
    if not path.is_file():
        raise InputError("no judgments database here (`retrieval-lab judge --pool POOL --db FILE` makes one)",
                         where, field="--db")
    try:
        con = _connect(path, readonly)
    except sqlite3.Error as exc:
        raise InputError(f"cannot open it as SQLite ({exc})", where, field="--db") from None
    try:
        return _checked(con, path, pool, labels, readonly)
    except sqlite3.DatabaseError as exc:  # not a database, or a damaged one
        raise InputError(f"not a readable SQLite database ({exc})", where, field="--db") from None
    finally:
        con.close()


def _checked(con: sqlite3.Connection, path: Path, pool: Pool | None, labels: LabelRange | None,
             readonly: bool) -> Store:
    where = str(path)
    for table, columns in _COLUMNS.items():
        found = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        if not found:
            raise InputError(f"not a judgments database of retrieval-lab (no table {table!r})", where, field="--db")
        if found != columns:
            raise InputError(f"table {table!r} has columns {found}, expected {columns}", where, field=table)
    _check_schema(con, where)
    check = con.execute("PRAGMA quick_check").fetchone()[0]
    if check != "ok":
        raise InputError(f"damaged: SQLite's quick check says {check!r}", where, field="--db")
    meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
    if meta.get("format") != FORMAT:
        raise InputError(f"format {meta.get('format')!r}, expected {FORMAT!r}", where, field="meta.format")
    if meta.get("version") != VERSION:
        raise InputError(f"version {meta.get('version')!r}, this retrieval-lab reads {VERSION!r}", where,
                         field="meta.version")
    try:
        stored = LabelRange(int(meta["min_label"]), int(meta["max_label"]))
    except (KeyError, ValueError, InputError):
        raise InputError(f"label range {meta.get('min_label')!r}..{meta.get('max_label')!r} is not 0 <= min <= "
                         "max <= 9", where, field="meta.max_label") from None
    if labels is not None and labels != stored:
        raise InputError(f"was made for labels {stored.low}..{stored.high}, not {labels.low}..{labels.high} (a "
                         "session keeps its range)", where, field="--max-label")
    pairs = tuple((q, d) for q, d in con.execute("SELECT query_id, doc_id FROM pool ORDER BY position"))
    if not pairs:
        raise InputError("its pool table is empty", where, field="pool")
    if meta.get("pool_sha256") != pool_fingerprint(pairs):
        raise InputError("its pool table does not match the fingerprint it was made with", where, field="pool")
    if pool is not None and pool.pairs != pairs:
        mine, theirs = set(pool.pairs), set(pairs)
        extra = next((p for p in pool.pairs if p not in theirs), None)
        gone = next((p for p in pairs if p not in mine), None)
        what = (f"({extra[0]}, {extra[1]}) of {pool.source} is not in it" if extra else
                f"({gone[0]}, {gone[1]}) is in it but not in {pool.source}" if gone else "the pairs' order differs")
        raise InputError(f"was made for another pool ({meta.get('pool')}): {what}", where, field="--pool")
    in_pool, queries = set(pairs), {q for q, _ in pairs}
    for assessor, qid in con.execute("SELECT assessor, query_id FROM assignment"):
        if not isinstance(assessor, str) or not NAME.fullmatch(assessor):
            raise InputError(f"assessor {assessor!r} is not a valid name", where, field="assignment.assessor")
        if qid not in queries:
            raise InputError(f"assigns query {qid!r}, which is not in the pool", where, field="assignment.query_id")
    seen: dict[int, Judgment] = {}
    undone: set[int] = set()
    for row in _rows(con):
        _check_row(row, seen, undone, in_pool, stored, where)
        seen[row.id] = row
        if row.kind == "undo":
            undone.add(row.undoes)
    return Store(path, stored, pairs, readonly)


_SCHEMA_OBJECTS = "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_stat%'"


def _expected_schema() -> set[tuple]:
    """What :data:`_SCHEMA` makes, read back from SQLite itself (tables, their indexes, the triggers)."""
    con = sqlite3.connect(":memory:")
    try:
        con.executescript(_SCHEMA)
        return set(con.execute(_SCHEMA_OBJECTS))
    finally:
        con.close()


def _check_schema(con: sqlite3.Connection, where: str) -> None:
    """Every schema object (table, index, trigger, view) is one this module creates, unchanged: a trigger dropped,
    replaced or added (one that rewrites or deletes rows after each insert) would make the append-only file lie.
    ANALYZE's statistics tables are allowed."""
    found, expected = set(con.execute(_SCHEMA_OBJECTS)), _expected_schema()
    extra = sorted(found - expected, key=lambda o: (o[0], o[1]))
    if extra:
        kind, name = extra[0][:2]
        ours = any(o[:2] == (kind, name) for o in expected)
        raise InputError(f"its {kind} {name!r} is {'changed from' if ours else 'not'} the one retrieval-lab makes "
                         "(the schema must be exactly retrieval-lab's: judgments are append-only)", where,
                         field="sqlite_master")
    missing = sorted(expected - found, key=lambda o: (o[0], o[1]))
    if missing:
        raise InputError(f"its {missing[0][0]} {missing[0][1]!r} is missing (the schema must be exactly "
                         "retrieval-lab's: judgments are append-only)", where, field="sqlite_master")


def _check_row(row: Judgment, earlier: dict[int, Judgment], undone: set[int], in_pool: set[Pair],
               labels: LabelRange, where: str) -> None:
    def bad(message: str, field: str) -> InputError:
        return InputError(message, where, row.id, field)

    if not isinstance(row.assessor, str) or not NAME.fullmatch(row.assessor):
        raise bad(f"assessor {row.assessor!r} is not a valid name", "assessor")
    if row.kind not in KINDS:
        raise bad(f"kind {row.kind!r} is not one of {', '.join(KINDS)}", "kind")
    if (row.query_id, row.doc_id) not in in_pool:
        raise bad(f"pair ({row.query_id}, {row.doc_id}) is not in the pool", "doc_id")
    if row.kind in ("label", "adjudicate"):
        if not isinstance(row.label, int) or row.label not in labels.labels:
            raise bad(f"label {row.label!r} outside {labels.low}..{labels.high}", "label")
    elif row.label is not None:
        raise bad(f"a {row.kind} carries no label, got {row.label!r}", "label")
    if row.kind == "undo":
        target = earlier.get(row.undoes) if isinstance(row.undoes, int) else None
        if target is None or target.kind == "undo" or target.assessor != row.assessor or target.pair != row.pair:
            raise bad(f"undoes {row.undoes!r}, which is no earlier judgment of {row.assessor!r} on this pair",
                      "undoes")
        if row.undoes in undone:
            raise bad(f"undoes row {row.undoes} a second time", "undoes")
    elif row.undoes is not None:
        raise bad(f"a {row.kind} undoes nothing, got {row.undoes!r}", "undoes")
    if not _time_ok(row.time):
        raise bad(f"time {row.time!r} is not an ISO 8601 date and time", "time")
