"""The released code's post-processing (reading/released.py), rule by rule, including its odd consequences."""

from __future__ import annotations

from mlpsych.answers import Answer, Span
from mlpsych.documents import Document
from mlpsych.reading.released import (
    joined_llm_input,
    per_entity_answers,
    released_answers,
    trim_bounds,
    union_of_models,
)

TEXT = (
    "We used Random forest and SVM (support vector machines). "
    "Later, random forest models beat the SVM baseline; R was used for the analysis."
)


def doc(text: str = TEXT, pages: list[tuple[int, int]] | None = None) -> Document:
    return Document(id="p1", text=text, pages=pages or [])


def sp(piece: str, score: float, occurrence: int = 0, model: str = "m1", text: str = TEXT,
       bridge: str | None = None) -> Span:
    """The span of the ``occurrence``-th appearance of ``piece`` in ``text``."""
    start = -1
    for _ in range(occurrence + 1):
        start = text.index(piece, start + 1)
    return Span("p1", "q1", model, piece, start, start + len(piece), score, bridge_entity=bridge)


def at(start: int, end: int, score: float, text: str = TEXT) -> Span:
    return Span("p1", "q1", "m1", text[start:end], start, end, score)


def texts(answers: list[Answer]) -> list[str]:
    return [a.text for a in answers]


# -- 1. score filter ------------------------------------------------------------------------------------


def test_score_filter_keeps_the_first_answer_even_at_zero():
    answers = released_answers(doc(), [sp("SVM", 0.0), sp("baseline", 0.0), sp("analysis", -0.1)])
    assert texts(answers) == ["SVM"]
    assert answers[0].score == 0.0


def test_score_filter_rounds_to_five_decimals():
    spans = [sp("SVM", 0.9), sp("baseline", 0.000004), sp("analysis", 0.00001)]
    assert texts(released_answers(doc(), spans)) == ["SVM", "analysis"]


def test_filtered_answers_do_not_merge_into_kept_ones():
    # "Random forest and" would grow "Random forest" if it survived the filter.
    spans = [sp("Random forest", 0.9), sp("Random forest and", 0.000001)]
    answers = released_answers(doc(), spans)
    assert texts(answers) == ["Random forest"]
    assert len(answers[0].spans) == 1


# -- 2. merging: positions ------------------------------------------------------------------------------


def test_touching_spans_merge():
    text = "alpha beta gamma"
    answers = released_answers(doc(text), [at(0, 5, 0.9, text), at(5, 10, 0.5, text)])
    assert texts(answers) == ["alpha beta"]
    assert (answers[0].start, answers[0].end) == (0, 10)
    assert answers[0].score == 0.9
    assert len(answers[0].spans) == 2


def test_spans_one_character_apart_do_not_merge():
    text = "alpha beta gamma"
    answers = released_answers(doc(text), [at(0, 5, 0.9, text), at(6, 10, 0.5, text)])
    assert texts(answers) == ["alpha", "beta"]


def test_overlap_grows_the_kept_answer_and_keeps_its_score():
    a = sp("Random forest", 0.4)
    b = sp("forest and SVM", 0.3)
    answers = released_answers(doc(), [a, b])
    assert texts(answers) == ["Random forest and SVM"]
    assert (answers[0].start, answers[0].end) == (a.start, b.end)
    assert answers[0].score == 0.4


def test_grown_text_is_re_read_from_the_document():
    # Span texts are ignored when growing: the grown text is doc.text[start:end].
    a = sp("Random forest", 0.9)
    b = Span("p1", "q1", "m1", "IGNORED", a.end - 3, a.end + 4, 0.5)
    assert texts(released_answers(doc(), [a, b])) == ["Random forest and"]


def test_duplicate_spans_from_overlapping_windows_become_one_answer():
    answers = released_answers(doc(), [sp("SVM", 0.8), sp("SVM", 0.8)])
    assert texts(answers) == ["SVM"]
    assert len(answers[0].spans) == 2


def test_grown_answers_are_not_merged_again_with_each_other():
    text = "aaaa bbbb cccc dddd"
    first, second, bridge = at(0, 4, 0.9, text), at(10, 14, 0.8, text), at(3, 11, 0.7, text)
    answers = released_answers(doc(text), [first, second, bridge])
    # The bridge grows the first only; the first now overlaps the second, but kept answers are not re-merged.
    assert texts(answers) == ["aaaa bbbb c", "cccc"]


# -- 2. merging: text containment (case-sensitive substrings) --------------------------------------------


def test_one_letter_answer_is_swallowed_case_sensitively():
    spans = [sp("Random forest", 0.9), sp("R", 0.5, occurrence=1)]  # "R was used", not overlapping
    assert spans[1].start > spans[0].end
    assert texts(released_answers(doc(), spans)) == ["Random forest"]


def test_lowercase_letter_inside_a_word_is_swallowed_too():
    # "r" is a substring of "Random forest" (fo-r-est), so it goes, though it is no word of it.
    r_at = TEXT.index("Later") + 4  # the "r" of "Later"
    r = at(r_at, r_at + 1, 0.5)
    assert r.text == "r"
    assert texts(released_answers(doc(), [sp("Random forest", 0.9), r])) == ["Random forest"]


def test_containment_is_case_sensitive():
    spans = [sp("Random forest", 0.9), sp("random forest", 0.5), sp("RF", 0.4, text=TEXT + " RF")]
    d = doc(TEXT + " RF")
    assert texts(released_answers(d, spans)) == ["Random forest", "random forest", "RF"]


def test_contained_text_is_dropped_and_recorded_in_the_kept_answer():
    long = sp("random forest models", 0.9)
    short = sp("forest and SVM", 0.5)  # first sentence: no overlap, and not a substring
    inner = sp("forest models beat", 0.4)  # overlaps the first
    tail = sp("forest", 0.3)  # first sentence's: overlaps the second kept answer, but the first contains it
    answers = released_answers(doc(), [long, short, inner, tail])
    assert texts(answers) == ["random forest models beat", "forest and SVM"]
    assert [len(a.spans) for a in answers] == [3, 1]


def test_a_longer_text_replaces_the_kept_one_in_place_with_the_kept_score():
    kept = sp("SVM", 0.6)  # "SVM" of the first sentence
    other = sp("analysis", 0.2)
    longer2 = sp("SVM baseline", 0.3)
    far = sp("Random forest", 0.95)
    answers = released_answers(doc(), [far, kept, longer2, other])
    # "SVM" is kept at rank 2; "SVM baseline" (no overlap with it) contains it and takes its place and offsets.
    assert texts(answers) == ["Random forest", "SVM baseline", "analysis"]
    assert answers[1].score == 0.6
    assert (answers[1].start, answers[1].end) == (longer2.start, longer2.end)
    assert len(answers[1].spans) == 2


def test_first_match_only_overlap_with_first_wins_over_containment_in_second():
    text = "We used random forest and SVM. Later, random forest models won."
    kept1 = sp("forest and", 0.9, text=text)
    kept2 = sp("random forest models", 0.8, text=text)
    new = sp("random forest", 0.7, text=text)  # first occurrence: overlaps kept1, is contained in kept2
    answers = released_answers(doc(text), [kept1, kept2, new])
    assert texts(answers) == ["random forest and", "random forest models"]
    assert [len(a.spans) for a in answers] == [2, 1]


def test_first_match_only_containment_in_first_wins_over_overlap_with_second():
    text = "We used random forest and SVM. Later, random forest models won."
    kept1 = sp("random forest models", 0.9, text=text)
    kept2 = sp("forest and", 0.8, text=text)
    new = sp("random forest", 0.7, text=text)  # contained in kept1, overlaps kept2: dropped, kept2 not grown
    answers = released_answers(doc(text), [kept1, kept2, new])
    assert texts(answers) == ["random forest models", "forest and"]
    assert [len(a.spans) for a in answers] == [2, 1]


# -- merge off ------------------------------------------------------------------------------------------


def test_without_merge_spans_stay_apart_but_are_filtered_trimmed_and_deduplicated():
    text = TEXT.replace("forest and", "forest, and")
    spans = [
        sp("Random forest", 0.9, text=text),
        sp("forest, and", 0.8, text=text),  # overlaps: kept apart
        sp("R", 0.7, occurrence=1, text=text),  # contained: kept apart
        sp("Random forest,", 0.6, text=text),  # the same text once trimmed: kept once
        sp("analysis", 0.0, text=text),  # filtered
    ]
    answers = released_answers(doc(text), spans, merge=False)
    assert texts(answers) == ["Random forest", "forest, and", "R"]
    assert len(answers[0].spans) == 2


# -- 3. trimming ----------------------------------------------------------------------------------------


def test_trim_bounds_junk_characters():
    for raw, clean in [
        (" ,.-(;SVM;(-., ", "SVM"),
        ("SVM)", "SVM"),
        ("SVM).", "SVM"),
        ("(SVM)", "SVM"),  # the "(" is leading junk; what is left has no "(", so its ")" goes too
        ("SVM (RBF))", "SVM (RBF))"),  # a "(" inside: the ")" stays
        ("random forests (RF)", "random forests (RF)"),
        ("RF) and", "RF) and"),  # only a trailing ")" goes
        ("\nSVM\n", "\nSVM\n"),  # only the listed characters: the space, not other white space
        (",;.", ""),
    ]:
        i, j = trim_bounds(raw)
        assert raw[i:j] == clean, raw


def test_trimming_moves_offsets_and_uses_the_document():
    text = "Models: (SVM), SVM), and - XGB; more."
    d = doc(text)
    spans = [sp(" (SVM),", 0.9, text=text), sp(" SVM),", 0.8, text=text), sp("- XGB;", 0.7, text=text)]
    answers = released_answers(d, spans, merge=False)
    assert texts(answers) == ["SVM", "XGB"]
    for a in answers:
        assert d.text[a.start : a.end] == a.text


def test_trimming_after_merging_lets_a_trailing_space_touch_the_next_span():
    # Trimmed first, "random forests" [.., 14) and "RF)" [16, ..) would not touch; merged first they do.
    text = "random forests (RF) were used"
    answers = released_answers(doc(text), [at(0, 15, 0.9, text), at(15, 19, 0.5, text)])
    assert texts(answers) == ["random forests (RF)"]


def test_answers_empty_after_trimming_are_dropped_and_identical_texts_kept_once():
    text = "SVM, then SVM. And ;"
    d = doc(text)
    spans = [sp("SVM,", 0.9, text=text), sp(" ;", 0.8, text=text), sp("SVM.", 0.7, text=text)]
    answers = released_answers(d, spans)
    # "SVM." is no substring of "SVM,", so merging keeps both; trimmed, they are the same text, kept once.
    assert texts(answers) == ["SVM"]
    assert answers[0].score == 0.9
    assert len(answers[0].spans) == 2


# -- 4. records -----------------------------------------------------------------------------------------


def test_answer_records():
    half = len(TEXT) // 2
    d = doc(pages=[(0, half), (half, len(TEXT))])
    first = sp("Random forest", 0.9, bridge="ML")
    late = sp("analysis", 0.5, bridge="ML")
    answers = released_answers(d, [first, late])
    a, b = answers
    assert (a.doc_id, a.question_id, a.stage, a.models, a.ensemble) == ("p1", "q1", "extractive", ["m1"], False)
    assert (a.page, b.page) == (1, 2)
    assert a.evidence == "We used Random forest and SVM (support vector machines)."
    assert b.evidence.startswith("Later, random forest models")
    assert a.bridge_entity == "ML" and b.bridge_entity == "ML"
    assert a.spans == [first] and b.spans == [late]


def test_no_spans_no_answers():
    assert released_answers(doc(), []) == []


# -- union of models ------------------------------------------------------------------------------------


def test_union_keeps_exact_texts_once_with_every_model():
    d = doc()
    one = released_answers(d, [sp("Random forest", 0.9, model="a"), sp("SVM", 0.5, model="a")])
    two = released_answers(d, [sp("SVM", 0.8, model="b", occurrence=1), sp("random forest", 0.4, model="b")])
    union = union_of_models({"a": one, "b": two})
    assert texts(union) == ["Random forest", "SVM", "random forest"]
    assert [u.models for u in union] == [["a"], ["a", "b"], ["b"]]
    assert union[1].score == 0.5  # the first taken keeps its own score and offsets
    assert union[1].start == one[1].start
    assert len(union[1].spans) == 2
    assert all(u.ensemble for u in union)
    assert one[1].models == ["a"] and not one[1].ensemble  # the inputs are left alone


def test_union_of_one_model_is_not_an_ensemble():
    one = released_answers(doc(), [sp("SVM", 0.5)])
    union = union_of_models({"m1": one})
    assert texts(union) == ["SVM"] and not union[0].ensemble


# -- per-entity answers (multi-hop sub-questions) --------------------------------------------------------


def test_per_entity_answers_substring_dedup_only():
    text = TEXT.replace("forest and", "forest, and")
    spans = [
        sp("random forest models", 0.9, text=text),
        sp("random forest", 0.8, text=text),  # substring of a kept one: skipped
        sp("Random forest,", 0.0, text=text),  # no score filter, no trimming
        sp("analysis.", 0.3, text=text),
        sp("SVM", 0.2, text=text),  # would be a fourth: stops at keep=3
    ]
    answers = per_entity_answers(doc(text), spans)
    assert texts(answers) == ["random forest models", "Random forest,", "analysis."]
    assert answers[1].score == 0.0
    assert all(len(a.spans) == 1 for a in answers)


def test_per_entity_answers_keep_a_longer_text_after_a_shorter_one_and_read_only_the_top_five():
    spans = [sp("SVM", 0.9), sp("the SVM baseline", 0.8), sp("SVM", 0.7, occurrence=1),
             sp("SVM", 0.6), sp("SVM", 0.5), sp("analysis", 0.4)]
    # No merging: the longer text stays beside the shorter; the sixth answer is past the top five.
    assert texts(per_entity_answers(doc(), spans)) == ["SVM", "the SVM baseline"]
    assert texts(per_entity_answers(doc(), spans, keep=1)) == ["SVM"]


# -- LLM input ------------------------------------------------------------------------------------------


def test_joined_llm_input():
    prompt = "List the models: "
    got = joined_llm_input(prompt, ["SVM ", "random forest", " SVM", "", "  ", "Random forest"])
    assert got == "List the models: Random forest, SVM, random forest"
    assert joined_llm_input("P: ", []) == "P: "
