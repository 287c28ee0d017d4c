"""The document record: pages of offsets and the evidence sentence around an answer."""

from __future__ import annotations

import re

import pytest

from mlpsych.documents import Document

SENTENCES = ["Participants (N = 120) completed the survey.", "We trained a random forest in R 4.2.1!",
             "Was it better than logistic regression?", "3 models were compared.", "(Table 2) shows the results."]
TEXT = "  ".join(SENTENCES)


@pytest.mark.parametrize("index", range(len(SENTENCES)))
def test_the_evidence_is_the_sentence_holding_the_answer(index):
    doc = Document(id="d", text=TEXT)
    sentence = SENTENCES[index]
    start = TEXT.index(sentence)
    for word in re.finditer(r"\S+", sentence):
        assert doc.sentence_around(start + word.start(), start + word.end()) == sentence


def test_an_answer_across_sentences_gets_both_and_long_evidence_is_cut_around_it():
    doc = Document(id="d", text=TEXT)
    start, end = TEXT.index("survey"), TEXT.index("forest") + len("forest")
    assert doc.sentence_around(start, end) == " ".join(SENTENCES[:2])
    long = Document(id="l", text="word " * 500 + "the answer " + "word " * 500 + ".")
    at = long.text.index("the answer")
    evidence = long.sentence_around(at, at + 10, max_chars=100)
    assert "the answer" in evidence and len(evidence) <= 110 + len("…  …")


def test_each_text_has_its_own_sentences():
    """Sentence bounds are found once per text: another text, or the same id with another text, is not confused."""
    first = Document(id="d", text=TEXT)
    assert first.sentence_around(0, 5) == SENTENCES[0]
    other = Document(id="d", text="A different paper. It used SPSS.")
    assert other.sentence_around(other.text.index("SPSS"), len(other.text) - 1) == "It used SPSS."
    assert first.sentence_around(0, 5) == SENTENCES[0]


def test_long_evidence_is_cut_at_whole_words_and_the_cut_is_marked():
    """A sentence longer than the limit (a table read as one sentence) is cut around the answer: at whole words,
    never inside one ("quares regression problem" for "least-squares"), and marked as cut."""
    words = [f"{'x' * (k % 7)}w{k}" for k in range(400)]
    text = " ".join(words) + "."
    doc = Document(id="d", text=text)
    for k in range(60, 340, 3):
        start = text.index(f" {words[k]} ") + 1
        evidence = doc.sentence_around(start, start + len(words[k]), max_chars=100)
        assert evidence.startswith("… ") and evidence.endswith(" …") and words[k] in evidence
        inner = evidence[2:-2]
        assert f" {inner} " in f" {text[:-1]} " and len(inner) <= 100 + len(words[k])


def test_scholarly_abbreviations_do_not_end_the_evidence_sentence():
    """"et al. (2011)", "Fig. 1a", "(p. 259)", "(e.g. Smith)" and "vs." keep the evidence sentence whole (a coder
    read "(2011) define ..."); it still ends after "etc." or a capital letter ("in R.")."""
    sentences = ["Cameron et al. (2011) define positive practices as shown in Fig. 1a and Figs. 2-3 (p. 259).",
                 "Beliefs (vs. Competence) were coded by hand (e.g. Mottus et al., in press) as in Eq. 4.",
                 "Models were fitted with the randomForest package in R.",
                 "Tokens were lemmatized, tagged, etc.",
                 "The end."]
    text = " ".join(sentences)
    doc = Document(id="p", text=text)
    for sentence in sentences:
        for word in re.finditer(r"[A-Za-z]{4,}", sentence):
            start = text.index(sentence) + word.start()
            assert doc.sentence_around(start, start + len(word.group())) == sentence


def test_a_heading_on_its_line_is_not_part_of_the_evidence_after_it():
    """"2.4 Models We used two models." and "Statement of Relevance This research ..." were the evidence a coder
    read: the heading's line ran into the sentence after it. A line that goes on in the next (a title broken after
    "and", a sentence broken before a name) and a heading ending in a colon still join."""
    units = ["2.4 Models", "We used two models.",  # the heading's own words, then the sentence after it
             "Statement of Relevance", "This research is likely to be of interest to all researchers.",
             "Very large-scale Evolutionary and Selective Pressure Analyses",
             "The forests were trained by the team of Oslo University Hospital for all of us in the group of Smith "
             "and Jones at the Department of Psychology.",
             "Participants: Nurses of three wards took part."]
    text = "\n".join(units[:4]) + "\nVery large-scale Evolutionary and\nSelective Pressure Analyses\n" + \
        units[5].replace(" Oslo", "\nOslo") + "\n" + units[6].replace(": ", ":\n")
    doc = Document(id="p", text=text)
    for unit in units:
        for word in re.finditer(r"[A-Za-z]{4,}", unit):
            at = _find(text, unit, word)
            assert doc.sentence_around(at, at + len(word.group())) == unit, (unit, word.group())


def _find(text: str, unit: str, word: re.Match) -> int:
    """Where ``word`` of ``unit`` is in ``text``, whose line breaks stand for some of ``unit``'s spaces."""
    loose = re.escape(unit).replace("\\ ", "\\s")
    return re.search(loose, text).start() + word.start()


def test_notes_are_what_ingest_noted_of_a_text_it_read():
    """A texts JSONL edited by hand may hold one note as a string: it is one note, not one note per letter."""
    assert Document(id="a", text="t").notes == []
    assert Document(id="a", text="t", meta={"warnings": ["pages without text: 2", "very long"]}).notes == [
        "pages without text: 2", "very long"]
    assert Document.from_dict({"id": "a", "text": "t", "meta": {"warnings": "read as Windows-1252"}}).notes == [
        "read as Windows-1252"]
