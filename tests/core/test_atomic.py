from __future__ import annotations

import errno
import os
import stat

import pytest

from retrieval_lab.core import atomic
from retrieval_lab.core.atomic import MARKER, MARKER_TEXT, atomic_path, write_text
from retrieval_lab.core.errors import InputError
from retrieval_lab.core.guard import check_paths as check_outputs


def _listing(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _user_folder(path):
    """A folder no stage wrote: the user's own files, no marker."""
    path.mkdir(parents=True)
    (path / "notes.txt").write_text("mine")
    return path


def test_failed_write_leaves_previous_output_untouched(tmp_path):
    target = tmp_path / "out.txt"
    write_text(target, "old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert _listing(tmp_path) == ["out.txt"]


def test_directory_replaced_whole_and_marked(tmp_path):
    target = tmp_path / "dir"
    with atomic_path(target, is_dir=True) as tmp:
        (tmp / "a").write_text("1")
    with atomic_path(target, is_dir=True) as tmp:
        assert _listing(tmp) == []  # the marker comes after the block: the stage sees an empty folder
        (tmp / "b").write_text("2")
    assert _listing(target) == [MARKER, "b"]
    assert (target / MARKER).read_text() == MARKER_TEXT + atomic.MANIFEST_HEAD + "b\n"
    assert _listing(tmp_path) == ["dir"]


def _leftover(folder, name, content):
    """What SIGKILL leaves (no finally block ran): a box of atomic's making holding the temporary."""
    box = folder / name
    box.mkdir()
    (box / atomic.TEMPORARY).write_text(atomic.TEMPORARY_TEXT)
    (box / "half").write_text(content)
    return box


def test_temporaries_of_a_killed_run_are_swept_by_the_next(tmp_path):
    _leftover(tmp_path, f".out.{atomic.TMP_TAG}abc123", "x")
    write_text(tmp_path / "out", "whole")
    assert _listing(tmp_path) == ["out"]


def test_old_output_set_aside_by_a_killed_run_is_swept_by_the_next(tmp_path):
    # SIGKILL between the two renames: the previous output sits in .NAME.old-retrieval-lab-*, nothing at NAME
    for name in ("run.trec", "dir"):
        _leftover(tmp_path, f".{name}.{atomic.OLD_TAG}123", "previous")
    write_text(tmp_path / "run.trec", "new")
    with atomic_path(tmp_path / "dir", is_dir=True):
        pass
    assert _listing(tmp_path) == ["dir", "run.trec"]


def test_set_aside_old_output_stays_while_the_next_run_fails(tmp_path):
    # until a new output stands, the set-aside one is the only copy left
    old = _leftover(tmp_path, f".run.trec.{atomic.OLD_TAG}123", "previous")
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "run.trec"):
        raise RuntimeError("failed")
    assert (old / "half").read_text() == "previous"


def test_the_sweep_removes_only_what_atomic_made(tmp_path):
    # issue 42: a user's .out.trec.tmp-backup and .out.trec.old-2024 were deleted by `retrieve --output out.trec`
    users = {".out.trec.tmp-backup": "backup", ".out.trec.old-2024": "last year",
             f".out.trec.{atomic.TMP_TAG}mine": "named like ours, no marker"}
    for name, text in users.items():
        (tmp_path / name).write_text(text)
    fake = tmp_path / f".out.trec.{atomic.OLD_TAG}x"  # our name, a marker with other content
    fake.mkdir()
    (fake / atomic.TEMPORARY).write_text("not ours")
    write_text(tmp_path / "out.trec", "run")
    write_text(tmp_path / "out.trec", "run again")  # the second replaces the first: the old box is swept
    assert {n: (tmp_path / n).read_text() for n in users} == users
    assert (fake / atomic.TEMPORARY).read_text() == "not ours"
    assert _listing(tmp_path) == sorted([*users, fake.name, "out.trec"])


def test_folder_output_lists_what_it_holds_and_refuses_a_file_added_later(tmp_path):
    target = tmp_path / "dir"
    with atomic_path(target, is_dir=True) as tmp:
        (tmp / "sub").mkdir()
        (tmp / "sub" / "a").write_text("1")
    assert (target / MARKER).read_text() == MARKER_TEXT + atomic.MANIFEST_HEAD + "sub/a\n"
    (target / "notes.md").write_text("the user's")
    with pytest.raises(InputError, match="holds notes.md, which retrieval-lab did not write"), \
            atomic_path(target, is_dir=True):
        pass
    assert (target / "notes.md").read_text() == "the user's"
    (target / "notes.md").unlink()
    with atomic_path(target, is_dir=True) as tmp:  # as written: replaced whole
        (tmp / "b").write_text("2")
    assert _listing(target) == [MARKER, "b"]


def test_into_folder_replaces_only_the_files_it_wrote(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "diagnosis.md").write_text("the user's notes")
    with pytest.raises(InputError, match="holds diagnosis.md, which retrieval-lab did not write"):
        check_outputs({}, into={"--reports": folder}, written={"--reports": ["per_query.json", "diagnosis.md"]})
    (folder / "diagnosis.md").unlink()
    write_text(folder / "diagnosis.md", "ours")
    atomic.record_written(folder, ["diagnosis.md"])
    check_outputs({}, into={"--reports": folder}, written={"--reports": ["per_query.json", "diagnosis.md"]})


@pytest.fixture
def umask_027():
    previous = os.umask(0o027)
    yield
    os.umask(previous)


def test_modes_follow_the_umask(tmp_path, umask_027):
    # 0o666 & ~0o027 = 0o640 for files, 0o777 & ~0o027 = 0o750 for folders (not a fixed 0644/0755)
    write_text(tmp_path / "f", "x")
    with atomic_path(tmp_path / "d", is_dir=True):
        pass
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o750
    assert atomic._umask() == 0o027  # read, not changed


def test_modes_under_the_common_umask(tmp_path):
    previous = os.umask(0o022)
    try:
        write_text(tmp_path / "f", "x")
        with atomic_path(tmp_path / "d", is_dir=True):
            pass
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o755


# ----------------------------------------------------------------------------- what an output may replace


def test_folder_output_refuses_a_folder_it_did_not_write(tmp_path):
    precious = _user_folder(tmp_path / "precious")
    with (pytest.raises(InputError, match="holding files retrieval-lab did not write") as caught,
          atomic_path(precious, is_dir=True) as tmp):
        (tmp / "a").write_text("1")
    assert caught.value.path == str(precious)
    assert _listing(precious) == ["notes.txt"] and _listing(tmp_path) == ["precious"]


def test_folder_output_replaces_an_empty_or_marked_folder(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with atomic_path(empty, is_dir=True) as tmp:
        (tmp / "a").write_text("1")
    assert _listing(empty) == [MARKER, "a"]
    with atomic_path(empty, is_dir=True) as tmp:  # now marked: replaced whole
        (tmp / "b").write_text("2")
    assert _listing(empty) == [MARKER, "b"]


def test_file_output_refuses_a_folder(tmp_path):
    # the issue's `fuse --report dir/`: the folder and everything in it used to be replaced by the file
    precious = _user_folder(tmp_path / "precious")
    with pytest.raises(InputError, match="is a folder, and this output is a file"):
        write_text(precious, "report")
    assert _listing(precious) == ["notes.txt"]
    marked = tmp_path / "marked"
    with atomic_path(marked, is_dir=True):
        pass
    with pytest.raises(InputError, match="is a folder"):  # even one a stage wrote: a file never replaces it
        write_text(marked, "report")


def test_folder_output_refuses_a_file(tmp_path):
    (tmp_path / "f").write_text("mine")
    with pytest.raises(InputError, match="is a file, not a folder"), atomic_path(tmp_path / "f", is_dir=True):
        pass
    assert (tmp_path / "f").read_text() == "mine"


def test_file_output_refuses_a_pipe(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        write_text(fifo, "x")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_link_is_replaced_not_what_it_points_to(tmp_path):
    kept = tmp_path / "kept.txt"
    kept.write_text("pointed to")
    (tmp_path / "out").symlink_to(kept)
    write_text(tmp_path / "out", "new")
    assert not (tmp_path / "out").is_symlink() and (tmp_path / "out").read_text() == "new"
    assert kept.read_text() == "pointed to"


@pytest.mark.parametrize("given", [".", "..", "/"])
def test_working_folder_and_above_are_refused(given, tmp_path, monkeypatch):
    # `--output .` used to end in a ValueError from an empty file name ('.')
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for is_dir in (False, True):
        with pytest.raises(InputError, match="working folder or one above it"), atomic_path(given, is_dir=is_dir):
            pass
    assert _listing(tmp_path) == ["work"] and _listing(work) == []


def test_parent_that_is_a_file_is_named(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InputError, match=f"its parent {tmp_path / 'afile'} is a file") as caught:
        write_text(tmp_path / "afile" / "sub" / "out.txt", "y")
    assert caught.value.path == str(tmp_path / "afile" / "sub" / "out.txt")


# ----------------------------------------------------------------------------- OS errors name the output


def test_failed_second_rename_puts_the_old_output_back(tmp_path, monkeypatch):
    target = tmp_path / "dir"
    with atomic_path(target, is_dir=True) as tmp:
        (tmp / "a").write_text("old")
    real, calls = os.replace, []

    def second_fails(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:  # target -> .old done; tmp -> target fails
            raise OSError(errno.EIO, "Input/output error", str(src), None, str(dst))
        real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", second_fails)
    with pytest.raises(OSError) as caught, atomic_path(target, is_dir=True) as tmp:
        (tmp / "b").write_text("new")
    assert caught.value.filename == str(target) and caught.value.filename2 is None  # not the temporary
    assert _listing(target) == [MARKER, "a"] and (target / "a").read_text() == "old"
    assert _listing(tmp_path) == ["dir"]


def test_read_only_folder_error_names_the_target(tmp_path, monkeypatch):
    target = tmp_path / "out.txt"
    write_text(target, "old")

    def read_only(src, dst):  # what rename(2) raises on a read-only file system
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(src), None, str(dst))

    monkeypatch.setattr(atomic.os, "replace", read_only)
    for path in (tmp_path / "new.txt", target):  # tmp -> target; target -> .old (both name the target)
        with pytest.raises(OSError, match="Read-only file system") as caught:
            write_text(path, "new")
        assert (caught.value.filename, caught.value.filename2) == (str(path), None)
    assert target.read_text() == "old" and _listing(tmp_path) == ["out.txt"]


def test_disk_full_while_writing_names_the_target(tmp_path):
    target = tmp_path / "d"
    with pytest.raises(OSError) as caught, atomic_path(target, is_dir=True) as tmp:
        (tmp / "part").write_text("x")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # write(2) gives no file name
    assert caught.value.filename == str(target)
    with pytest.raises(OSError) as caught, atomic_path(target, is_dir=True) as tmp:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp / "part"))
    assert caught.value.filename == str(target / "part")  # the file inside the output, not the temporary
    with pytest.raises(OSError, match="^disk full$"), atomic_path(target):
        raise OSError("disk full")  # no errno: left as it is
    assert _listing(tmp_path) == []


# ----------------------------------------------------------------------------- check_outputs


def test_check_outputs_refuses_an_output_that_is_or_holds_an_input(tmp_path):
    raw = _user_folder(tmp_path / "raw")
    for out in (raw, tmp_path):
        with pytest.raises(InputError, match=r"(is|contains) the input --raw") as caught:
            check_outputs({"--raw": str(raw)}, folders={"--output": out})
        assert caught.value.field == "--output"
    run = tmp_path / "a.trec"
    run.write_text("q Q0 d 1 1.0 t\n")
    with pytest.raises(InputError, match="is the input --runs"):
        check_outputs({"--runs": [str(tmp_path / "b.trec"), str(run)]}, files={"--output": run})
    with pytest.raises(InputError, match="is the input --repo"):
        check_outputs({"--repo": str(tmp_path)}, into={"--output": tmp_path})


def test_check_outputs_follows_links_of_inputs(tmp_path):
    raw = _user_folder(tmp_path / "raw")
    (tmp_path / "link").symlink_to(raw)
    with pytest.raises(InputError, match="is the input --raw"):
        check_outputs({"--raw": str(tmp_path / "link")}, folders={"--output": raw})


def test_check_outputs_refuses_overlapping_outputs(tmp_path):
    with pytest.raises(InputError, match="overlaps the output --markdown"):
        check_outputs({}, files={"--output": tmp_path / "x", "--markdown": tmp_path / "x"})
    with pytest.raises(InputError, match="overlaps the output --live-dir"):
        check_outputs({}, folders={"--model-out": tmp_path / "m", "--live-dir": tmp_path / "m" / "live"})


def test_check_outputs_allows_what_the_pipeline_does(tmp_path):
    # compare's markdown inside its --reports-root; evaluate's metrics inside its reports folder;
    # train's default checkpoint next to the model folder; nothing there yet
    root = tmp_path / "reports"
    root.mkdir()
    check_outputs({"--reports-root": root, "--params": tmp_path / "params.yaml"},
                  files={"--output": tmp_path / "compare.json", "--markdown": root / "compare.md"},
                  kinds={"--reports-root": "root"})
    with pytest.raises(InputError, match="lies inside the input --raw"):  # a dataset folder is no root
        check_outputs({"--raw": root}, files={"--output": root / "corpus.jsonl"})
    check_outputs({"--run": tmp_path / "r.trec"}, files={"--metrics": root / "x" / "m.json"},
                  into={"--reports": root / "x"})
    check_outputs({}, files={"--checkpoint": tmp_path / "m.checkpoint" / "state.pt"},
                  folders={"--model-out": tmp_path / "m"})


def test_check_outputs_refuses_before_the_stage_runs_what_the_rename_would(tmp_path):
    precious = _user_folder(tmp_path / "precious")
    with pytest.raises(InputError, match="did not write") as caught:
        check_outputs({}, folders={"--output": precious})
    assert caught.value.field == "--output"
    with pytest.raises(InputError, match="is a folder"):
        check_outputs({}, files={"--report": precious})
