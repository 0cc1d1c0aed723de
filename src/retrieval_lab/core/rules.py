"""What a params value must be beyond its type: the rules the schema (:mod:`.params`) declares beside each field.

A rule takes a value of its field's type (never None: an optional setting turned off is
not checked) and returns None, or why the value is wrong. Rules are pure: they need only
the standard library (and PyStemmer's list of languages), so that every stage can check
the whole params file before it starts. The modules that use a value may check more (a
file's content, a measure's family): those checks need what core does not import.
"""

from __future__ import annotations

import re
from pathlib import Path

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")  # a dataset, run or variant name: also a path part
_MEASURE = re.compile(r"[A-Za-z]+(\([A-Za-z0-9=,_ ]*\))?(@\d+)?")
_FAISS_FACTORY = re.compile(r"[A-Za-z0-9_.]+(,[A-Za-z0-9_.]+)*")
_FAISS_SEARCH_ITEM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=(\d+(\.\d*)?|\.\d+)")  # name=number, as FAISS parses it
FIELDS = ("title", "text")
# tokenizer.stopwords names (the tokenizer maps each to the list bm25s ships)
STOPWORD_LANGUAGES = ("english", "english_plus", "german", "dutch", "french", "spanish", "portuguese",
                      "italian", "russian", "swedish", "norwegian", "danish", "turkish", "chinese", "korean")


def between(low, high, low_open=False, high_open=False):
    """``low <= value <= high`` (``<`` on an open end; ``high=None``: no upper bound)."""
    def check(value):
        below = value <= low if low_open else value < low
        above = high is not None and (value >= high if high_open else value > high)
        if below or above:
            left, right = "(" if low_open else "[", ")" if high_open or high is None else "]"
            return f"must lie in {left}{low}, {'inf' if high is None else high}{right}, got {value}"
        return None
    return check


def one_of(choices):
    return lambda value: None if value in choices else f"unknown value {value!r} (choices: {', '.join(choices)})"


def matches(regex, what):
    return lambda value: None if regex.fullmatch(value) else f"{value!r} is not {what}"


def each(check):
    """The rule ``check`` applied to every item of a list; the reason names the first bad item."""
    def check_each(values):
        return next((f"item {i}: {why}" for i, v in enumerate(values) if (why := check(v))), None)
    return check_each


def some(check, what: str):
    """At least one item, each obeying ``check`` (an empty list would declare nothing: a gate that judges nothing)."""
    def check_some(values):
        return f"name at least {what}" if not values else each(check)(values)
    return check_some


POSITIVE, NON_NEGATIVE, UNIT = between(1, None), between(0, None), between(0.0, 1.0)


def non_empty(value):
    """at least one value."""
    return None if value else "expected at least one value"


ABOVE_ZERO = between(0.0, None, low_open=True)
SEED = between(0, 2**32 - 1)  # numpy, scikit-learn and FAISS take 32-bit unsigned seeds
RUN_NAME = matches(NAME, "a run name")
MEASURE_NAME = matches(_MEASURE, "a measure name (e.g. nDCG@10)")
FAISS_FACTORY = matches(_FAISS_FACTORY, "a FAISS factory string (e.g. Flat, HNSW32, IVF256,Flat)")


def faiss_search(value):
    """name=value[,name=value], FAISS search settings each above 0 (e.g. efSearch=256, nprobe=64).

    The shape faiss.ParameterSpace parses; which names exist is the index's to say (checked when it is built).
    A value of 0 is refused: FAISS accepts nprobe=0 (each search then fails) and efSearch=0 (results missing).
    """
    items = value.split(",")
    if not all(_FAISS_SEARCH_ITEM.fullmatch(item) and float(item.split("=")[1]) > 0 for item in items):
        return (f"{value!r} is not name=value[,name=value] with values above 0 (e.g. efSearch=256, nprobe=64; "
                "null: FAISS's defaults)")
    return None


# a Dask scheduler's address: PROTOCOL://HOST:PORT (tcp, tls, ws, wss, ucx) or HOST:PORT
_SCHEDULER = re.compile(r"((tcp|tls|ws|wss|ucx)://)?[A-Za-z0-9_.\-\[\]:]+:\d+")
SCHEDULER = matches(_SCHEDULER, "a Dask scheduler address (tcp://HOST:PORT)")


def device(value):
    """auto, cpu, cuda or cuda:N."""
    if value in ("auto", "cpu", "cuda") or re.fullmatch(r"cuda:\d+", value):
        return None
    return f"unknown device {value!r} (auto, cpu, cuda, cuda:N)"


def lock(value):
    """builtin, a lock file, a model folder or hub:NAME@REVISION."""
    return None if value.strip() else "expected builtin, a lock file, a model folder or hub:NAME@REVISION"


def http_url(value):
    """an http:// or https:// URL with a host, in printable ASCII, without credentials.

    The reason never repeats the value: a URL may carry a password (``http://user:pw@host``)."""
    from urllib.parse import urlsplit

    if any(not 0x21 <= ord(c) <= 0x7E for c in value):  # http.client sends neither spaces nor non-ASCII
        return "a URL is printable ASCII without spaces: percent-encode other characters"
    try:
        parts = urlsplit(value)
        port = parts.port  # a port that is not a number, or past 65535, raises here
        credentials = parts.username is not None or parts.password is not None
    except ValueError as exc:  # an unclosed [ of an IPv6 host; a bad port
        reason = "a port in 1..65535" if "port" in str(exc).lower() else "its host (an IPv6 address in [ ])"
        return f"not a URL: check {reason}"
    if credentials or "@" in parts.netloc:
        return "a URL may not carry credentials: name an environment variable in token_env"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "not an http:// or https:// URL with a host"
    if port == 0:
        return "not a URL: check a port in 1..65535"
    return None


def fields(value):
    """distinct names among title, text, at least one."""
    if not value:
        return "expected at least one of title, text"
    if len(set(value)) != len(value) or not set(value) <= set(FIELDS):
        return f"expected distinct names among {', '.join(FIELDS)}, got {value!r}"
    return None


def pairs(value):
    """[baseline, candidate] pairs of run names."""
    for i, pair in enumerate(value):
        if len(pair) != 2:
            return f"item {i}: expected [baseline, candidate], got {pair!r}"
        if (why := each(RUN_NAME)(pair)) is not None:
            return f"item {i}: {why}"
    return None


def token_pattern(value):
    """``tokenizer.pattern``: a valid regex, no capturing group, never matching ""."""
    try:
        regex = re.compile(value)
    except re.error as exc:
        return f"invalid regex {value!r}: {exc}"
    if regex.groups:  # findall would return the groups, not the tokens
        return "pattern must not contain capturing groups (use (?:...))"
    if regex.fullmatch(""):
        return "pattern matches the empty string"
    return None


def names_a_file(spec: str) -> bool:
    """A ``tokenizer.stopwords`` value naming a file rather than a language."""
    if spec in STOPWORD_LANGUAGES:
        return False
    path = Path(spec)
    if path.suffix or "/" in spec:
        return True
    try:
        return path.exists()
    except (OSError, ValueError):  # a name too long, or holding a NUL, names no file
        return False


def stopwords(value):
    """a stopword language (english, english_plus, german, ...) or a file, one word a line."""
    if value in STOPWORD_LANGUAGES or names_a_file(value):
        return None  # a file is read (and checked) by the tokenizer
    return (f"{value!r} is neither a stopword language ({', '.join(sorted(STOPWORD_LANGUAGES))}) nor a file; "
            "none: no stopwords")


def stemmer(value):
    """a Snowball language (PyStemmer's list)."""
    import Stemmer

    if value not in Stemmer.algorithms():
        return f"unknown stemmer {value!r} (choices: {', '.join(Stemmer.algorithms())}; none: no stemming)"
    return None
