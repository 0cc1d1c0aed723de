"""The docs run as tests: every fenced ``bash``/``sh``/``python`` block of README.md and docs/ is executed here,
as a user would type it, in a temporary folder of their own (never inside this repository), and its documented
outcome is checked: the exit code, the files it names, a line it shows.

How a block is declared (docs/reproducibility.md, "Every documented command runs"):

- A block that runs here has an entry in :data:`EXPECT`, keyed by the first 10 hex digits of the sha256 of its
  text: what it needs in the folder (:data:`FIXTURES`), the exit code, the files it leaves, lines it shows. A
  block whose text changes gets another key, so its old expectation no longer applies: the block fails as
  undeclared and the stale entry fails too, until someone looks at both.
- A block that cannot run here (a cluster, a GPU, a remote, the whole pipeline) carries, on the line right
  before its opening fence, ``<!-- doc-test: skip: WHY; covered by tests/PATH.py[::test_name] -->`` (several
  tests: ``, ``-separated); the named file (and test) must exist.
- A block with neither fails :func:`test_every_block_runs_here_or_names_the_test_that_covers_it`, which
  prints the key to declare.

Placeholders (``DIR``, ``BASE.trec``, ...) are bound from :data:`PLACEHOLDERS` (bash blocks only); an option
in brackets (``[--json]``) is run both with and without it, every combination; an inline
``retrieval-lab ... [--option ...]`` template in the prose is a block too (its options are combinations a page
shows). ``retrieval-lab``, ``dvc`` and ``python`` are the project's virtual environment's.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from beir_fixtures import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
LANGS = ("bash", "sh", "shell", "python")
VENV_BIN = Path(sys.executable).parent  # the suite runs with the project's venv: retrieval-lab and dvc beside it
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
INLINE_TEMPLATE = re.compile(r"`(retrieval-lab [^`]*\[--[^`]*)`")
MARKER = re.compile(r"<!-- doc-test: skip: (?P<why>[^;>]+); covered by "
                    r"(?P<tests>tests/[\w./-]+\.py(?:::\w+)?(?:, tests/[\w./-]+\.py(?:::\w+)?)*) -->")
OPTIONAL = re.compile(r" \[(--[^\[\]]+)\]")


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    line: int  # of the opening fence (or of the inline template)
    lang: str
    text: str
    marker: str | None  # the line right before the fence, when it is a doc-test marker

    @property
    def key(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:10]

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks_of(text: str, page: str) -> list[Block]:
    """The runnable blocks of one page: fenced ones in LANGS, and inline ``retrieval-lab`` templates."""
    lines = text.split("\n")
    found = []
    for match in FENCE.finditer(text):
        if match.group(1) not in LANGS:
            continue
        line = text.count("\n", 0, match.start())  # 0-based index of the fence line
        before = lines[line - 1].strip() if line else ""
        found.append(Block(page, line + 1, match.group(1), match.group(2),
                           before if before.startswith("<!-- doc-test") else None))
    prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)  # keep line numbers
    for match in INLINE_TEMPLATE.finditer(prose):
        found.append(Block(page, prose.count("\n", 0, match.start()) + 1, "bash",
                           " ".join(match.group(1).split()) + "\n", None))
    return found


def stray_markers(text: str, page: str) -> list[str]:
    """doc-test markers that are malformed or not right before a fence (they would skip nothing)."""
    lines = text.split("\n")
    bad = []
    for i, line in enumerate(lines):
        if not line.strip().startswith("<!-- doc-test"):
            continue  # (a marker quoted in prose, `<!-- doc-test: ... -->`, is no marker)
        if not MARKER.fullmatch(line.strip()):
            bad.append(f"{page}:{i + 1}: not of the form <!-- doc-test: skip: WHY; covered by tests/PATH.py -->")
        elif i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            bad.append(f"{page}:{i + 1}: a marker must be the line right before a block's opening fence")
    return bad


def all_blocks() -> list[Block]:
    return [b for page in PAGES for b in blocks_of(page.read_text(encoding="utf-8"), str(page.relative_to(REPO)))]


def variants(text: str) -> list[str]:
    """Every combination of the bracketed options (``[--json]``: with and without), brackets removed."""
    pieces = OPTIONAL.split(text)  # text, option, text, option, ..., text
    return ["".join(p if i % 2 == 0 else f" {p}" * chosen[i // 2] for i, p in enumerate(pieces))
            for chosen in itertools.product((True, False), repeat=len(pieces) // 2)]


# ----------------------------------------------------------------------------- placeholders and fixtures

# A placeholder in a bash block -> what stands for it in the user's folder ({tmp}: a scratch folder outside it).
PLACEHOLDERS = {
    "DIR": "my-collection",  # "a BEIR folder"
    "D": "my-collection",
    "Q": "my-collection/qrels/test.tsv",
    "../shared/data/scifact": "my-collection",  # SciFact itself is not here: any BEIR folder reads the same
    "/path/words.txt": "words.txt",
    "/tmp/": "{tmp}/",  # a page's scratch output: the test's own scratch folder, not the machine's /tmp
}


def bind(text: str, tmp: Path) -> str:
    for name in sorted(PLACEHOLDERS, key=len, reverse=True):
        value = PLACEHOLDERS[name].format(tmp=tmp)
        end = "" if name.endswith("/") else r"(?![\w.-])"
        text = re.sub(r"(?<![\w./@-])" + re.escape(name) + end, lambda _, value=value: value, text)
    return text


def _retrieve(folder: Path, retriever: str, output: str) -> None:
    from command_runner import run_command

    assert run_command("retrieve", ["--retriever", retriever, "--dataset", str(folder / "my-collection"),
                                    "--split", "test", "--output", str(folder / output)]) == 0


def _support(folder: Path) -> None:
    """The embedded generator's corpus, small (4 incident families, 16 generic documents: 32 documents, 20
    queries), qrels/all.tsv."""
    from command_runner import run_command

    assert run_command("generate", ["--output", str(folder / "support"), "--set", "generate.families=4",
                                    "--set", "generate.generic_docs=16"]) == 0


def _my_collection(folder: Path) -> None:
    """A user's BEIR folder: the small support corpus with its judgments as qrels/test.tsv."""
    shutil.copytree(folder / "support", folder / "my-collection")
    (folder / "my-collection" / "qrels" / "all.tsv").rename(folder / "my-collection" / "qrels" / "test.tsv")


def _runs(folder: Path) -> None:
    """Two real runs of my-collection (BM25, LSA) under every name the pages give a pair of runs."""
    _retrieve(folder, "bm25", "bm25.trec")
    _retrieve(folder, "lsa", "lsa.trec")
    for first, second in (("a", "b"), ("old", "new"), ("run1", "run2"), ("base", "head"), ("BASE", "HEAD")):
        shutil.copy(folder / "bm25.trec", folder / f"{first}.trec")
        shutil.copy(folder / "lsa.trec", folder / f"{second}.trec")
    shutil.copy(folder / "lsa.trec", folder / "dense.trec")  # a second run named as the pages name it


def _qrels_files(folder: Path) -> None:
    """qrels.tsv (BEIR), qrels.txt (TREC 4 columns), and qrels/test.tsv: the first half of the judgments, the
    ones a judging pool adds to."""
    rows = (folder / "my-collection" / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    shutil.copy(folder / "my-collection" / "qrels" / "test.tsv", folder / "qrels.tsv")
    (folder / "qrels.txt").write_text("".join(f"{q} 0 {d} {s}\n" for q, d, s in (r.split("\t") for r in rows[1:])),
                                      encoding="utf-8")
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("\n".join(rows[:len(rows) // 2]) + "\n", encoding="utf-8")


def _pipeline_layout(folder: Path) -> None:
    """The paths the pipeline writes (runs/support/, data/prepared/support, data/heldout/support/qrels/)."""
    (folder / "runs" / "support").mkdir(parents=True)
    shutil.copy(folder / "bm25.trec", folder / "runs" / "support" / "bm25.trec")
    shutil.copy(folder / "lsa.trec", folder / "runs" / "support" / "dense.trec")
    (folder / "data" / "prepared" / "support").mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl"):
        shutil.copy(folder / "my-collection" / name, folder / "data" / "prepared" / "support" / name)
    (folder / "data" / "heldout" / "support" / "qrels").mkdir(parents=True)
    shutil.copy(folder / "qrels.tsv", folder / "data" / "heldout" / "support" / "qrels" / "test.tsv")
    shutil.copytree(folder / "my-collection", folder / "data" / "prepared" / "mine")


SEARCH = '''"""The user's retriever: documents ranked by the query words they share (a stand-in for theirs)."""
import json
from pathlib import Path

DOCS = {}
for line in (Path(__file__).parent / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
    doc = json.loads(line)
    DOCS[doc["_id"]] = set(f"{doc['title']} {doc['text']}".lower().split())


def search(texts, k):
    out = []
    for text in texts:
        words = set(text.lower().split())
        scored = sorted(((len(words & w), d) for d, w in DOCS.items() if words & w), reverse=True)[:k]
        out.append([(d, float(s)) for s, d in scored])
    return out
'''


def _own_retriever(folder: Path) -> None:
    """README's external: entry (params.yaml) and the user's module it names (retriever/recipe_search.py)."""
    (folder / "retriever").mkdir()
    (folder / "retriever" / "recipe_search.py").write_text(SEARCH, encoding="utf-8")
    shutil.copy(folder / "my-collection" / "corpus.jsonl", folder / "retriever" / "corpus.jsonl")
    (folder / "params.yaml").write_text(
        'external:\n  recipes:\n    path: retriever\n    callable: "recipe_search:search"\n    k: 3\n',
        encoding="utf-8")


def _models(folder: Path) -> None:
    """The base model's lock file (the repository's own) and, standing in for a fine-tuned model, a randomly
    initialised one-layer BERT in the Hugging Face folder form (tests/pipeline/test_lists.py's)."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    (folder / "models").mkdir()
    shutil.copy(REPO / "models" / "base.lock.json", folder / "models" / "base.lock.json")
    model = folder / "models" / "finetuned" / "support" / "hard"
    model.mkdir(parents=True)
    words = sorted({w for line in (folder / "my-collection" / "queries.jsonl").read_text().splitlines()
                    for w in json.loads(line)["text"].lower().split() if w.isalpha()})
    (model / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    BertTokenizerFast(vocab_file=str(model / "vocab.txt")).save_pretrained(model)
    config = BertConfig(vocab_size=5 + len(words), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=512)
    BertModel(config).save_pretrained(model)


def _words(folder: Path) -> None:
    (folder / "words.txt").write_text("the\na\nof\nto\nis\n", encoding="utf-8")


# path in the user's folder -> (maker, what it needs first); a block names the paths it needs
FIXTURES: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "support": (_support, ()),
    "my-collection": (_my_collection, ("support",)),
    **{name: (_runs, ("my-collection",)) for name in (
        "bm25.trec", "lsa.trec", "dense.trec", "a.trec", "b.trec", "old.trec", "new.trec", "run1.trec", "run2.trec",
        "base.trec", "head.trec", "BASE.trec", "HEAD.trec")},
    **{name: (_qrels_files, ("my-collection",)) for name in ("qrels.tsv", "qrels.txt", "qrels")},
    **{name: (_pipeline_layout, ("bm25.trec", "qrels.tsv")) for name in ("runs", "data")},
    **{name: (_own_retriever, ("my-collection",)) for name in ("params.yaml", "retriever")},
    "words.txt": (_words, ()),
    "models": (_models, ("my-collection",)),
}


class Stock:
    """One folder per session holding every fixture made so far; a block's folder gets copies of what it needs."""

    def __init__(self, root: Path):
        self.root = root

    def make(self, name: str) -> Path:
        maker, first = FIXTURES[name]
        for need in first:
            self.make(need)
        if not (self.root / name).exists():
            maker(self.root)
        return self.root / name

    def repo(self, kind: str) -> Path:
        """An empty git repository with one commit ("dvc": and ``dvc init``), made once."""
        template = self.root / f".repo-{kind}"
        if not template.exists():
            template.mkdir()
            env = _env(self.root / ".home", self.root)
            commands = [["git", "init", "-q", "-b", "main"]] + ([["dvc", "init", "-q"]] if kind == "dvc" else [])
            for argv in commands + [["git", "add", "-A"], ["git", "commit", "-q", "--allow-empty", "-m", "start"]]:
                subprocess.run(argv, cwd=template, env=env, check=True, capture_output=True, timeout=120)
        return template

    def copy(self, names: tuple[str, ...], folder: Path) -> None:
        for name in names:
            source = self.make(name)
            if source.is_dir():
                shutil.copytree(source, folder / name, symlinks=True)
            else:
                shutil.copy2(source, folder / name)


# ----------------------------------------------------------------------------- the outcomes, declared


def _fill_pool(folder: Path) -> None:
    """The annotator: every pooled row labelled 1 when my-collection's full judgments call it relevant, else 0."""
    relevant = {tuple(r.split("\t")[:2]) for r in
                (folder / "my-collection" / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]
                if int(r.split("\t")[2]) > 0}
    lines = (folder / "pool.tsv").read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    q, d, s = header.index("query_id"), header.index("doc_id"), header.index("score")
    filled = [lines[0]]
    for line in lines[1:]:
        cells = line.split("\t")
        cells[s] = "1" if (cells[q], cells[d]) in relevant else "0"
        filled.append("\t".join(cells))
    (folder / "pool.tsv").write_text("\n".join(filled) + "\n", encoding="utf-8")


def _pool_merged(folder: Path, out: str, sh) -> None:
    def pairs(path):
        return {tuple(r.split("\t")[:2]) for r in path.read_text(encoding="utf-8").splitlines()[1:]}

    before, after = pairs(folder / "qrels" / "test.tsv"), pairs(folder / "qrels" / "test.v2.tsv")
    pooled = {tuple(r.split("\t")[i] for i in (0, 2)) for r in (folder / "pool.tsv").read_text().splitlines()[1:]}
    assert before < after and after == before | pooled and not before & pooled


def _api_json_is_score_runs(folder: Path, out: str, sh) -> None:
    """README's API snippet prints what score-runs --json prints for the retrieve command's BM25 run."""
    sh("retrieval-lab retrieve --retriever bm25 --dataset my-collection --split test --output bm25.trec")
    cli = json.loads(sh("retrieval-lab score-runs my-collection/qrels/test.tsv bm25.trec -m nDCG@10 -m R@100 --json"))
    assert out == json.dumps(cli["bm25.trec"], indent=2) + "\n"


def _score_runs_json(folder: Path, out: str, sh) -> None:
    scores = json.loads(out)
    assert list(scores) == ["bm25.trec", "dense.trec"]
    for values in scores.values():
        assert all(0 <= values[m] <= 1 for m in ("nDCG@10", "R@100", "Judged@100"))


def _json_or_table(folder: Path, out: str, sh) -> None:
    if out.lstrip().startswith("{"):
        rows = json.loads(out)["measures"]
        assert set(rows) == {"nDCG@10", "R@100"}
    else:
        assert re.search(r"^nDCG@10 .*(significant|better|worse)", out, re.MULTILINE), out


def _pages_in_tmp(folder: Path, out: str, sh) -> None:
    tmp = folder.parent / "tmp"
    judged, unjudged = (tmp / "bm25-dense.html").read_text(), (tmp / "unjudged.html").read_text()
    assert "nDCG@10" in judged and "RBO" in unjudged


def _remote_set(folder: Path, out: str, sh) -> None:
    config = (folder / ".dvc" / "config").read_text()
    assert "remote = team" in config, config
    assert re.search(r"url = ((s3|gs)://my-bucket|ssh://user@host/srv)/retrieval-lab", config), config


@dataclass(frozen=True)
class Expect:
    """What a block needs and does. ``check(folder, stdout, sh)`` may run more commands (``sh``) to compare."""

    needs: tuple[str, ...] = ()  # FIXTURES copied into the user's folder first
    rc: int = 0
    files: tuple[str, ...] = ()  # left in the user's folder (or {tmp}/...)
    shows: tuple[str, ...] = ()  # each in its output (stdout and stderr)
    check: Callable | None = None
    acts: dict[str, Callable[[Path], None]] = field(default_factory=dict)  # at this line, a person acts
    repo: str | None = None  # "git": the folder is a git repository with the fixtures committed; "dvc": and dvc init
    alternatives: bool = False  # each command line is an alternative: run alone, in a folder of its own
    slow: bool = False


SIX_COMMANDS = Expect(needs=("my-collection",), slow=True,
                      files=("bm25.trec", "emb", "dense.trec", "bm25.json", "dense.json", "bm25/diagnosis.md",
                             "dense/diagnosis.md", "bm25/per_query.json"),
                      shows=("encode: ", "retrieve dense: ", "95% simultaneous intervals across the 2 measures",
                             "evaluate dense.trec on test: 20 queries"))

# key (sha256 of the block's text, 10 hex digits) -> its outcome. The comment says where the block is.
EXPECT: dict[str, Expect] = {
    # README "Your collection in six commands" and docs/collection.md: BM25, dense, compare, evaluate
    "d703eab954": SIX_COMMANDS,
    # README "See why ... use it from Python"
    "ca16cd1af4": Expect(needs=("my-collection",), check=_api_json_is_score_runs),
    # README: the page with and without judgments and texts (every combination of its options)
    "5e7612f4cb": Expect(needs=("BASE.trec", "HEAD.trec", "my-collection"), files=("page.html",),
                         shows=("page.html",)),
    # docs/api.md: the small BEIR folder, then score-runs --json on the example's two runs
    "779cb887a8": Expect(files=("support/corpus.jsonl", "support/queries.jsonl", "support/qrels/all.tsv"),
                         shows=("240 documents, 200 queries",)),
    "bb80840acb": Expect(needs=("support", "bm25.trec", "dense.trec"), check=_score_runs_json),
    # docs/comparison-page.md: the page from the pipeline's files, and two runs without judgments
    "5e77fae58f": Expect(needs=("runs", "data", "old.trec", "new.trec"), check=_pages_in_tmp),
    # docs/metrics.md: pool, the annotators' labels, merge; then the embeddings compared
    "0bae1b08b0": Expect(needs=("my-collection", "a.trec", "b.trec", "qrels", "models"),
                         files=("pool.tsv", "qrels/test.v2.tsv"), shows=("models/finetuned/support/hard",), slow=True,
                         acts={"# annotators fill the score column, then:": _fill_pool}, check=_pool_merged),
    # docs/own-retriever.md: the user's function from the command line; the callable contract
    "7206e4b297": Expect(needs=("params.yaml", "retriever", "data"),
                         files=("runs/mine/recipes.trec", "latency/mine/recipes.json")),
    # docs/scale.md: sharded BM25 on a LocalCluster (no --scheduler), searched where the shards are
    "b747bfb736": Expect(needs=("my-collection",), slow=True, files=("bm25-shards/shards.json", "bm25.trec"),
                         shows=("retrieve bm25",)),
    # docs/own-retriever.md: latency when asked, and against a copy kept from another branch
    "f155e41e18": Expect(needs=("my-collection",), files=("bm25.trec", "latency/bm25.json", "latency-main/bm25.json"),
                         shows=("p50", "candidate - baseline")),
    "e0820f48c6": Expect(),
    # docs/pipeline.md: --set on retrieve and fuse, score-runs with a graded cutoff, --help
    "cf57863f54": Expect(needs=("my-collection", "words.txt", "a.trec", "b.trec", "qrels.tsv", "run1.trec",
                                "run2.trec"), files=("{tmp}/bm25.trec", "fused.trec"),
                         shows=('"R(rel=2)@5"', "usage: retrieval-lab")),
    # docs/review-gate.md: compare-runs on TREC qrels, table and JSON; a team's remote, each kind
    "28be02f6fb": Expect(needs=("qrels.txt", "base.trec", "head.trec"), check=_json_or_table),
    "bbb8298626": Expect(repo="dvc", alternatives=True, shows=("Setting 'team' as a default remote.",),
                         check=_remote_set),
}


# ----------------------------------------------------------------------------- running a block


def _env(home: Path, tmp: Path) -> dict[str, str]:
    env = {"PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(tmp),
           "LANG": "C.UTF-8", "DVC_NO_ANALYTICS": "1", "OMP_WAIT_POLICY": "PASSIVE",
           "GIT_AUTHOR_NAME": "User", "GIT_AUTHOR_EMAIL": "user@example.org",
           "GIT_COMMITTER_NAME": "User", "GIT_COMMITTER_EMAIL": "user@example.org"}
    for name in ("DVC_SITE_CACHE_DIR", "OMP_NUM_THREADS", "CI"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


@dataclass
class Done:
    rc: int
    out: str
    err: str


class UserFolder:
    """A user's own folder (and scratch folder beside it) where one variant of a block runs."""

    def __init__(self, root: Path, stock: Stock, expect: Expect):
        self.folder, self.tmp, home = root / "user", root / "tmp", root / "home"
        if expect.repo:
            shutil.copytree(stock.repo(expect.repo), self.folder, symlinks=True)
        for path in (self.folder, self.tmp, home):
            path.mkdir(parents=True, exist_ok=True)
        self.env = _env(home, self.tmp)
        stock.copy(expect.needs, self.folder)
        if expect.repo and expect.needs:
            for argv in (["git", "add", "-A"], ["git", "commit", "-q", "-m", "the user's files"]):
                assert self._run(argv).rc == 0

    def _run(self, argv: list[str], timeout: int = 600) -> Done:
        done = subprocess.run(argv, cwd=self.folder, env=self.env, capture_output=True, text=True, check=False,
                              timeout=timeout)
        return Done(done.returncode, done.stdout, done.stderr)

    def bash(self, script: str) -> Done:
        return self._run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", script])

    def python(self, source: str) -> Done:
        path = self.tmp / "block.py"
        path.write_text(source, encoding="utf-8")
        return self._run([sys.executable, str(path)])

    def sh(self, command: str) -> str:
        done = self.bash(command)
        assert done.rc == 0, f"{command}\n{done.out}{done.err}"
        return done.out


def _parts(script: str, acts: dict) -> list[tuple[str, Callable | None]]:
    """The script cut at each line where a person acts: [(part, act after it)]."""
    parts, current = [], []
    for line in script.splitlines(keepends=True):
        current.append(line)
        if line.strip() in acts:
            parts.append(("".join(current), acts[line.strip()]))
            current = []
    return parts + [("".join(current), None)]


def run_block(block: Block, expect: Expect, stock: Stock, root: Path) -> list[str]:
    """Run every variant of ``block``; the problems found (empty: as documented)."""
    problems = []
    texts = variants(block.text)
    if expect.alternatives:
        texts = [line + "\n" for text in texts for line in text.splitlines()
                 if line.strip() and not line.lstrip().startswith("#")]
    for number, text in enumerate(texts):
        user = UserFolder(root / f"v{number}", stock, expect)
        if block.lang == "python":
            done = user.python(text)
        else:
            script, outs, errs = bind(text, user.tmp), [], []
            for part, act in _parts(script, expect.acts):
                done = user.bash(part)
                outs.append(done.out)
                errs.append(done.err)
                if done.rc != 0 or act is None:
                    break
                act(user.folder)
            done = Done(done.rc, "".join(outs), "".join(errs))
        said = f"{block.where} [{text.strip()[:300]}]: "
        tail = f"\n--- stdout\n{done.out[-3000:]}\n--- stderr\n{done.err[-3000:]}"
        if done.rc != expect.rc:
            problems.append(f"{said}exit {done.rc}, documented {expect.rc}{tail}")
            continue
        for name in expect.files:
            path = Path(name.format(tmp=user.tmp))
            if not (user.folder / path).exists():
                problems.append(f"{said}{name} was not written{tail}")
        for line in expect.shows:
            if line not in done.out + done.err:
                problems.append(f"{said}does not show {line!r}{tail}")
        if expect.check is not None and not problems:
            try:
                expect.check(user.folder, done.out, user.sh)
            except AssertionError as exc:
                problems.append(f"{said}{expect.check.__name__}: {exc}{tail}")
    return problems


# ----------------------------------------------------------------------------- the tests

BLOCKS = all_blocks()
_FIRST: dict[str, Block] = {}
for _block in BLOCKS:
    if _block.marker is None:
        _FIRST.setdefault(_block.key, _block)  # one text in two pages (README and a guide) runs once


@pytest.fixture(scope="session")
def stock(tmp_path_factory) -> Stock:
    return Stock(tmp_path_factory.mktemp("doc-fixtures"))


def _declared() -> list:
    params = []
    for key, block in _FIRST.items():
        if key in EXPECT:
            marks = [pytest.mark.slow] if EXPECT[key].slow else []
            params.append(pytest.param(key, id=f"{block.where}-{key}", marks=marks))
    return params


@pytest.mark.parametrize("key", _declared())
def test_the_block_does_what_its_page_says(key, stock, tmp_path):
    problems = run_block(_FIRST[key], EXPECT[key], stock, tmp_path)
    assert not problems, "\n\n".join(problems)


def _covering_tests(marker: str) -> list[str]:
    """What is wrong with a marker's named tests (missing file or function)."""
    wrong = []
    for named in MARKER.fullmatch(marker).group("tests").split(", "):
        path, _, test = named.partition("::")
        if not (REPO / path).is_file():
            wrong.append(f"{path} does not exist")
        elif test and not re.search(rf"^\s*(async )?def {test}\(", (REPO / path).read_text(encoding="utf-8"),
                                    re.MULTILINE):
            wrong.append(f"{path} has no test {test}")
    return wrong


def test_every_block_runs_here_or_names_the_test_that_covers_it():
    problems = []
    for page in PAGES:
        problems += stray_markers(page.read_text(encoding="utf-8"), str(page.relative_to(REPO)))
    for block in BLOCKS:
        if block.marker is not None:
            if MARKER.fullmatch(block.marker):
                problems += [f"{block.where}: {wrong}" for wrong in _covering_tests(block.marker)]
        elif block.key not in EXPECT:
            problems.append(f"{block.where}: a {block.lang} block neither declared in tests/docs/test_doc_blocks.py "
                            f"EXPECT (its key: {block.key!r}) nor marked <!-- doc-test: skip: WHY; covered by "
                            f"tests/PATH.py --> on the line before its fence:\n{block.text}")
    assert not problems, "\n".join(problems)


def test_every_expectation_belongs_to_a_block_of_the_docs():
    # an entry whose block changed or went away would otherwise stay, unchecked, beside the new text
    stale = sorted(set(EXPECT) - {b.key for b in BLOCKS if b.marker is None})
    assert not stale, f"EXPECT entries that match no unmarked block (its text changed?): {stale}"


def test_the_harness_finds_blocks_markers_templates_and_option_combinations(tmp_path):
    page = ("# P\n\nRun `retrieval-lab page A B --output p.html [--qrels Q] [--json]` first.\n\n"
            "```bash\necho one\n```\n\n<!-- doc-test: skip: needs a cluster; covered by tests/docs/test_site.py -->\n"
            "```python\nprint(2)\n```\n\n```yaml\na: 1\n```\n\n<!-- doc-test: skip: no test named -->\n```sh\nx\n```\n"
            "<!-- doc-test: skip: nothing after; covered by tests/docs/test_site.py -->\n\ntext\n")
    found = blocks_of(page, "p.md")
    assert [(b.line, b.lang, b.text) for b in found] == [
        (5, "bash", "echo one\n"), (10, "python", "print(2)\n"), (19, "sh", "x\n"),
        (3, "bash", "retrieval-lab page A B --output p.html [--qrels Q] [--json]\n")]
    assert found[1].marker == "<!-- doc-test: skip: needs a cluster; covered by tests/docs/test_site.py -->"
    assert _covering_tests(found[1].marker) == []
    assert _covering_tests("<!-- doc-test: skip: x; covered by tests/nowhere.py, tests/docs/test_site.py::nope -->"
                           ) == ["tests/nowhere.py does not exist", "tests/docs/test_site.py has no test nope"]
    assert found[2].marker == "<!-- doc-test: skip: no test named -->" and not MARKER.fullmatch(found[2].marker)
    assert stray_markers(page, "p.md") == [
        "p.md:18: not of the form <!-- doc-test: skip: WHY; covered by tests/PATH.py -->",
        "p.md:22: a marker must be the line right before a block's opening fence"]
    assert variants(found[3].text) == [
        "retrieval-lab page A B --output p.html --qrels Q --json\n",
        "retrieval-lab page A B --output p.html --qrels Q\n",
        "retrieval-lab page A B --output p.html --json\n",
        "retrieval-lab page A B --output p.html\n"]
    assert bind("page BASE.trec --qrels Q --dataset D -m nDCG@10 > /tmp/x DIR/qrels Q0 DIRT\n", tmp_path) == (
        f"page BASE.trec --qrels my-collection/qrels/test.tsv --dataset my-collection -m nDCG@10 > {tmp_path}/x "
        "my-collection/qrels Q0 DIRT\n")


def test_a_block_that_fails_or_leaves_out_a_file_is_reported(stock, tmp_path):
    block = Block("p.md", 1, "bash", "echo made > here.txt\n# a person edits it\ncat here.txt\nfalse\n", None)
    edits = {"# a person edits it": lambda folder: (folder / "here.txt").write_text("edited\n")}
    said = run_block(block, Expect(files=("here.txt", "gone.txt"), acts=edits), stock, tmp_path / "a")
    assert len(said) == 1 and said[0].startswith("p.md:1 [") and "exit 1, documented 0" in said[0]
    block = Block("p.md", 1, "bash", "echo made > here.txt\n# a person edits it\ncat here.txt\n", None)
    said = run_block(block, Expect(files=("here.txt", "gone.txt"), shows=("edited", "made"), acts=edits),
                     stock, tmp_path / "b")
    assert [s.split("]: ")[1].split("\n")[0] for s in said] == ["gone.txt was not written", "does not show 'made'"]
