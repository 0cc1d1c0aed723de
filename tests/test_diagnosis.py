from retrieval_lab.core.params import TokenizerParams
from retrieval_lab.diagnosis import CLASSES, diagnose, to_markdown
from retrieval_lab.tokenizer import Tokenizer

DOCS = {
    "battery": "Notebook power cell depletes fast",
    "snake": "Python snake install error habitat guide",
    "pip": "Fixing pip when python packages refuse to build",
    "printer": "Printer queue with spooler error",
    "printer_fix": "Clear the printer spooler queue and restart it",
    "wifi": "Wireless adapter drops often",
    "wifi_fix": "Reset the wireless adapter driver to keep the connection",
    "dup1": "Reset the wireless adapter driver to keep the connection",
    "filler1": "Monitor flicker at low refresh rate",
    "filler2": "Keyboard keys repeat twice",
}
QUERIES = {
    "none": "anything at all",
    "gap": "laptop battery drains",
    "homonymy": "python install error",
    "late": "printer spooler stuck",
    "missing": "wireless connection drops",
    "fine": "keyboard keys repeat",
}
QRELS = {
    "none": {"battery": 1},
    "gap": {"battery": 1},
    "homonymy": {"pip": 1},
    "late": {"printer_fix": 1},
    "missing": {"wifi_fix": 1},
    "fine": {"filler2": 1},
    "nopos": {"filler1": 0},
}
RUN = {
    "none": {},
    "gap": {"wifi_fix": 3.0, "dup1": 2.9, "battery": 1.0},  # near-duplicate top 2
    "homonymy": {"snake": 3.0, "filler1": 2.0, "pip": 1.0},  # positive at rank 3 but homonymy wins
    "late": {"printer": 3.0, "filler1": 2.0, "printer_fix": 1.0},  # both share printer, spooler
    # the positive is absent; the top (wireless, drop) shares no more query tokens than it does
    "missing": {"wifi": 3.0, "dup1": 2.0, "filler1": 1.0},
    "fine": {"filler2": 1.0},
}


def diagnosis_of(k=2):
    tokenizer = Tokenizer(TokenizerParams())
    return diagnose(QRELS, RUN, QUERIES, DOCS.__getitem__, tokenizer.tokenize, k=k)


def run_diagnosis(k=2):
    """diagnosis.json's object: the file's shape is what these tests pin."""
    return diagnosis_of(k).to_json()


def test_each_class_is_triggered_by_its_constructed_query():
    result = run_diagnosis()
    classes = {q["query"]: q["class"] for q in result["queries"]}
    assert classes == {"none": "no_candidates", "gap": "vocabulary_gap", "homonymy": "surface_homonymy",
                       "late": "late_rank", "missing": "not_retrieved"}
    assert set(classes.values()) == set(CLASSES)
    # "fine" has its positive at rank 1, "nopos" has no positive: neither is diagnosed
    assert result["summary"] == {"queries_with_positive": 6, "diagnosed": 5, "no_candidates": 1,
                                 "vocabulary_gap": 1, "surface_homonymy": 1, "late_rank": 1,
                                 "not_retrieved": 1, "near_duplicates": 1}


def test_details_of_a_diagnosed_query():
    by_id = {q["query"]: q for q in run_diagnosis()["queries"]}
    homonymy = by_id["homonymy"]
    assert homonymy["first_positive_rank"] == 3
    assert homonymy["positive_ranks"] == {"pip": 3}
    # python, install, error shared with the top; only python with the positive
    assert homonymy["query_tokens_shared"] == {"top": 3, "best_positive": 1}
    assert homonymy["top"]["doc"] == "snake" and homonymy["top"]["relevance"] is None
    assert homonymy["top"]["shared_tokens"] == ["error", "instal", "python"]  # stemmed
    assert by_id["missing"]["positive_ranks"] == {"wifi_fix": None}
    assert by_id["none"]["top"] is None and by_id["none"]["retrieved"] == 0


def test_near_duplicates_flag_top_k_twins_only():
    by_id = {q["query"]: q for q in run_diagnosis(k=2)["queries"]}
    assert by_id["gap"]["near_duplicates"] == [["wifi_fix", "dup1", 1.0]]  # same text
    # wifi vs dup1: {wireless, adapt, drop, often} vs {reset, wireless, adapt, driver, keep,
    # connect} share 2 of 8 stems: 0.25 < 0.9
    assert by_id["missing"]["near_duplicates"] == []
    by_id = {q["query"]: q for q in run_diagnosis(k=1)["queries"]}
    assert by_id["gap"]["near_duplicates"] == []  # the twin is outside the top 1


def test_markdown_lists_counts_and_examples():
    text = to_markdown(diagnosis_of(), title="Diag")
    assert text.startswith("# Diag")
    assert "| surface_homonymy | 1 |" in text
    assert "## late_rank (1)" in text
    assert "printer_fix: rank 3" in text
    assert "wifi_fix: not retrieved" in text


def test_the_typed_result_agrees_with_its_json():
    result = diagnosis_of()
    assert result.counts() == {"no_candidates": 1, "vocabulary_gap": 1, "surface_homonymy": 1, "late_rank": 1,
                               "not_retrieved": 1}
    homonymy = next(f for f in result.failures if f.query == "homonymy")
    assert (homonymy.cls, homonymy.first_positive_rank, homonymy.top.doc, homonymy.top.relevance) == (
        "surface_homonymy", 3, "snake", None)
    assert result.to_markdown("Diag") == to_markdown(result, "Diag")
