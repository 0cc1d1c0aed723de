"""Stage ``generate``: a synthetic IT-support knowledge base, BEIR layout (params ``generate:``).

The catalogue (``generate_catalogue.yaml``, package data beside this module) holds
20 components with two incident *families* each. A family has two procedures that
both resolve its incident and a few *confusable* documents about the same
component but another problem. The generator picks ``families`` of them,
``confusables_per_family`` confusables per family and ``generic_docs`` family-less
documents (policies, onboarding, how-tos), then writes ``queries_per_family``
queries per family.

Relevance (``qrels/all.tsv``), per query of family F:

* F's primary procedure: 2, F's alternative procedure: 1 -- exactly two positives,
  graded so that nDCG and friends reward putting the primary fix first;
* F's confusables: 0 (judged non-relevant: the hard negatives we know of);
* everything else: unjudged.

Confusables carry ``metadata.family = F`` so a family split keeps them with F.

Documents. A procedure's text is "<component line> <symptom> <numbered steps>
<another symptom>", with two of F's documentation phrasings of the symptom; a
confusable is "<component line> <its text>". Ids (d001..., q001...) are given
after a seeded shuffle, so they say nothing about relevance.

Difficulty. Each query starts from a symptom phrase. With probability
``difficulty`` it is a *paraphrase* (user words, few shared with the procedures:
a vocabulary gap), otherwise a documentation phrase. Independently, with
probability ``difficulty`` it also mentions the cue words of one of F's
confusables (surface homonymy). difficulty 0 gives queries that share the
documents' words; 1 gives only paraphrased, misleading queries. Query metadata
records ``style`` (lexical | paraphrase) and ``cue`` (the borrowed words or null)
for failure analysis. How hard the defaults are is measured, not stated here: the
pipeline writes each retriever's test-split figures to ``metrics/support/*.json``
(README, "Measured quality"); ``tests/test_generate.py`` checks that BM25 goes from
easy at difficulty 0 to hard at 1.

Every choice draws from one ``random.Random(seed)`` in catalogue order (no
``hash()``, no set iteration), so a seed gives byte-identical files.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from .core.atomic import atomic_path
from .core.data import Doc, Qrels, Query, write_corpus, write_qrels, write_queries
from .core.errors import InputError
from .core.params import GenerateParams

PRIMARY, ALTERNATIVE, CONFUSABLE = 2, 1, 0  # graded relevance written to qrels


@dataclass(frozen=True)
class Procedure:
    title: str
    steps: tuple[str, ...]


@dataclass(frozen=True)
class Confusable:
    title: str
    text: str
    cue: str  # the words a homonymous query borrows from this document


@dataclass(frozen=True)
class Family:
    id: str
    component: str  # a key of COMPONENTS
    symptoms: tuple[str, ...]  # documentation vocabulary (clauses, lower case, no final stop)
    paraphrases: tuple[str, ...]  # user vocabulary for the same incident
    primary: Procedure
    alternative: Procedure
    confusables: tuple[Confusable, ...]


@dataclass(frozen=True)
class Page:
    title: str
    text: str


@dataclass
class Generated:
    corpus: dict[str, Doc]
    queries: dict[str, Query]
    qrels: Qrels


# ----------------------------------------------------------------------------- catalogue

CATALOGUE = "generate_catalogue.yaml"  # package data beside this module: the incidents and pages


def _fields(data, keys: tuple[str, ...], where: str) -> list:
    """The values of ``keys`` in a catalogue mapping that has exactly those keys."""
    if not isinstance(data, dict) or set(data) != set(keys):
        got = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise InputError(f"expected the keys {list(keys)}, got {got}", CATALOGUE, field=where)
    return [data[key] for key in keys]


def _list(data, where: str) -> list:
    if not isinstance(data, list) or not data:
        raise InputError("expected a non-empty list", CATALOGUE, field=where)
    return data


def _text(data, where: str) -> str:
    if not isinstance(data, str) or not data:
        raise InputError(f"expected a non-empty string, got {data!r}", CATALOGUE, field=where)
    return data


def _texts(data, where: str) -> tuple[str, ...]:
    return tuple(_text(item, f"{where}[{i}]") for i, item in enumerate(_list(data, where)))


def _record(cls, data, where: str):
    """A dataclass of strings only (Page, Confusable) from a mapping with exactly its fields."""
    keys = tuple(f.name for f in dataclasses.fields(cls))
    return cls(*(_text(value, f"{where}.{key}") for key, value in zip(keys, _fields(data, keys, where))))


def _procedure(data, where: str) -> Procedure:
    title, steps = _fields(data, ("title", "steps"), where)
    return Procedure(_text(title, f"{where}.title"), _texts(steps, f"{where}.steps"))


def parse_catalogue(text: str) -> tuple[dict[str, str], tuple[Family, ...], tuple[Page, ...], tuple[Page, ...]]:
    """Components (slug -> name), families in file order, generic pages, per-component templates."""
    raw = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    components, generic, templates = _fields(raw, ("components", "generic", "generic_templates"), "")
    if not isinstance(components, dict) or not components:
        raise InputError("expected a mapping slug -> component", CATALOGUE, field="components")
    names: dict[str, str] = {}
    families: dict[str, Family] = {}  # ids must be unique: they key the documents while generating
    for slug, component in components.items():
        name, family_list = _fields(component, ("name", "families"), f"components.{slug}")
        names[slug] = _text(name, f"components.{slug}.name")
        for i, family in enumerate(_list(family_list, f"components.{slug}.families")):
            at = f"components.{slug}.families[{i}]"
            fid, symptoms, paraphrases, primary, alternative, confusables = _fields(
                family, ("id", "symptoms", "paraphrases", "primary", "alternative", "confusables"), at)
            if _text(fid, f"{at}.id") in families:
                raise InputError(f"family id {fid!r} used twice", CATALOGUE, field=f"{at}.id")
            families[fid] = Family(
                fid, slug, _texts(symptoms, f"{at}.symptoms"), _texts(paraphrases, f"{at}.paraphrases"),
                _procedure(primary, f"{at}.primary"), _procedure(alternative, f"{at}.alternative"),
                tuple(_record(Confusable, c, f"{at}.confusables[{j}]")
                      for j, c in enumerate(_list(confusables, f"{at}.confusables"))))
    return (names, tuple(families.values()),
            tuple(_record(Page, p, f"generic[{i}]") for i, p in enumerate(_list(generic, "generic"))),
            tuple(_record(Page, p, f"generic_templates[{i}]")
                  for i, p in enumerate(_list(templates, "generic_templates"))))


COMPONENTS, FAMILIES, GENERIC, GENERIC_TEMPLATES = parse_catalogue(
    resources.files(__package__).joinpath(CATALOGUE).read_text(encoding="utf-8"))

_AREA = ("Component: {name}.", "Service area: {name}.", "Applies to: {name}.")
_INTRO = ("Use this runbook when {symptom}.", "Symptom: {symptom}.",
          "This procedure applies when {symptom}.", "Follow these steps if {symptom}.")
_ALSO = ("The same fix applies when {symptom}.", "Also seen as: {symptom}.",
         "You may instead notice that {symptom}.")
_FRAMES = ("{S}.", "{S}, how do I fix it?", "How do we recover when {s}?", "What should I do? {S}.",
           "Urgent: {s}.", "{S}. Is there a runbook for this?", "Since this morning {s}.",
           "Help, {s}!")
_HOMONYM = (" Possibly related: {cue}.", " Someone mentioned {cue}, is that it?",
            " Could {cue} be the cause?")
MAX_QUERIES_PER_FAMILY = min(len(f.symptoms) for f in FAMILIES) * len(_FRAMES)


# ----------------------------------------------------------------------------- generation


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _check(params: GenerateParams, source: str | None) -> None:
    limits = {
        "families": (1, len(FAMILIES)),
        "confusables_per_family": (0, min(len(f.confusables) for f in FAMILIES)),
        "generic_docs": (0, len(GENERIC) + len(GENERIC_TEMPLATES) * len(COMPONENTS)),
        "queries_per_family": (1, MAX_QUERIES_PER_FAMILY),
    }
    for name, (low, high) in limits.items():
        value = getattr(params, name)
        if not low <= value <= high:
            raise InputError(f"must be between {low} and {high} (the catalogue's size), "
                             f"got {value}", source, field=f"generate.{name}")


def _procedure_text(rng: random.Random, family: Family, procedure: Procedure) -> str:
    area = rng.choice(_AREA).format(name=COMPONENTS[family.component])
    # Two of the family's symptom phrasings, so a documentation-worded query meets both procedures.
    first, second = rng.sample(family.symptoms, 2)
    intro = rng.choice(_INTRO).format(symptom=first)
    also = rng.choice(_ALSO).format(symptom=second)
    steps = " ".join(f"{i}. {step}" for i, step in enumerate(procedure.steps, start=1))
    return f"{area} {intro} {steps} {also}"


def _queries(rng: random.Random, family: Family, confusables: list[Confusable], count: int,
             difficulty: float) -> list[tuple[str, dict]]:
    """``count`` distinct query texts, each with metadata: family, style, borrowed cue (or None)."""
    # Round-robin over shuffled symptom phrasings so a family's queries vary before any repeats.
    pools = {"lexical": list(family.symptoms), "paraphrase": list(family.paraphrases)}
    for pool in pools.values():
        rng.shuffle(pool)
    used: set[tuple[str, str]] = set()
    out = []
    for _ in range(count):
        style = "paraphrase" if rng.random() < difficulty else "lexical"
        pool = pools[style]
        symptom = pool.pop(0)
        pool.append(symptom)
        # Never empty: MAX_QUERIES_PER_FAMILY bounds the uses of each symptom by len(_FRAMES).
        frames = [f for f in _FRAMES if (symptom, f) not in used]
        frame = rng.choice(frames)
        used.add((symptom, frame))
        text = frame.format(S=_capital(symptom), s=symptom)
        cue = None
        if confusables and rng.random() < difficulty:
            cue = rng.choice(confusables).cue
            text += rng.choice(_HOMONYM).format(cue=cue)
        out.append((text, {"family": family.id, "style": style, "cue": cue}))
    return out


def generate(params: GenerateParams, source: str | None = None) -> Generated:
    """Build the knowledge base for ``params`` (see the module docstring for the design).

    ``source`` (the params file) is named in the error when a size exceeds the catalogue.
    """
    _check(params, source)
    rng = random.Random(params.seed)
    families = [FAMILIES[i] for i in sorted(rng.sample(range(len(FAMILIES)), params.families))]

    # Documents are collected under a role key, shuffled, then numbered: ids carry no hint of
    # relevance (trec_eval breaks score ties by doc id).
    docs: list[tuple[tuple, str, str, dict]] = []  # (role key, title, text, metadata)
    family_confusables: dict[str, list[Confusable]] = {}
    for family in families:
        meta = {"family": family.id, "kind": "procedure", "component": family.component}
        for role, procedure in (("primary", family.primary), ("alternative", family.alternative)):
            text = _procedure_text(rng, family, procedure)
            docs.append(((family.id, role), procedure.title, text, dict(meta)))
        chosen = rng.sample(range(len(family.confusables)), params.confusables_per_family)
        picked = [family.confusables[i] for i in sorted(chosen)]
        family_confusables[family.id] = picked
        for j, confusable in enumerate(picked):
            area = rng.choice(_AREA).format(name=COMPONENTS[family.component])
            docs.append(((family.id, "confusable", j), confusable.title,
                         f"{area} {confusable.text}", {**meta, "kind": "confusable"}))
    pool = [(page.title, page.text, "general") for page in GENERIC] + [
        (page.title.format(name=name), page.text.format(name=name), slug)
        for slug, name in COMPONENTS.items() for page in GENERIC_TEMPLATES]
    for k in sorted(rng.sample(range(len(pool)), params.generic_docs)):
        title, text, component = pool[k]
        meta = {"family": None, "kind": "generic", "component": component}
        docs.append((("generic", k), title, text, meta))
    rng.shuffle(docs)

    width = len(str(len(docs)))
    corpus: dict[str, Doc] = {}
    doc_id: dict[tuple, str] = {}
    for number, (key, title, text, meta) in enumerate(docs, start=1):
        did = f"d{number:0{width}d}"
        doc_id[key] = did
        corpus[did] = Doc(did, title, text, meta["family"], meta)

    drafts = []
    for family in families:
        confusables = family_confusables[family.id]
        judged = {doc_id[family.id, "primary"]: PRIMARY,
                  doc_id[family.id, "alternative"]: ALTERNATIVE}
        judged.update({doc_id[family.id, "confusable", j]: CONFUSABLE
                       for j in range(len(confusables))})
        for text, meta in _queries(rng, family, confusables, params.queries_per_family,
                                   params.difficulty):
            drafts.append((text, meta, dict(sorted(judged.items()))))
    rng.shuffle(drafts)

    width = len(str(len(drafts)))
    queries: dict[str, Query] = {}
    qrels: Qrels = {}
    for number, (text, meta, judged) in enumerate(drafts, start=1):
        qid = f"q{number:0{width}d}"
        queries[qid] = Query(qid, text, meta["family"], meta)
        qrels[qid] = judged
    return Generated(corpus, queries, qrels)


def write_generated(out_dir: str | Path, data: Generated) -> None:
    """Write corpus.jsonl, queries.jsonl, qrels/all.tsv; the folder appears whole or not at all."""
    with atomic_path(out_dir, is_dir=True) as tmp:
        write_corpus(tmp / "corpus.jsonl", data.corpus)
        write_queries(tmp / "queries.jsonl", data.queries)
        write_qrels(tmp / "qrels" / "all.tsv", data.qrels)
