"""The console script: --help lists pipeline stages apart from the teaching and checking tools; every
command keeps freed memory for reuse."""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys

import pytest
import yaml
from beir_fixtures import REPO
from command_runner import subcommand_parsers

from retrieval_lab import cli


def _sections(text: str) -> dict[str, list[str]]:
    """help section title -> the command names listed in it (rows start with two spaces and a name)."""
    sections = {}
    for block in text.split("\n\n"):
        title, *rows = block.splitlines()
        sections[title.rstrip(":")] = [m.group(1) for row in rows if (m := re.match(r"  ([a-z][\w-]*)", row))]
    return sections


def test_help_lists_every_command_once_in_its_group(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    sections = _sections(capsys.readouterr().out)
    assert sections["teaching and checking"] == ["check-loss", "mask-demo", "check-resume"]
    for title, commands in cli.GROUPS.items():
        assert sections[title] == list(commands), title
    listed = [name for title in cli.GROUPS for name in sections[title]]
    assert sorted(listed) == sorted(cli.COMMANDS) and len(listed) == len(set(listed)) == 25
    for name in listed:  # and each has its own parser
        with pytest.raises(SystemExit) as info:
            cli.main([name, "--help"])
        assert info.value.code == 0 and capsys.readouterr().out.startswith(f"usage: retrieval-lab {name} ")


def test_a_command_is_parsed_by_its_own_parser_alone_with_the_full_parsers_options_and_help(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "100")
    full = subcommand_parsers(cli.build_parser())
    for name in cli.COMMANDS:
        alone = subcommand_parsers(cli.build_parser(name))
        assert list(alone) == [name]
        assert alone[name].format_help() == full[name].format_help(), name
    built = []
    real = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda command=None: built.append(command) or real(command))
    with pytest.raises(SystemExit):
        cli.main(["evaluate", "--help"])
    with pytest.raises(SystemExit) as info:
        cli.main(["evaluat"])  # not a command: the full parser, whose error lists every command
    assert built == ["evaluate", None] and info.value.code == 2
    err = capsys.readouterr().err
    assert all(f"'{name}'" in err for name in cli.COMMANDS), err


def test_the_pipeline_group_is_exactly_what_dvc_yaml_runs():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    cmds = [stage.get("do", stage)["cmd"] for stage in stages.values()]
    used = {re.match(r"retrieval-lab (\S+)", cmd).group(1) for cmd in cmds}
    assert used == set(cli.STAGES) == set(cli.GROUPS[cli.PIPELINE]) | {"evaluate"}


def test_help_lists_first_what_a_newcomer_runs_first(capsys, monkeypatch):
    # measuring runs before the pipeline, the pipeline before the tools, teaching last; the description
    # shows the commands for a BEIR folder of one's own, each of which --help then lists
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    titles = list(cli.GROUPS)
    assert titles[0].startswith("measure your runs") and titles[1] == cli.PIPELINE
    assert titles[-1] == "teaching and checking"
    assert list(cli.GROUPS[titles[0]]) == ["score-runs", "compare-runs", "page", "evaluate", "diagnose"]
    assert [text.index(f"\n{t}:") for t in titles] == sorted(text.index(f"\n{t}:") for t in titles)
    shown = re.findall(r"^  retrieval-lab (\S+)", text, re.MULTILINE)
    assert shown == ["retrieve", "retrieve", "score-runs", "compare-runs", "diagnose"]
    assert set(shown) <= set(cli.COMMANDS)


FAULTS_AFTER_FREE = """
import resource, sys
from retrieval_lab.cli import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
block = bytearray(64 << 20); del block  # the first 64 MiB block faults its pages in either way
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    block = bytearray(64 << 20); del block
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _glibc() -> bool:
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (AttributeError, ValueError, OSError):  # no confstr (Windows), or not this name
        return False


@pytest.mark.skipif(not _glibc(), reason="mallopt's thresholds are glibc's")
def test_a_freed_block_is_reused_without_new_page_faults():
    def faults(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", FAULTS_AFTER_FREE, mode], capture_output=True, text=True,
                              check=True)
        return int(done.stdout)

    # 64 MiB is over glibc's highest automatic mmap threshold (32 MiB) and under the kept one (256 MiB):
    # by default each of the 4 blocks is mapped afresh, 64 MiB / 4 KiB = 16,384 page faults each, 65,536
    # in all (4 x 1,024 with 64 KiB pages), and unmapped at free. Kept, the heap hands back the pages the
    # first block faulted in.
    pages = 4 * (64 << 20) // resource.getpagesize()
    assert faults("default") >= 0.9 * pages
    assert faults("keep") < 0.01 * pages


def test_every_command_keeps_freed_memory_before_it_starts(monkeypatch):
    class Parsed(Exception):
        pass

    calls = []

    def parser(command=None):
        calls.append("parse")
        raise Parsed

    monkeypatch.setattr(cli, "keep_freed_memory", lambda: calls.append("keep"))
    monkeypatch.setattr(cli, "build_parser", parser)
    with pytest.raises(Parsed):
        cli.main(["generate"])
    assert calls == ["keep", "parse"]
