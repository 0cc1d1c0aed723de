"""The console script's --help: pipeline stages listed apart from the teaching and checking tools."""

from __future__ import annotations

import re

import pytest
import yaml
from beir_fixtures import REPO

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
    assert sorted(listed) == sorted(cli.COMMANDS) and len(listed) == len(set(listed)) == 19
    for name in listed:  # and each has its own parser
        with pytest.raises(SystemExit) as info:
            cli.main([name, "--help"])
        assert info.value.code == 0 and capsys.readouterr().out.startswith(f"usage: retrieval-lab {name} ")


def test_the_pipeline_group_is_exactly_what_dvc_yaml_runs():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    cmds = [stage.get("do", stage)["cmd"] for stage in stages.values()]
    used = {re.match(r"retrieval-lab (\S+)", cmd).group(1) for cmd in cmds}
    assert used == set(cli.GROUPS["pipeline stages (dvc.yaml runs these)"])
