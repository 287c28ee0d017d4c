"""The real-PDF body recall of benchmarks/pdf_fidelity.py: what it counts as the same words."""

from __future__ import annotations

from tests.benchmarks.scripts import load_script

pdf_fidelity = load_script("pdf_fidelity")
ngrams = pdf_fidelity.ngrams


def test_a_dash_between_letters_does_not_part_words() -> None:
    # GROBID's TEI joins a compound broken at a line end and writes an em dash as "-": the words are the same
    printed = "relying on retrospective self-report scales when found\u2014are often small in cause\u2013effect terms"
    grobid = "relying on retrospective selfreport scales when found-are often small in cause-effect terms"
    assert ngrams(printed, 4) == ngrams(grobid, 4)


def test_other_separators_still_part_words() -> None:
    assert ngrams("ranges 100\u2013500 ms and 10-fold cv", 2) == {
        ("ranges", "100"), ("100", "500"), ("500", "ms"), ("ms", "and"), ("and", "10"), ("10", "fold"),
        ("fold", "cv")}
    assert ngrams("a word - spaced dash", 3) == {("a", "word", "spaced"), ("word", "spaced", "dash")}
    # a line-end hyphen left in the text ("meth- ods") is still a broken word: recall sees unjoined breaks
    assert ngrams("the meth- ods", 2) == {("the", "meth"), ("meth", "ods")}
