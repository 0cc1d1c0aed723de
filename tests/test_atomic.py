from __future__ import annotations

import pytest

from retrieval_lab.core.atomic import atomic_path, write_text


def test_failed_write_leaves_previous_output_untouched(tmp_path):
    target = tmp_path / "out.txt"
    write_text(target, "old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_directory_replaced_whole(tmp_path):
    target = tmp_path / "dir"
    with atomic_path(target, is_dir=True) as tmp:
        (tmp / "a").write_text("1")
    with atomic_path(target, is_dir=True) as tmp:
        (tmp / "b").write_text("2")
    assert sorted(p.name for p in target.iterdir()) == ["b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir"]
    assert oct(target.stat().st_mode & 0o777) == "0o755"


def test_temporaries_of_a_killed_run_are_swept_by_the_next(tmp_path):
    stale = tmp_path / ".out.tmp-abc123"  # what SIGKILL leaves: no finally block ran
    stale.mkdir()
    (stale / "half").write_text("x")
    write_text(tmp_path / "out", "whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
