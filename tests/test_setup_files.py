"""The setup commands agree everywhere: README, .ci/run, Dockerfile and the PR workflow."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from beir_fixtures import REPO

INSTALL = 'python3.11 -m venv .venv && .venv/bin/pip install -q -e ".[dev]"'


def readme_commands() -> list[str]:
    block = re.search(r"## Quick start.*?```bash\n(.*?)```", (REPO / "README.md").read_text(), re.DOTALL).group(1)
    return [line for line in block.splitlines() if line and not line.startswith("#")]


def test_readme_has_exactly_two_commands_sharing_the_install_step():
    run, test = readme_commands()
    assert run.startswith(INSTALL) and run.endswith("dvc repro")
    assert test.startswith(INSTALL) and "pytest" in test


def test_ci_runs_the_readme_test_command_verbatim_and_flags_no_tests():
    ci = (REPO / ".ci" / "run").read_text()
    assert readme_commands()[1] in ci.splitlines()
    assert '"$rc" -eq 5' in ci  # pytest's "collected no tests" is neither a pass nor hidden


def test_ci_and_the_image_install_a_c_compiler_for_the_bm25_loop_before_the_install():
    """pip compiles retrievers/_bm25_kernel.c (pyproject's ext-modules): without gcc and Python's headers the
    install fails."""
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    test = lines.index(readme_commands()[1])
    assert any("apt-get install -y" in line and "gcc libc6-dev python3.11-dev" in line for line in lines[:test])
    docker = (REPO / "Dockerfile").read_text()
    assert docker.index("gcc libc6-dev") < docker.index("pip install") and "python3.11-dev" in docker
    assert "retrievers/_bm25_kernel.c" in (REPO / "pyproject.toml").read_text()


def test_ci_installs_chromium_before_the_tests_and_runs_them_as_ci():
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    test = lines.index(readme_commands()[1])
    assert any("apt-get install -y" in line and "chromium" in line for line in lines[:test])
    assert 'export CI="${CI:-true}"' in lines[:test]  # browser tests fail, never skip, without Chromium


def test_dockerfile_pins_its_base_and_installs_like_the_readme():
    docker = (REPO / "Dockerfile").read_text()
    bases = re.findall(r"^ARG BASE=(\S+)", docker, re.MULTILINE) + re.findall(r"--build-arg BASE=(\S+)", docker)
    assert bases and all(":" in b and not b.endswith(":latest") for b in bases), bases
    assert re.search(r"^FROM \$\{BASE\}$", docker, re.MULTILINE)
    assert "nvidia/cuda:" in bases[0] and "runtime" in bases[0]  # the default image is the CUDA one
    install = INSTALL.replace('".[dev]"', '".[${EXTRAS}]"')
    assert f"RUN {install}" in docker and "ARG EXTRAS=dev,gpu" in docker
    assert 'ENTRYPOINT ["dvc", "repro"]' in docker


def test_pr_workflow_installs_like_the_readme():
    workflow = (REPO / ".github" / "workflows" / "pr-report.yml").read_text()
    assert INSTALL in workflow
    for step in ("dvc pull", "dvc repro", "dvc push", "retrieval-lab report --base"):
        assert step in workflow


def test_torch_is_pinned_and_faiss_gpu_is_an_extra():
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"torch==2.13.0"' in pyproject and '"faiss-cpu==1.15.1"' in pyproject
    assert 'gpu = ["faiss-gpu==1.15.1"]' in pyproject


def test_the_install_gives_dvc_the_c_yaml_parser():
    # ruamel.yaml 0.19 moved its C parser to an extra DVC does not ask for: without it DVC reads dvc.yaml,
    # dvc.lock and params.yaml in pure Python on every command (a third of `dvc status`'s CPU on this pipeline)
    from ruamel.yaml import YAML
    from ruamel.yaml.cyaml import CParser

    assert YAML(typ="safe").Parser is CParser


def test_a_passing_session_leaves_no_scratch_folder_and_a_failing_one_keeps_it(tmp_path):
    # the suite writes about 4 GB under pytest's temporary root (two pipeline clones): kept after every
    # session, three sessions of it filled a disk. The project's pytest settings, on a one-test file:
    def session(verdict: str) -> list[str]:
        root = tmp_path / verdict
        root.mkdir()
        (root / "test_one.py").write_text(f"def test_one(tmp_path):\n    (tmp_path / 'x').write_text('x')\n"
                                          f"    assert {verdict}\n")
        env = {**os.environ, "PYTEST_DEBUG_TEMPROOT": str(root)}
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c",
                        str(REPO / "pyproject.toml"), "--rootdir", str(root), str(root / "test_one.py")],
                       cwd=root, env=env, capture_output=True, check=False)
        return sorted(p.name for p in root.glob("pytest-of-*/pytest-[0-9]*"))

    assert session("True") == []
    assert session("False") == ["pytest-0"]
