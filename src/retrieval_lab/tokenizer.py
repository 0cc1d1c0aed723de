"""The one lexical tokenizer, shared by BM25, LSA and failure diagnosis (params ``tokenizer:``).

Steps, in order: Unicode NFC normalisation (so a decomposed "e" + combining accent
is one letter, as in the composed form), regex token extraction (``pattern``),
optional lowercasing, stopword removal, optional Snowball stemming (PyStemmer).

``stopwords`` is a language name, a path to a one-word-a-line file, or null (``none``);
``stemmer`` a Snowball language or null (``none``).
Language names use the lists bm25s ships (``bm25s.stopwords``); "english" is
Lucene's 33-word English stop set, the one Anserini's BM25 baselines use.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import string
import unicodedata
from pathlib import Path

from .core import rules
from .core.errors import InputError
from .core.params import TokenizerParams

_MEMO_LIMIT = 2_000_000  # distinct tokens remembered before the memo starts afresh
BM25S_LISTS = {  # tokenizer.stopwords language (core.rules.STOPWORD_LANGUAGES) -> the list bm25s ships
    "english": "STOPWORDS_EN", "english_plus": "STOPWORDS_EN_PLUS", "german": "STOPWORDS_GERMAN",
    "dutch": "STOPWORDS_DUTCH", "french": "STOPWORDS_FRENCH", "spanish": "STOPWORDS_SPANISH",
    "portuguese": "STOPWORDS_PORTUGUESE", "italian": "STOPWORDS_ITALIAN",
    "russian": "STOPWORDS_RUSSIAN", "swedish": "STOPWORDS_SWEDISH",
    "norwegian": "STOPWORDS_NORWEGIAN", "danish": "STOPWORDS_DANISH",
    "turkish": "STOPWORDS_TURKISH", "chinese": "STOPWORDS_CHINESE", "korean": "STOPWORDS_KOREAN",
}


@functools.cache
def _stopwords_source() -> str:
    """``bm25s/stopwords.py``, read as text: importing bm25s would load SciPy (0.15 s, 28 MiB)."""
    spec = importlib.util.find_spec("bm25s")  # locates the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise InputError("bm25s is not installed: it ships the built-in stopword lists", field="tokenizer.stopwords")
    return (Path(next(iter(spec.submodule_search_locations))) / "stopwords.py").read_text(encoding="utf-8")


@functools.cache
def _builtin_list(language: str) -> frozenset[str] | None:
    """One language's list of ``bm25s/stopwords.py`` (None where it has none), its assignment alone read as a
    literal: parsing the whole file, every language's list, took 10 ms of each process's first BM25 build."""
    attr = BM25S_LISTS.get(language)
    source = _stopwords_source() if attr else ""
    start = re.search(rf"^{attr}\s*=", source, re.MULTILINE) if attr else None
    if start is None:
        return None
    end = re.compile(r"^[A-Za-z_]\w*\s*=", re.MULTILINE).search(source, start.end())
    (statement,) = ast.parse(source[start.start():end.start() if end else len(source)]).body
    return frozenset(ast.literal_eval(statement.value))


def _builtin_stopwords() -> dict[str, frozenset[str]]:
    """Every language's list that bm25s ships."""
    return {lang: words for lang in BM25S_LISTS if (words := _builtin_list(lang)) is not None}


# Patterns whose matches are exactly the maximal runs of \w characters; on ASCII text those are the runs of
# [A-Za-z0-9_], which translate + split finds 2-3x faster than the regex engine (same tokens, same order).
_WORD_RUNS = {r"(?u)\b\w+\b", r"\b\w+\b", r"\w+", r"(?u)\w+"}
_ASCII_NON_WORD = str.maketrans({c: " " for c in map(chr, range(128))
                                 if c not in string.ascii_letters + string.digits + "_"})
# the same, lowercasing too: one pass over an ASCII text instead of two
_ASCII_LOWER_NON_WORD = str.maketrans({**{c: " " for c in map(chr, range(128))
                                          if c not in string.ascii_letters + string.digits + "_"},
                                       **dict(zip(string.ascii_uppercase, string.ascii_lowercase))})
# the same on UTF-8 bytes: a byte >= 0x80 belongs to a non-ASCII character and is left alone, so the bytes
# decode as before (str.translate of a non-ASCII string looks every character up: 5-10x slower)
_ASCII_NON_WORD_BYTES = bytes(ord(" ") if b < 128 and _ASCII_NON_WORD.get(b) else b for b in range(256))


def _read_stopword_file(path: Path) -> frozenset[str]:
    if not path.is_file():
        raise InputError("stopword file not found", str(path), field="tokenizer.stopwords")
    words = set()
    for number, line in enumerate(path.read_bytes().split(b"\n"), start=1):
        try:
            word = line.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            raise InputError(f"invalid UTF-8 at byte {exc.start}", str(path), number,
                             "tokenizer.stopwords") from None
        if word and not word.startswith("#"):
            if len(word.split()) != 1:
                raise InputError(f"expected one word per line, got {word!r}", str(path), number,
                                 "tokenizer.stopwords")
            words.add(unicodedata.normalize("NFC", word))
    return frozenset(words)


def load_stopwords(spec: str | None, source: str = "params.yaml") -> frozenset[str]:
    """Resolve ``tokenizer.stopwords``: a built-in language, a word-per-line file, or null (none)."""
    if spec is None:
        return frozenset()
    builtin = _builtin_list(spec) if spec in BM25S_LISTS else None
    if builtin is not None:
        return builtin
    if rules.names_a_file(spec):
        return _read_stopword_file(Path(spec))
    raise InputError(rules.stopwords(spec), source, field="tokenizer.stopwords")


class Tokenizer:
    """``tokenize(text) -> list[str]`` following the ``tokenizer:`` params (see module docstring)."""

    def __init__(self, params: TokenizerParams, source: str = "params.yaml"):
        self.params = params  # its pattern and stemmer were checked when it was built (core.params)
        self._regex = re.compile(params.pattern)
        self._word_runs = params.pattern in _WORD_RUNS
        stop = load_stopwords(params.stopwords, source)  # a file is read (and checked) here
        # Stopwords match case-insensitively when tokens are lowercased.
        self._stopwords = frozenset(w.lower() for w in stop) if params.lowercase else stop
        self._stemmer = None
        if params.stemmer is not None:
            import Stemmer

            # no cache of its own (maxCacheSize 0): every caller memoises stems per distinct token already, and
            # PyStemmer's cache, full after 10,000 words, made stemming distinct words 3x slower
            self._stemmer = Stemmer.Stemmer(params.stemmer, 0)
        # raw token -> final token ("" for a stopword): each distinct token is filtered and
        # stemmed once, which makes tokenizing a corpus about twice as fast
        self._final: dict[str, str] = {}

    def finalise(self, token: str) -> str:
        """The last two steps on one raw token: "" for a stopword, else its stem (or itself)."""
        if token in self._stopwords:
            return ""
        return self._stemmer.stemWord(token) if self._stemmer is not None else token

    _finalise = finalise

    def finalise_many(self, tokens: list[str]) -> list[str]:
        """``finalise`` of each token, the stems in one call to the stemmer."""
        stop = self._stopwords
        kept = [t for t in tokens if t not in stop]
        stems = iter(self._stemmer.stemWords(kept) if self._stemmer is not None else kept)
        return ["" if t in stop else next(stems) for t in tokens]

    def split(self, text: str) -> list[str]:
        """The first three steps: normalised, lowercased (if set) raw tokens; ``finalise`` does the rest."""
        text = unicodedata.normalize("NFC", text)
        if self.params.lowercase:
            text = text.lower()
        if self._word_runs and text.isascii():
            return text.translate(_ASCII_NON_WORD).split()
        return self._regex.findall(text)

    def pieces(self, text: str) -> list[str]:
        """``split`` in two stages, for a caller that meets each distinct piece once (the BM25 build): the
        normalised, lowercased (if set) text cut at whitespace and ASCII non-word characters, without the
        regex engine. The raw tokens are :meth:`piece_tokens` of each piece in order; an ASCII piece is one.

        With a pattern other than a run of word characters the pieces are the raw tokens themselves.
        """
        if not self._word_runs:
            return self.split(text)
        if text.isascii():
            return text.translate(_ASCII_LOWER_NON_WORD if self.params.lowercase else _ASCII_NON_WORD).split()
        text = unicodedata.normalize("NFC", text)
        if self.params.lowercase:
            text = text.lower()
        # \w runs never cross a separator (whitespace, ASCII punctuation): a piece holds whole tokens
        return text.encode("utf-8").translate(_ASCII_NON_WORD_BYTES).decode("utf-8").split()

    def piece_tokens(self, piece: str) -> list[str]:
        """The raw tokens of one piece of :meth:`pieces`: itself if ASCII, else its runs of word characters (a
        non-ASCII piece may hold punctuation such as "10–20" or "patient’s", or none at all: "±")."""
        if not self._word_runs or piece.isascii():
            return [piece]
        return self._regex.findall(piece)

    def tokenize(self, text: str) -> list[str]:
        tokens = self.split(text)
        if not self._stopwords and self._stemmer is None:
            return tokens
        final = self._final
        new = set(tokens).difference(final)
        if new:
            if len(final) > _MEMO_LIMIT:
                final.clear()
            final.update((t, self._finalise(t)) for t in new)
        return [f for t in tokens if (f := final[t])]

    __call__ = tokenize
