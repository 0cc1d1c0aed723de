"""scripts/clean.py: lists, then deletes, only generated outputs."""

from __future__ import annotations

from training_fixtures import _script


def test_clean_script_lists_then_deletes_only_generated(tmp_path, capsys):
    script = _script("clean")
    for rel in ("data/prepared/support/corpus.jsonl", "runs/support/bm25.trec", "dvclive/support/hard/metrics.json",
                "models/finetuned/support/hard/config.json", "models/base.lock.json", "data/raw/scifact/x",
                "params.yaml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    assert script.main(["--scope", "generated", "--dry-run", "--root", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "would delete data/prepared", "would delete runs", "would delete models/finetuned", "would delete dvclive"]
    assert (tmp_path / "runs").exists()  # dry run deleted nothing
    assert script.main(["--scope", "generated", "--root", str(tmp_path)]) == 0
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["data/raw/scifact/x", "models/base.lock.json", "params.yaml"]
