"""How far assessors agree: raw agreement, Cohen's kappa for two, Fleiss' kappa for more, and the list
of pairs they label differently (what adjudication settles).

Only pairs labelled by two assessors or more count (the overlap). Kappa corrects raw agreement for the
agreement chance alone would give: 1 is perfect, 0 no better than chance, below 0 worse. It is NaN where
chance already explains everything (every label the same category), as scikit-learn's is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from .store import Pair, State


def _nan_to_none(x: float) -> float | None:
    return None if math.isnan(x) else x


def cohen_kappa(first: Sequence[int], second: Sequence[int]) -> float:
    """Cohen's kappa of two assessors' labels on the same items (aligned sequences).

    kappa = (p_o - p_e) / (1 - p_e), with p_o the share of items given the same label and
    p_e = sum over labels c of p_1(c) p_2(c), each assessor's share of items labelled c. NaN when
    p_e = 1 (both gave one and the same label to every item). Equals scikit-learn's cohen_kappa_score.
    """
    a, b = np.asarray(first), np.asarray(second)
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise ValueError(f"expected two aligned non-empty label lists, got {len(first)} and {len(second)} labels")
    categories = np.union1d(a, b)  # (c,)
    p_o = float(np.mean(a == b))
    p_e = float(np.sum([np.mean(a == c) * np.mean(b == c) for c in categories]))
    return _kappa(p_o, p_e)


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float:
    """Fleiss' kappa of n assessors who each labelled every one of N items.

    ``counts[i][j]``: how many assessors gave item i label j (each row sums to the same n >= 2).
    P_i = (sum_j n_ij^2 - n) / (n (n - 1)) is item i's agreeing share of assessor pairs, P = mean P_i;
    p_j = sum_i n_ij / (N n) is label j's share of all labels, P_e = sum_j p_j^2;
    kappa = (P - P_e) / (1 - P_e), NaN when P_e = 1.
    """
    x = np.asarray(counts, dtype=np.float64)  # (N, c)
    if x.ndim != 2 or len(x) == 0:
        raise ValueError("expected a non-empty items x labels table of counts")
    n = x.sum(axis=1)  # (N,)
    if not np.all(n == n[0]) or n[0] < 2:
        raise ValueError(f"every item needs the same number (>= 2) of labels, got {sorted(set(n.tolist()))}")
    raters = n[0]
    agreeing = ((x * x).sum(axis=1) - raters) / (raters * (raters - 1))  # (N,) P_i
    shares = x.sum(axis=0) / x.sum()  # (c,) p_j
    return _kappa(float(agreeing.mean()), float((shares * shares).sum()))


def _kappa(observed: float, chance: float) -> float:
    return float("nan") if math.isclose(chance, 1.0) else (observed - chance) / (1.0 - chance)


@dataclass(frozen=True)
class PairAgreement:
    """Two assessors over the pairs both labelled."""

    first: str
    second: str
    items: int
    agreeing: int
    kappa: float  # Cohen's

    @property
    def raw(self) -> float:
        return self.agreeing / self.items

    def to_json(self) -> dict:
        return {"first": self.first, "second": self.second, "items": self.items, "agreeing": self.agreeing,
                "raw": self.raw, "cohen_kappa": _nan_to_none(self.kappa)}


@dataclass(frozen=True)
class Kappa:
    """A group's kappa: Cohen's for two assessors, Fleiss' (over the pairs all of them labelled) for more."""

    name: str  # "cohen" | "fleiss" | "none" (fewer than two assessors)
    assessors: tuple[str, ...]
    items: int
    value: float

    def to_json(self) -> dict:
        return {"name": self.name, "assessors": list(self.assessors), "items": self.items,
                "value": _nan_to_none(self.value)}


@dataclass(frozen=True)
class QueryAgreement:
    query_id: str
    items: int  # the query's pairs labelled by two assessors or more
    agreeing: int  # of those, the pairs every assessor labelled alike
    kappa: Kappa

    def to_json(self) -> dict:
        return {"query_id": self.query_id, "items": self.items, "agreeing": self.agreeing,
                "raw": self.agreeing / self.items if self.items else None, "kappa": self.kappa.to_json()}


@dataclass(frozen=True)
class Disagreement:
    query_id: str
    doc_id: str
    labels: tuple[tuple[str, int], ...]  # (assessor, label), by assessor
    decision: int | None  # the adjudicated label, if any
    adjudicator: str | None

    def to_json(self) -> dict:
        return {"query_id": self.query_id, "doc_id": self.doc_id, "labels": dict(self.labels),
                "decision": self.decision, "adjudicator": self.adjudicator}


@dataclass(frozen=True)
class Agreement:
    """Agreement overall and per query, between every two assessors, and the pairs in dispute."""

    assessors: tuple[str, ...]  # everyone with a label on a pair someone else labelled too
    items: int  # pairs labelled by two assessors or more
    agreeing: int
    kappa: Kappa
    pairs: tuple[PairAgreement, ...]
    per_query: tuple[QueryAgreement, ...]
    disagreements: tuple[Disagreement, ...]

    @property
    def raw(self) -> float | None:
        return self.agreeing / self.items if self.items else None

    def to_json(self) -> dict:
        return {"assessors": list(self.assessors), "items": self.items, "agreeing": self.agreeing,
                "raw": self.raw, "kappa": self.kappa.to_json(), "pairs": [p.to_json() for p in self.pairs],
                "per_query": [q.to_json() for q in self.per_query],
                "disagreements": [d.to_json() for d in self.disagreements],
                "unresolved": sum(d.decision is None for d in self.disagreements)}


def _group_kappa(labelled: Mapping[Pair, Mapping[str, int]], categories: Sequence[int]) -> Kappa:
    """Kappa of the assessors found in ``labelled`` (pair -> assessor -> label, two or more per pair)."""
    names = tuple(sorted({a for labels in labelled.values() for a in labels}))
    if len(names) < 2:
        return Kappa("none", names, 0, float("nan"))
    if len(names) == 2:
        both = [labels for labels in labelled.values() if len(labels) == 2]
        return Kappa("cohen", names, len(both), cohen_kappa([x[names[0]] for x in both], [x[names[1]] for x in both]))
    everyone = [labels for labels in labelled.values() if len(labels) == len(names)]
    if not everyone:
        return Kappa("fleiss", names, 0, float("nan"))
    column = {c: j for j, c in enumerate(categories)}
    counts = np.zeros((len(everyone), len(categories)), dtype=np.int64)  # (N, c)
    for i, labels in enumerate(everyone):
        for label in labels.values():
            counts[i, column[label]] += 1
    return Kappa("fleiss", names, len(everyone), fleiss_kappa(counts))


def agreement(state: State, pairs: Sequence[Pair], categories: Sequence[int]) -> Agreement:
    """Agreement of the labels in force in ``state`` over the pool's ``pairs`` (their order is the report's)."""
    by_pair = state.by_pair()
    shared = {p: by_pair[p] for p in pairs if len(by_pair.get(p, {})) >= 2}
    names = tuple(sorted({a for labels in shared.values() for a in labels}))
    two = []
    for a, b in combinations(names, 2):
        both = [labels for labels in shared.values() if a in labels and b in labels]
        if both:
            x, y = [v[a] for v in both], [v[b] for v in both]
            two.append(PairAgreement(a, b, len(both), sum(i == j for i, j in zip(x, y)), cohen_kappa(x, y)))
    per_query = []
    for qid in dict.fromkeys(q for q, _ in shared):
        mine = {p: labels for p, labels in shared.items() if p[0] == qid}
        per_query.append(QueryAgreement(qid, len(mine), sum(len(set(v.values())) == 1 for v in mine.values()),
                                        _group_kappa(mine, categories)))
    disputed = []
    for (q, d), labels in shared.items():
        if len(set(labels.values())) > 1:
            decision = state.decisions.get((q, d))
            disputed.append(Disagreement(q, d, tuple(sorted(labels.items())),
                                         None if decision is None else decision.label,
                                         None if decision is None else decision.assessor))
    return Agreement(names, len(shared), sum(len(set(v.values())) == 1 for v in shared.values()),
                     _group_kappa(shared, categories), tuple(two), tuple(per_query), tuple(disputed))
