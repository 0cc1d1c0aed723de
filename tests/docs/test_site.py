"""The documentation site builds strictly (no broken link, missing anchor or orphan page) and README's
links resolve; README stays a short entry point."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from beir_fixtures import REPO

README = REPO / "README.md"


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], capture_output=True, text=True, check=False, timeout=120,
                          env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})


def test_the_site_builds_in_strict_mode(tmp_path):
    result = _build(REPO / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "parameters" / "index.html").is_file()
    assert (tmp_path / "site" / "lab-notes" / "index.html").is_file()


def _tiny_site(tmp_path: Path, pages: dict[str, str], nav: list[str]) -> Path:
    """A site with the repository's own settings (theme, validation, extensions) and these pages."""
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    config.pop("exclude_docs", None)
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in pages.items():
        (docs / name).write_text(text)
    config.update(docs_dir=str(docs), nav=nav)
    path = tmp_path / "mkdocs.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("pages, nav, said", [
    ({"index.md": "# A\n\n[b](b.md)\n", "b.md": "# B\n"}, ["index.md", "b.md"], None),
    ({"index.md": "# A\n\n[gone](missing.md)\n"}, ["index.md"], "missing.md"),
    ({"index.md": "# A\n\n[b](b.md#nowhere)\n", "b.md": "# B\n"}, ["index.md", "b.md"], "nowhere"),
    ({"index.md": "# A\n", "orphan.md": "# O\n"}, ["index.md"], "orphan.md"),
], ids=["clean", "broken-link", "missing-anchor", "orphan-page"])
def test_the_strict_build_fails_on_a_broken_link_a_missing_anchor_or_an_orphan_page(tmp_path, pages, nav, said):
    result = _build(_tiny_site(tmp_path, pages, nav), tmp_path / "site")
    if said is None:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode != 0 and said in result.stderr, result.stderr


def _slug(heading: str) -> str:
    """Python-Markdown's toc slug (GitHub's for plain words): lower case, punctuation dropped, spaces to -."""
    text = re.sub(r"[`*_\[\]()]", "", heading).strip().lower()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text))


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)}


def readme_links() -> list[str]:
    text = re.sub(r"```.*?```", "", README.read_text(encoding="utf-8"), flags=re.DOTALL)
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_every_link_in_the_readme_resolves():
    links = readme_links()
    assert len(links) >= 10  # the README is a hub of links into the docs
    broken = []
    for link in links:
        if re.match(r"[a-z]+://", link):
            continue  # no network in the test; the README links only into the repository
        target, _, anchor = link.partition("#")
        path = (README.parent / target) if target else README
        if not path.exists():
            broken.append(f"{link}: no such file")
        elif anchor and (path.suffix != ".md" or anchor not in _anchors(path)):
            broken.append(f"{link}: no heading #{anchor} in {path.name}")
    assert not broken, broken


def test_the_link_check_sees_a_missing_file_and_a_missing_anchor():
    assert _slug("The review gate and pull requests") == "the-review-gate-and-pull-requests"
    assert _slug("Seen and unseen strata") in _anchors(REPO / "docs" / "statistics.md")
    assert "no-such-heading" not in _anchors(REPO / "docs" / "statistics.md")


def test_the_readme_is_a_short_entry_point():
    data = README.read_bytes()
    assert data.count(b"\n") <= 250, data.count(b"\n")
    assert len(data) <= 20 * 1024, len(data)


def test_every_page_of_docs_is_in_the_nav_or_deliberately_excluded():
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())

    def pages(nav):
        for item in nav:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            yield from (pages(value) if isinstance(value, list) else [value])

    listed = set(pages(config["nav"])) | set(config["exclude_docs"].split())
    on_disk = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    assert on_disk == listed
