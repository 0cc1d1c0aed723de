from __future__ import annotations

import dataclasses
import typing

import pytest
from beir_fixtures import REPO

from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import Params
from retrieval_lab.core.params_file import apply_overrides, dotted_items, load_params


def test_repository_params_are_valid():
    params = load_params(REPO / "params.yaml")
    assert params.bm25.k1 == 1.2 and params.bm25.b == 0.75  # Lucene defaults
    assert set(params.train.variants) == {"hard", "random", "temperature", "query"}
    assert params.train.variants["query"].side == "query" and params.train.variants["hard"].side == "both"


def test_unknown_key_is_an_error(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("bm25:\n  k1: 1.2\n  kl: 0.9\n")
    with pytest.raises(InputError) as info:
        load_params(path)
    assert info.value.field == "bm25.kl" and "unknown key" in str(info.value)


def test_wrong_type_is_an_error(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("retrieve:\n  depth: deep\n")
    with pytest.raises(InputError) as info:
        load_params(path)
    assert info.value.field == "retrieve.depth" and "expected an integer" in str(info.value)


def test_overrides_use_the_same_schema(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no params.yaml here: every default, then the overrides
    params = load_params(None, ["bm25.k1=0.9", "tokenizer.stopwords=null"])
    assert params.bm25.k1 == 0.9 and params.tokenizer.stopwords is None
    with pytest.raises(InputError):
        load_params(None, ["bm25.k1=fast"])


def test_a_named_params_file_must_exist(tmp_path):
    with pytest.raises(InputError) as info:
        load_params(tmp_path / "missing.yaml")
    assert info.value.path == str(tmp_path / "missing.yaml") and "not found" in str(info.value)


def test_override_value_is_yaml_when_it_parses_else_the_raw_string(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = load_params(None, ["tokenizer.pattern=[a-z0-9]+", "bm25.k1=0.9", "retrieve.fields=[text]",
                                "mine.margin=null"])
    # "[a-z0-9]+" is not YAML (an unclosed flow sequence): it stays the string typed
    assert params.tokenizer.pattern == "[a-z0-9]+" and params.bm25.k1 == 0.9
    assert params.retrieve.fields == ["text"] and params.mine.margin is None


def test_a_float_without_a_dot_is_a_number_as_dvc_writes_it(tmp_path, monkeypatch):
    # `dvc exp run -S train.lr=5e-5` writes params.yaml with ruamel (YAML 1.2): `lr: 5e-05`, which YAML 1.1
    # would read as the string '5e-05' and the schema would refuse
    from ruamel.yaml import YAML

    path = tmp_path / "params.yaml"
    with path.open("w") as f:
        YAML().dump({"train": {"lr": 5e-5, "weight_decay": 1e-3}}, f)
    assert "lr: 5e-05" in path.read_text()
    params = load_params(path)
    assert params.train.lr == 5e-5 and params.train.weight_decay == 0.001
    monkeypatch.chdir(tmp_path)
    params = load_params(None, ["train.lr=2E+1", "bm25.k1=+12e-1", "tokenizer.pattern=1e"])
    assert params.train.lr == 20.0 and params.bm25.k1 == 1.2 and params.tokenizer.pattern == "1e"


@pytest.mark.parametrize("spelling", ["none", "None", "NONE", "null", "~"])
def test_none_turns_off_stemmer_and_stopwords(spelling, tmp_path, monkeypatch):
    from retrieval_lab.tokenizer import Tokenizer

    monkeypatch.chdir(tmp_path)
    params = load_params(None, [f"tokenizer.stemmer={spelling}", f"tokenizer.stopwords={spelling}"])
    assert params.tokenizer.stemmer is None and params.tokenizer.stopwords is None
    # defaults would give ["run", "cat"] (stemmed, "the" a stopword); turned off: the lowercased tokens
    assert Tokenizer(params.tokenizer).tokenize("The running Cats") == ["the", "running", "cats"]


def schema_keys(cls, prefix: str = "") -> list[str]:
    """Every leaf key of the params schema, from the dataclasses themselves (mappings: their default names)."""
    keys = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = f"{prefix}.{f.name}" if prefix else f.name
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            keys += schema_keys(tp, key)
        elif typing.get_origin(tp) is dict and dataclasses.is_dataclass(typing.get_args(tp)[1]):
            for name in getattr(cls(), f.name):
                keys += schema_keys(typing.get_args(tp)[1], f"{key}.{name}")
        else:
            keys.append(key)
    return keys


# Wrong for every key: not YAML (kept as raw strings, which no string setting accepts: not a name,
# a regex, a language, a choice, a file or a measure) or a negative number (no count, ratio, seed
# or weight may be one; strings, lists and mappings refuse a number)
MALFORMED = ["{bad: [", "[", "*no_anchor", "-3"]
KEYS = schema_keys(Params)


def test_the_walk_covers_the_schema():
    assert len(KEYS) > 60 and {"tokenizer.pattern", "train.variants.hard.temperature", "dense.models", "train.base",
                               "fusion.methods.rrf.value"} <= set(KEYS)


# each fusion method's own rule (fusion/<name>.py: check) refuses a value when fusing: tests/fusion/test_fusion.py
METHOD_RULED = {"fusion.methods.rrf.value", "fusion.methods.weighted.value"}


@pytest.mark.parametrize("key", sorted(set(KEYS) - METHOD_RULED))
def test_every_key_refuses_a_malformed_value_in_one_line(key, tmp_path, monkeypatch, capsys):
    from beir_fixtures import write_beir

    from retrieval_lab import cli, encoder

    monkeypatch.chdir(tmp_path)  # no params.yaml: the defaults, then the one override
    monkeypatch.setattr(encoder, "load", lambda *a, **k: pytest.fail("every bad value is refused before a model loads"))
    beir = write_beir(tmp_path / "beir", [{"_id": "d1", "title": "", "text": "x"}], [{"_id": "q1", "text": "x"}],
                      {"test": [("q1", "d1", 1)]})
    for value in MALFORMED:
        code = cli.main(["encode", "--dataset", str(beir), "--output", str(tmp_path / "out"),
                         "--set", f"{key}={value}"])
        err = capsys.readouterr().err
        assert code == 2, (value, err)
        assert err.startswith("error: ") and err.count("\n") == 1, (value, err)
        assert f"field '{key}'" in err, (value, err)
    assert not (tmp_path / "out").exists()


def test_variant_side_and_epochs_are_checked(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("train: {variants: {q: {negatives: hard, side: queries}}}\n")
    with pytest.raises(InputError, match=r"train.variants.q.side.*unknown value 'queries' \(choices: both, query\)"):
        load_params(path)
    path.write_text("train: {variants: {q: {negatives: hard, side: query, epochs: 0}}}\n")
    with pytest.raises(InputError, match="train.variants.q.epochs"):
        load_params(path)


def float_keys(cls, prefix: str = "") -> list[str]:
    """Every key of the schema holding a float: plain, optional (X | None) or a list of floats."""
    keys = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key, tp = f"{prefix}.{f.name}" if prefix else f.name, hints[f.name]
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if dataclasses.is_dataclass(tp):
            keys += float_keys(tp, key)
        elif typing.get_origin(tp) is dict and dataclasses.is_dataclass(typing.get_args(tp)[1]):
            for name in getattr(cls(), f.name):
                keys += float_keys(typing.get_args(tp)[1], f"{key}.{name}")
        elif tp is float or args == [float] or typing.get_origin(tp) is list and args == [float]:
            keys.append(key)
    return keys


FLOAT_KEYS = float_keys(Params)
LIST_KEYS = {"fusion.methods.rrf.grid", "fusion.methods.weighted.grid"}


def test_the_float_walk_finds_every_kind_of_float():
    # plain, optional, nested under a mapping of variants, and lists
    assert {"bm25.k1", "mine.margin", "train.max_grad_norm", "train.variants.query.temperature",
            "fusion.methods.rrf.grid", "evaluate.ci_level", "train.lr", "fusion.methods.rrf.value"} <= set(FLOAT_KEYS)
    assert len(FLOAT_KEYS) == 24  # generate 1, prepare 4 (train, val, test, val_from_train), bm25 2, fusion 4, mine 1, train 5 + 4 variants, evaluate 2, judge 1


def _nested_yaml(key: str, value: str) -> tuple[str, int]:
    """``a.b.c`` -> the YAML setting it (a list key as a one-item flow list) and the line of ``c``."""
    parts = key.split(".")
    lines = [f"{'  ' * depth}{part}:" for depth, part in enumerate(parts)]
    lines[-1] += f" [{value}]" if key in LIST_KEYS else f" {value}"
    return "dataset: support\n" + "\n".join(lines) + "\n", len(parts) + 1


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
@pytest.mark.parametrize("key", FLOAT_KEYS)
def test_every_float_must_be_finite(key, value, tmp_path, monkeypatch):
    # NaN slips through every range check (nan < 0 and nan > 1 are both false): bm25.k1=.nan gave an
    # empty run with exit 0, mine.margin=.nan wrote NaN into the audit, rrf_k=.inf made every score 0
    field = f"{key}[0]" if key in LIST_KEYS else key
    path = tmp_path / "params.yaml"
    text, line = _nested_yaml(key, value)
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_params(path)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), line, field), str(info.value)
    assert "expected a finite number" in info.value.reason
    monkeypatch.chdir(tmp_path)  # params.yaml here is the bad file: the override must be the one blamed
    path.write_text("dataset: support\n")
    override = f"{key}=[{value}]" if key in LIST_KEYS else f"{key}={value}"
    with pytest.raises(InputError) as info:
        load_params(None, [override])
    assert info.value.field == field and f"(from --set {override})" in str(info.value), str(info.value)
    assert "expected a finite number" in info.value.reason


def test_an_integer_too_large_for_a_float_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="field 'bm25.k1': expected a finite number, got inf"):
        load_params(None, ["bm25.k1=1" + "0" * 400])  # float(10**400) overflows


def test_permutations_are_bounded(tmp_path, monkeypatch):
    # 1e11 sign flips grew to 20 GB before the kernel killed the command
    monkeypatch.chdir(tmp_path)
    assert load_params(None, ["evaluate.permutations=10000000"]).evaluate.permutations == 10**7
    with pytest.raises(InputError, match=r"field 'evaluate.permutations': must lie in \[1, 10000000\]"):
        load_params(None, ["evaluate.permutations=100000000000"])


def test_a_key_given_twice_is_refused_naming_both_lines(tmp_path):
    # plain YAML keeps the last value silently: k1 0.9 would win over the 1.2 the reader sees first
    path = tmp_path / "params.yaml"
    path.write_text("bm25:\n  k1: 1.2\n  b: 0.75\n  k1: 0.9\n")
    with pytest.raises(InputError) as info:
        load_params(path)
    assert (info.value.path, info.value.line) == (str(path), 4)
    assert info.value.reason == "duplicate key 'k1' (lines 2 and 4)"
    path.write_text("bm25: {k1: 1.2}\nlsa: {dims: 8}\nbm25: {b: 0.5}\n")  # a whole section twice
    with pytest.raises(InputError, match=r"params.yaml:3: duplicate key 'bm25' \(lines 1 and 3\)"):
        load_params(path)


def test_a_key_given_twice_in_an_override_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="field 'bm25': duplicate key 'k1' in --set bm25={k1: 1, k1: 2}"):
        load_params(None, ["bm25={k1: 1, k1: 2}"])


def test_merge_keys_may_repeat_what_they_merge(tmp_path):
    # `<<: *base` then an explicit key is how YAML says "like base, but": not a duplicate
    path = tmp_path / "params.yaml"
    path.write_text("train:\n  variants:\n    hard: &base {negatives: hard, temperature: 0.05}\n"
                    "    warm: {<<: *base, temperature: 0.1}\n")
    variants = load_params(path).train.variants
    assert (variants["warm"].negatives, variants["warm"].temperature) == ("hard", 0.1)


def test_python_tags_are_still_refused(tmp_path, capsys):
    from retrieval_lab import cli

    path = tmp_path / "params.yaml"
    marker = tmp_path / "ran"
    path.write_text(f"bm25: !!python/object/apply:pathlib.Path.touch [{str(marker)!r}]\n")
    assert cli.main(["encode", "--dataset", str(tmp_path), "--output", str(tmp_path / "out"),
                     "--params", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}:1: invalid YAML: could not determine a constructor") and err.count("\n") == 1
    assert not marker.exists()


def test_built_in_defaults_are_the_repository_params_yaml():
    # A command run outside the repository (no params.yaml) must behave as the pipeline does.
    import dataclasses

    from beir_fixtures import REPO

    from retrieval_lab.core.params import Params
    from retrieval_lab.core.params_file import load_params

    built_in, pipeline = dataclasses.asdict(Params()), dataclasses.asdict(load_params(REPO / "params.yaml"))
    # the one exception: the pipeline names the lock by path, the package ships the same file as "builtin"
    assert (built_in["dense"]["models"].pop("dense"), pipeline["dense"]["models"].pop("dense")) == \
        ("builtin", "models/base.lock.json")
    assert (REPO / "models" / "base.lock.json").read_bytes() == \
        (REPO / "src" / "retrieval_lab" / "models" / "base.lock.json").read_bytes()

    def differences(a, b, prefix=""):
        if isinstance(a, dict) and isinstance(b, dict):
            return [d for k in sorted(set(a) | set(b)) for d in differences(a.get(k), b.get(k), f"{prefix}{k}.")]
        return [] if a == b else [f"{prefix[:-1]}: built-in {a!r}, params.yaml {b!r}"]

    assert differences(built_in, pipeline) == []


def _fuse_in(folder, *extra: str) -> dict[str, bytes]:
    """``retrieval-lab fuse`` run inside ``folder`` on a tiny pair of runs and val qrels: the bytes it writes."""
    from command_runner import run_command

    from retrieval_lab.runs import write_run

    write_run(folder / "a.trec", {"q1": {"x": 3.0, "y": 2.0, "z": 1.0}, "q2": {"u": 2.0, "v": 1.0},
                                  "q9": {"x": 1.0}}, "a")
    write_run(folder / "b.trec", {"q1": {"y": 0.9, "v": 0.8, "w": 0.5}, "q2": {"v": 0.9, "u": 0.1}}, "b")
    (folder / "val.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tx\t1\nq2\tu\t1\n")
    # relative paths: the report names them, and they must read the same in both folders
    assert run_command("fuse", ["--method", "weighted", "--runs", "a.trec", "b.trec", "--qrels", "val.tsv",
                                "--output", "fused.trec", "--report", "fusion.json", *extra]) == 0
    return {name: (folder / name).read_bytes() for name in ("fused.trec", "fusion.json")}


def test_fuse_outside_the_repository_gives_the_pipeline_s_bytes(tmp_path, monkeypatch):
    # The pipeline runs fuse beside the repository's params.yaml; a user elsewhere has none and gets the
    # built-in defaults. Both must tune alpha on the val qrels (fusion.tune) and write the same bytes.
    import json
    import shutil

    pipeline, outside = tmp_path / "copy", tmp_path / "empty"
    pipeline.mkdir(), outside.mkdir()
    shutil.copy(REPO / "params.yaml", pipeline / "params.yaml")
    monkeypatch.chdir(pipeline)
    in_pipeline = _fuse_in(pipeline)
    monkeypatch.chdir(outside)
    assert not (outside / "params.yaml").exists()
    assert _fuse_in(outside) == in_pipeline
    # weighted score = alpha mm_a + (1 - alpha) mm_b (min-max per run). q1: x (1, 0) beats y (0.5, 1) when
    # alpha > 2/3; q2: u (1, 0) beats v (0, 1) when alpha > 1/2: the grid's first alpha with nDCG@10 = 1 is 0.7
    report = json.loads(in_pipeline["fusion.json"])
    assert (report["tuned"], report["chosen"]) == (True, 0.7)
    # the comparison can fail: untuned fusion (the old built-in default) writes other bytes
    assert _fuse_in(outside, "--set", "fusion.tune=false")["fused.trec"] != in_pipeline["fused.trec"]


def test_every_stage_s_help_says_where_defaults_come_from(capsys):
    from retrieval_lab import cli

    for name in cli.STAGES:
        with pytest.raises(SystemExit):
            cli.main([name, "--help"])
        text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
        assert ("./params.yaml when the working directory has one, else the built-in defaults, which equal "
                "the repository's params.yaml key for key") in text, name


@pytest.mark.parametrize("value", ["efSearch=256", "nprobe=64", "nprobe=8,efSearch=32", "quantizer_efSearch=64",
                                   "k_factor_rf=1.5"])
def test_a_faiss_search_setting_of_the_shape_faiss_parses_is_accepted(value):
    from retrieval_lab.core.params import DenseParams

    assert DenseParams(faiss_search=value).faiss_search == value
    assert DenseParams().faiss_search is None  # null: FAISS's defaults


@pytest.mark.parametrize("value", ["foo", "nprobe", "nprobe=", "=4", "nprobe=0", "efSearch=0.0", "nprobe=-1",
                                   "nprobe=abc", "nprobe=4,", "nprobe=4;efSearch=8", "nprobe = 4", "",
                                   "nprobe=1e3"])
def test_a_malformed_faiss_search_setting_is_refused_by_params(value, tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(f"dense:\n  faiss_search: '{value}'\n")
    with pytest.raises(InputError) as info:
        load_params(path)
    assert info.value.field == "dense.faiss_search"
    assert info.value.reason == (f"{value!r} is not name=value[,name=value] with values above 0 (e.g. efSearch=256, "
                                 "nprobe=64; null: FAISS's defaults)")


def test_unknown_schedule_is_refused_by_params(tmp_path):
    from retrieval_lab.core.errors import InputError
    from retrieval_lab.core.params_file import load_params

    path = tmp_path / "params.yaml"
    path.write_text("train: {schedule: step}\n")
    with pytest.raises(InputError, match="unknown value 'step'.*constant, linear, cosine"):
        load_params(path)


def test_dotted_items_are_the_keys_set_takes_and_undo_the_nesting():
    nested = {"train": {"seed": 42, "variants": {"hard": {"temperature": 0.05}}}, "retrieve": {"fields": ["title"]},
              "dataset": "support"}
    flat = dotted_items(nested)
    # one entry per leaf; a list is a value, not a level
    assert flat == {"train.seed": 42, "train.variants.hard.temperature": 0.05, "retrieve.fields": ["title"],
                    "dataset": "support"}
    # --set key=value over an empty mapping, for every item, rebuilds the mapping
    assert apply_overrides({}, [f"{key}={value}" for key, value in flat.items()]) == nested


@pytest.mark.parametrize(("section", "name"), [
    ("train.variants", ".."), ("train.variants", "../../../../victim"), ("train.variants", "a/b"),
    ("dense.models", ".."), ("dense.models", "../x"), ("fusion.methods", ".."), ("fusion.methods", "/etc"),
])
def test_names_that_would_leave_their_folder_are_refused(tmp_path, section, name):
    # issue 42: these keys become dvc.yaml paths (models/finetuned/<dataset>/<variant>, ...)
    key, sub = section.split(".")
    value = {"train": {"negatives": "hard", "temperature": 0.05}, "dense": "builtin",
             "fusion": {"value": 60.0, "grid": [60.0]}}[key]
    path = tmp_path / "p.yaml"
    import yaml

    path.write_text(yaml.safe_dump({key: {sub: {name: value}}}))
    with pytest.raises(InputError, match="is not letters, digits"):
        load_params(path)


def test_an_unknown_fusion_method_is_refused_by_the_registry(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("fusion: {methods: {zzz: {value: 1, grid: [1]}}}\n")
    with pytest.raises(InputError, match=r"fusion.methods.zzz': unknown fusion method 'zzz' \(choices: rrf, weighted\)"):
        load_params(path)


def test_an_override_with_a_newline_is_named_on_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as info:
        load_params(None, ["dataset=a\nb"])
    assert "\n" not in str(info.value) and str(info.value).endswith(r"(from --set dataset=a\nb)"), str(info.value)


# ----------------------------------------------------------------------------- hostile S5, S9, M4: external.*.url

BAD_URLS = {
    "credentials_and_a_bad_scheme": ("htp://user:s3cretPW@127.0.0.1:9/s", "may not carry credentials"),  # S5: echoed
    "credentials": ("https://user:s3cretPW@example.com/s", "may not carry credentials"),
    "unclosed_ipv6_host": ("http://[::1/s3cretPW", "its host"),  # S9: a ValueError traceback from urlsplit
    "port_past_65535": ("http://127.0.0.1:99999/s3cretPW", "a port in 1..65535"),  # M4: failed per query
    "port_not_a_number": ("http://127.0.0.1:abc/s3cretPW", "a port in 1..65535"),
    "port_zero": ("http://127.0.0.1:0/s3cretPW", "a port in 1..65535"),
    "non_ascii_path": ("http://127.0.0.1:9/s3cretPW/é", "printable ASCII"),
    "space": ("http://127.0.0.1:9/s3cretPW x", "printable ASCII"),
    "bad_scheme": ("htp://127.0.0.1:9/s3cretPW", "not an http:// or https:// URL"),
}


@pytest.mark.parametrize("case", list(BAD_URLS))
def test_a_bad_endpoint_url_is_one_line_naming_its_key_and_never_the_url(tmp_path, capsys, case):
    from beir_fixtures import write_beir

    from retrieval_lab import cli

    url, says = BAD_URLS[case]
    beir = write_beir(tmp_path / "beir", [{"_id": "d1", "title": "", "text": "x"}], [{"_id": "q1", "text": "x"}],
                      {"test": [("q1", "d1", 1)]})
    params = tmp_path / "params.yaml"
    params.write_text('external:\n  x:\n    path: .\n    url: "' + url + '"\n', encoding="utf-8")
    out = tmp_path / "o.trec"
    args = ["retrieve", "--retriever", "external", "--external", "x", "--dataset", str(beir), "--output", str(out),
            "--timing", str(tmp_path / "t.json")]
    for extra, hidden in ((["--params", str(params)], "s3cretPW"),  # neither the password nor the URL is echoed
                          (["--set", "external.x.path=.", "--set", f"external.x.url={url}"], "user:s3cretPW")):
        code = cli.main([*args, *extra])  # --set: the user's own words are echoed, without credentials
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert "field 'external.x.url'" in err and says in err, err
        assert hidden not in err, err
    assert not out.exists()


def test_a_good_url_is_accepted():
    from retrieval_lab.core.params import ExternalRetriever

    for url in ("http://127.0.0.1:8080/search?x=1", "https://[::1]:443/s", "http://search.internal/s"):
        assert ExternalRetriever(path=".", url=url).url == url


@pytest.mark.parametrize("overrides, field, other", [
    (["dense.models.BM25=builtin"], "dense.models.BM25", "bm25"),  # hostile M2: the same file on macOS
    (["dense.models.Dense-FT-hard=builtin"], "dense.models.Dense-FT-hard", "dense-ft-hard"),
    (["train.variants.Hard.negatives=hard"], "train.variants.Hard", "dense-ft-hard"),
    (["external.Dense.path=.", "external.Dense.callable=m:f"], "external.Dense", "dense"),
])
def test_run_names_differing_only_in_case_are_refused(tmp_path, monkeypatch, overrides, field, other):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("train:\n  variants:\n    hard: {negatives: hard}\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_params(None, overrides)
    assert info.value.field == field and f"({other!r}: names differing only in case" in str(info.value)


def test_a_text_parsed_again_is_not_parsed_twice_and_each_caller_gets_its_own_value(monkeypatch):
    from retrieval_lab.core import params_file

    made = []
    real = params_file._Loader
    monkeypatch.setattr(params_file, "_Loader", lambda text: made.append(text) or real(text))
    monkeypatch.setattr(params_file, "_PARSED", {})
    text = "train:\n  lr: 5e-5\n  fields: [title, text]\nshared: &a {k: 1}\nagain: *a\n"
    first = params_file.parse_yaml(text)
    first["train"]["fields"].append("mutated")
    second = params_file.parse_yaml(text)
    assert made == [text]  # the second from the memo
    assert second == {"train": {"lr": 5e-5, "fields": ["title", "text"]}, "shared": {"k": 1}, "again": {"k": 1}}
    assert second["shared"] is second["again"]  # an alias stays one object, as in a parse
    # a text that fails is parsed (and refused) each time, naming each call's source
    bad = "a: 1\na: 2\n"
    for _ in range(2):
        with pytest.raises(params_file.DuplicateKeyError):
            params_file.parse_yaml(bad, "p.yaml")
    assert made == [text, bad, bad]
