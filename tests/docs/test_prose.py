"""No prose paragraph of README.md or docs/ stops mid-sentence (one did: "`train.base` names the model
fine-tuned"). A paragraph ends with sentence punctuation, a closing bracket or emphasis, a code span, or an
indented line, or leads into the code block right after it; headings, tables, lists and HTML are not prose."""

from __future__ import annotations

import re

from beir_fixtures import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def unfinished_paragraphs(text: str) -> list[str]:
    text = re.sub(r"^```.*?^```", "<CODE>", text, flags=re.DOTALL | re.MULTILINE)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.DOTALL)
    paragraphs = re.split(r"\n\s*\n", text)
    found = []
    for here, after in zip(paragraphs, paragraphs[1:] + [""]):
        here = here.rstrip()
        if (not here.strip() or re.match(r"\s*([#|<*-]|\d+\.\s)", here) or after.startswith(("<CODE>", "    "))
                or here.splitlines()[-1].startswith("    ")):
            continue
        if here[-1] not in ".:;?!)*`":
            found.append(here[-80:])
    return found


def test_a_paragraph_cut_mid_sentence_is_found():
    assert unfinished_paragraphs("# T\n\nA sentence. `x` names the model\n\nNext one.\n") == [
        "A sentence. `x` names the model"]
    assert unfinished_paragraphs("Run this:\n\n```bash\nx\n```\n\nThe bytes that\n\n```bash\ny\n```\n") == []


def test_no_paragraph_of_the_docs_stops_mid_sentence():
    cut = {str(page.relative_to(REPO)): found for page in PAGES
           if (found := unfinished_paragraphs(page.read_text(encoding="utf-8")))}
    assert cut == {}, cut
