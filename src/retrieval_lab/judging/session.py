"""A judging session: the pool, its database, who judges what and in which order; what the page asks for.

No HTTP here (:mod:`.server` only carries these calls and their JSON), so a notebook or a script can
drive a session the way the page does.

Each assessor works through a *queue*: the pool's pairs of the queries assigned to them (every query when
nothing is assigned), in the pool's order, or, given two runs to compare, the judgments that matter
first (:mod:`.sensitivity`). The next pair is the first one they have neither labelled nor skipped; when
only skipped ones are left they come back in queue order. Resuming is the same rule: nothing about the
position is kept but the judgments themselves.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from ..core.data import Qrels
from ..core.errors import InputError
from ..runs import Run
from .agreement import Agreement, agreement
from .export import final_labels
from .pool_file import Item, Pool
from .sensitivity import Sensitivity, candidates, sensitivity
from .store import Judgment, Pair, State, Store, check_name

QUEUES = ("pool", "sensitivity")


@dataclass(frozen=True)
class Comparison:
    """Two runs whose comparison the session's judgments should settle, and how it is judged."""

    base_name: str
    head_name: str
    base: Run
    head: Run
    measure: str
    depth: int
    ci_level: float
    permutations: int
    seed: int


@dataclass(frozen=True)
class Progress:
    total: int  # pairs in the assessor's queue
    labelled: int
    skipped: int  # skipped and not labelled since

    def to_json(self) -> dict:
        return {"total": self.total, "labelled": self.labelled, "skipped": self.skipped,
                "left": self.total - self.labelled}


@dataclass(frozen=True)
class View:
    """What the page shows an assessor: one pair (None: every pair of the queue is labelled), their label
    on it, their progress and the pairs they have labelled (for going back)."""

    assessor: str
    queue: str
    item: Item | None
    label: int | None
    terms: tuple[str, ...]  # lowercase words to highlight in the query and the document
    progress: Progress
    history: tuple[Pair, ...]  # pairs labelled, in the order of their label in force
    reveal: bool

    def to_json(self) -> dict:
        return {"assessor": self.assessor, "queue": self.queue,
                "item": None if self.item is None else self.item.to_json(self.reveal), "label": self.label,
                "terms": list(self.terms), "progress": self.progress.to_json(),
                "history": [list(p) for p in self.history], "reveal": self.reveal}


class Session:
    """The pool, its store and the optional comparison; every method is safe to call from several threads."""

    def __init__(self, pool: Pool, store: Store, terms: Mapping[str, tuple[str, ...]], existing: Qrels | None = None,
                 comparison: Comparison | None = None):
        if pool.pairs != store.pairs:
            raise InputError("the database was made for another pool", str(store.path), field="--pool")
        self.pool, self.store, self.comparison = pool, store, comparison
        self.existing: Qrels = existing or {}
        self.terms = dict(terms)
        self._items = {item.pair: item for item in pool.items}
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[object, object]] = {}  # name -> (key, value)
        self._memo: dict = {}  # sensitivity's per-query trials (one comparison per session)

    # ------------------------------------------------------------------ who judges what

    def assessors(self) -> tuple[str, ...]:
        """The assigned assessors ((): anyone may judge, every query)."""
        return tuple(self.store.assignment())

    def queue(self, assessor: str, order: str = "pool", state: State | None = None) -> tuple[Pair, ...]:
        check_name(assessor)
        if order not in QUEUES:
            raise InputError(f"unknown queue {order!r} (choices: {', '.join(QUEUES)})", field="queue")
        assignment = self.store.assignment()
        if assignment and assessor not in assignment:
            raise InputError(f"{assessor!r} has no assigned queries (assessors: {', '.join(assignment)})",
                             field="assessor")
        mine = set(assignment[assessor]) if assignment else None
        pairs = [p for p in self.pool.pairs if mine is None or p[0] in mine]
        if order == "sensitivity":
            if self.comparison is None:
                raise InputError("no runs to compare: start judge with --base and --head", field="queue")
            allowed = set(pairs)
            first = [c.pair for c in self._candidates(state or self.store.state()) if c.pair in allowed]
            pairs = list(dict.fromkeys([*first, *pairs]))
        return tuple(pairs)

    # ------------------------------------------------------------------ views

    def view(self, assessor: str, order: str = "pool", reveal: bool = False, pair: Pair | None = None) -> View:
        state = self.store.state()
        queue = self.queue(assessor, order, state)
        mine = {(q, d): row for (a, q, d), row in state.labels.items() if a == assessor}
        skipped = {(q, d) for a, q, d in state.skipped if a == assessor}
        if pair is None:
            pair = next((p for p in queue if p not in mine and p not in skipped), None)
            if pair is None:
                pair = next((p for p in queue if p not in mine), None)
        elif pair not in self._items:
            raise InputError(f"pair ({pair[0]}, {pair[1]}) is not in the pool", field="doc_id")
        done = sum(p in mine for p in queue)
        progress = Progress(len(queue), done, sum(p in skipped for p in queue))
        history = tuple(sorted(mine, key=lambda p: mine[p].id))
        item = None if pair is None else self._items[pair]
        label = None if pair is None or pair not in mine else mine[pair].label
        terms = () if item is None else self.terms.get(item.query_id, ())
        return View(assessor, order, item, label, terms, progress, history, reveal)

    # ------------------------------------------------------------------ acts

    def label(self, assessor: str, pair: Pair, label: int) -> Judgment:
        self._may_judge(assessor, pair)
        return self.store.label(assessor, pair, label)

    def skip(self, assessor: str, pair: Pair) -> Judgment:
        self._may_judge(assessor, pair)
        return self.store.skip(assessor, pair)

    def undo(self, assessor: str, row_id: int | None = None) -> Judgment | None:
        return self.store.undo(assessor, row_id)

    def adjudicate(self, adjudicator: str, pair: Pair, label: int) -> Judgment:
        state = self.store.state()
        given = state.by_pair().get(pair, {})
        if len(set(given.values())) < 2:
            raise InputError(f"pair ({pair[0]}, {pair[1]}) is not in dispute (labels: {given or 'none'})",
                             field="doc_id")
        return self.store.adjudicate(adjudicator, pair, label)

    def _may_judge(self, assessor: str, pair: Pair) -> None:
        check_name(assessor)
        if pair not in self._items:
            raise InputError(f"pair ({pair[0]}, {pair[1]}) is not in the pool", field="doc_id")
        assignment = self.store.assignment()
        if assignment and pair[0] not in assignment.get(assessor, ()):
            raise InputError(f"query {pair[0]!r} is not assigned to {assessor!r}", field="assessor")

    # ------------------------------------------------------------------ reports

    def agreement(self) -> Agreement:
        return agreement(self.store.state(), self.pool.pairs, self.store.labels.labels)

    def judged(self, state: State | None = None) -> Qrels:
        """The existing judgments plus the session's final labels (disputed pairs left out), as qrels."""
        final = final_labels(state or self.store.state(), self.pool.pairs)
        out = {q: dict(j) for q, j in self.existing.items()}
        for (q, d), label in final.labels.items():
            out.setdefault(q, {}).setdefault(d, label)
        return out

    def _cached(self, name: str, key, make):
        with self._lock:
            hit = self._cache.get(name)
            if hit is not None and hit[0] == key:
                return hit[1]
            value = make()
            self._cache[name] = (key, value)
            return value

    def _candidates(self, state: State):
        c = self.comparison
        judged = self.judged(state)
        key = tuple(sorted((q, d, r) for q, j in judged.items() for d, r in j.items()))
        return self._cached("candidates", key, lambda: candidates(
            judged, c.base, c.head, c.measure, c.depth, self.pool.queries, self.store.labels.high,
            set(self.pool.pairs), self._memo))

    def sensitivity(self) -> Sensitivity:
        c = self.comparison
        if c is None:
            raise InputError("no runs to compare: start judge with --base and --head", field="--base")
        state = self.store.state()
        judged = self.judged(state)
        key = tuple(sorted((q, d, r) for q, j in judged.items() for d, r in j.items()))
        return self._cached("sensitivity", key, lambda: sensitivity(
            c.base, c.head, self.existing, judged, c.measure, c.depth, self.store.labels.high,
            self.store.labels.low, self.pool.queries, set(self.pool.pairs), c.ci_level, c.permutations, c.seed,
            (c.base_name, c.head_name), self._memo))
