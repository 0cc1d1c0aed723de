import pytest

from retrieval_lab.core.errors import InputError
from retrieval_lab.core.params import TokenizerParams
from retrieval_lab.tokenizer import Tokenizer, load_stopwords

PLAIN = TokenizerParams(stopwords=None, stemmer=None)


def test_defaults_lowercase_drop_lucene_stopwords_and_stem():
    tok = Tokenizer(TokenizerParams())
    # "The", "of", "and" are in Lucene's English stop set; Snowball: running->run, cells->cell.
    assert tok.tokenize("The Running of T-cells and B-cells") == ["run", "t", "cell", "b", "cell"]


def test_accented_letters_are_word_characters_and_nfc_normalised():
    tok = Tokenizer(PLAIN)
    composed = "Café naïve Größe"
    decomposed = "Cafe\u0301 nai\u0308ve Gro\u0308\u00dfe"  # e + combining acute, i + diaeresis ...
    assert tok.tokenize(composed) == ["café", "naïve", "größe"]
    assert tok.tokenize(decomposed) == ["café", "naïve", "größe"]


def test_stemmer_handles_accents():
    tok = Tokenizer(TokenizerParams(stopwords=None, stemmer="french"))
    # Snowball French: "élégantes" -> "éleg", "réseaux" -> "réseau"
    assert tok.tokenize("élégantes réseaux") == ["éleg", "réseau"]


def test_no_lowercase_keeps_case_and_stopwords_none_keeps_everything():
    tok = Tokenizer(TokenizerParams(lowercase=False, stopwords=None, stemmer=None))
    assert tok.tokenize("The BRCA1 gene, the") == ["The", "BRCA1", "gene", "the"]


def test_stopword_file(tmp_path):
    path = tmp_path / "stop.txt"
    path.write_text("# my list\nGene\n\nprotein\n", encoding="utf-8")
    tok = Tokenizer(TokenizerParams(stopwords=str(path), stemmer=None))
    # "Gene" is matched after lowercasing; "the" is kept since the file replaces the built-in list.
    assert tok.tokenize("the gene encodes a PROTEIN") == ["the", "encodes", "a"]


def test_stopword_file_with_two_words_on_a_line_names_the_line(tmp_path):
    path = tmp_path / "stop.txt"
    path.write_text("gene\nbad line\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_stopwords(str(path))
    assert (err.value.path, err.value.line, err.value.field) == (str(path), 2, "tokenizer.stopwords")


def test_builtin_english_is_lucene_33_words():
    words = load_stopwords("english")
    assert len(words) == 33 and {"the", "such", "will"} <= words and "he" not in words


@pytest.mark.parametrize("setting, field", [
    ({"stopwords": "klingon"}, "tokenizer.stopwords"),
    ({"stopwords": "missing/stop.txt"}, "tokenizer.stopwords"),  # the schema takes it for a file: read here
    ({"stemmer": "klingon"}, "tokenizer.stemmer"),
    ({"pattern": "(a)b"}, "tokenizer.pattern"),
    ({"pattern": "[a"}, "tokenizer.pattern"),
    ({"pattern": r"\w*"}, "tokenizer.pattern"),
])
def test_bad_params_name_the_field(setting, field):
    # refused when the params are built (core.params), in code as from a file; a missing file when read
    with pytest.raises(InputError) as err:
        Tokenizer(TokenizerParams(**setting))
    assert err.value.field == field


def test_every_stopword_language_of_the_schema_is_a_list_bm25s_ships():
    from retrieval_lab.core.rules import STOPWORD_LANGUAGES
    from retrieval_lab.tokenizer import BM25S_LISTS, _builtin_stopwords

    assert set(BM25S_LISTS) == set(STOPWORD_LANGUAGES) == set(_builtin_stopwords())


def test_unknown_stemmer_lists_choices():
    with pytest.raises(InputError, match="porter"):
        Tokenizer(TokenizerParams(stemmer="klingon"))


def test_repeated_calls_give_the_same_tokens():
    tok = Tokenizer(TokenizerParams())
    # the second call reads memoised stems and stopword decisions
    assert tok.tokenize("The cells divided") == tok.tokenize("The cells divided") == ["cell", "divid"]


def test_the_ascii_fast_path_gives_the_regex_tokens_for_every_ascii_character():
    """translate + split must cut exactly where the word-run regex does: every ASCII character, in runs."""
    import random
    import re

    chars = [chr(i) for i in range(128)]
    rng = random.Random(0)
    texts = ["".join(rng.choices(chars, k=rng.randint(0, 80))) for _ in range(2000)] + ["", "a_b-c d9 __ \x1c x"]
    for pattern in (r"(?u)\b\w+\b", r"\w+"):
        tok = Tokenizer(TokenizerParams(pattern=pattern, lowercase=False, stopwords=None, stemmer=None))
        for text in texts:
            assert tok.split(text) == re.findall(pattern, text), repr(text)
    assert Tokenizer(PLAIN).split("Don't STOP_me now2") == ["don", "t", "stop_me", "now2"]


def test_finalise_many_is_finalise_of_each_and_the_lists_are_read_without_importing_bm25s():
    import subprocess
    import sys

    tok = Tokenizer(TokenizerParams())
    words = ["the", "running", "cells", "of", "élégantes", "x"]
    assert tok.finalise_many(words) == [tok.finalise(w) for w in words] == ["", "run", "cell", "", "élégant", "x"]
    code = ("import sys; from retrieval_lab.tokenizer import load_stopwords; w = load_stopwords('english'); "
            "print(len(w), 'the' in w, 'bm25s' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.split() == ["33", "True", "False"]


# characters where a shortcut could part from the regex: Unicode letters and digits (Greek final sigma, the
# Kelvin sign that NFC turns into "K", "İ" that lowercases to two code points), combining marks, punctuation
# and spaces outside ASCII ("’", "–", NBSP), "=" + U+0338 that NFC composes into "≠", numbers such as "½"
_TRICKY = list("aZ_9 -.'\t\n\x00\x1c") + ["Σ", "σ", "ς", "\u212a", "İ", "é", "e\u0301", "\u0301", "’", "–", "±",
                                           "\u00a0", "\u3000", "=\u0338", "½", "²", "β", "中", "\u200d", "ǅ"]


@pytest.mark.parametrize("lowercase", [True, False])
@pytest.mark.parametrize("pattern", [r"(?u)\b\w+\b", r"\w+", r"[a-z]+"])
def test_pieces_then_piece_tokens_are_split(pattern, lowercase):
    """The build's two-stage split (pieces, then each piece's tokens) gives ``split``'s tokens in order."""
    import random

    rng = random.Random(1)
    texts = ["".join(rng.choices(_TRICKY, k=rng.randint(0, 40))) for _ in range(3000)]
    texts += ["ΑΣ'Α ΟΔΟΣ. x=\u0338y", "patient’s 10–20 ±"]
    tok = Tokenizer(TokenizerParams(pattern=pattern, lowercase=lowercase, stopwords=None, stemmer=None))
    for text in texts:
        assert [t for piece in tok.pieces(text) for t in tok.piece_tokens(piece)] == tok.split(text), repr(text)
    assert Tokenizer(TokenizerParams(stopwords=None, stemmer=None)).pieces("patient’s 10–20 ± x") == [
        "patient’s", "10–20", "±", "x"]  # cut at ASCII only: a piece may hold several tokens, or none
