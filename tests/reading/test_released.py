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
    # The bridge grows the first only (which moves last); it now overlaps the second, but kept answers are not
    # merged again by position.
    assert texts(answers) == ["cccc", "aaaa bbbb c"]


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
    inner = sp("forest models beat", 0.4)  # overlaps the first, which grows and moves last
    far = sp("SVM", 0.2, occurrence=1)  # "the SVM baseline": no overlap, inside "forest and SVM"
    answers = released_answers(doc(), [long, short, inner, far])
    assert texts(answers) == ["forest and SVM", "random forest models beat"]
    assert [len(a.spans) for a in answers] == [2, 2]


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


# -- the order of the steps (each found in the released code's outputs, docs/reference.md) -----------------


def test_only_the_first_twenty_answers_are_read():
    text = " ".join(f"w{i:02d}" for i in range(25))
    spans = [sp(f"w{i:02d}", 0.9 - i / 100, text=text) for i in range(25)]
    assert texts(released_answers(doc(text), spans)) == [f"w{i:02d}" for i in range(20)]
    assert len(released_answers(doc(text), spans, read=30)) == 25
    assert len(released_answers(doc(text), spans, merge=False)) == 20


def test_a_grown_answer_moves_to_the_end_of_the_kept_list():
    answers = released_answers(doc(), [sp("Random forest", 0.9), sp("SVM", 0.8), sp("forest and", 0.7)])
    assert texts(answers) == ["SVM", "Random forest and"]
    assert answers[1].score == 0.9


def test_a_span_grows_the_first_answer_it_overlaps_in_the_kept_list_order():
    text = "uncertain and chaotic contexts. In this study, the leader process"
    a, lead, a2 = at(0, 30, 0.9, text), at(47, 65, 0.8, text), at(0, 21, 0.7, text)
    bridge = at(14, 65, 0.6, text)  # overlaps both; "uncertain ... contexts" moved behind "the leader process"
    answers = released_answers(doc(text), [a, lead, a2, bridge])
    assert texts(answers) == ["uncertain and chaotic contexts", "chaotic contexts. In this study, the leader process"]


def test_positions_merge_before_texts():
    text = "We used random forest and SVM. Later, random forest models won."
    kept1 = sp("random forest models", 0.9, text=text)
    kept2 = sp("forest and", 0.8, text=text)
    new = sp("random forest", 0.7, text=text)  # inside kept1's text, but overlaps kept2: kept2 grows
    answers = released_answers(doc(text), [kept1, kept2, new])
    assert texts(answers) == ["random forest models", "random forest and"]
    assert [len(a.spans) for a in answers] == [1, 2]


def test_an_answer_apart_from_another_is_swallowed_once_a_bridging_span_grows_it():
    text = "three methods--neural networks (ANN), random forest and more"
    first = at(0, 30, 0.9, text)  # "three methods--neural networks"
    forest = at(38, 51, 0.8, text)  # "random forest": apart from the first
    bridge = at(0, 51, 0.7, text)  # grows the first (first in the list) over "random forest"
    answers = released_answers(doc(text), [first, forest, bridge])
    # Positions: the grown first and "random forest" stay two answers; texts: the second is inside the first.
    assert texts(answers) == ["three methods--neural networks (ANN), random forest"]
    assert len(answers[0].spans) == 3


def test_a_text_holding_two_kept_texts_replaces_only_the_first():
    text = "nuances. 50 items. Later: models of 50 items, treated as nuances."
    nuances, items = at(0, 7, 0.9, text), at(9, 17, 0.8, text)
    models, treated = at(26, 44, 0.7, text), at(36, 64, 0.6, text)  # grown together by position
    answers = released_answers(doc(text), [nuances, items, models, treated])
    assert texts(answers) == ["models of 50 items, treated as nuances", "50 items"]
    assert (answers[0].start, answers[0].score) == (26, 0.9)


def test_texts_merge_in_the_kept_list_order():
    text = "backprop algorithm here. an neural network there. an neural network backprop algorithm!"
    spans = [sp("neural network backprop algorithm", 0.9, text=text),
             sp("backprop algorithm", 0.8, text=text),
             sp("neural network", 0.7, text=text),
             sp("an neural network", 0.6, text=text),  # grows "neural network", already last
             sp("an neural network backprop algorithm", 0.5, text=text)]  # grows the first, which moves last
    # List order after positions: "backprop algorithm", "an neural network", "an neural network backprop
    # algorithm"; the last takes the place of the first, and "an neural network" is never compared with it. In
    # rank order, the longest would have swallowed both.
    answers = released_answers(doc(text), spans)
    assert texts(answers) == ["an neural network backprop algorithm", "an neural network"]
    assert answers[0].score == 0.8


def test_trimming_comes_before_text_merging():
    text = "free courses (MOOCs) grew; MOOCs by using language processing"
    paren = at(14, 20, 0.9, text)  # "MOOCs)": trimmed to "MOOCs", inside the later answer
    later = at(27, 61, 0.8, text)
    assert texts(released_answers(doc(text), [paren, later])) == ["MOOCs by using language processing"]


def test_white_space_inside_an_answer_is_kept_and_its_ends_stripped():
    text = "the lme4 package  in the R software"
    answers = released_answers(doc(text), [at(0, 35, 0.9, text)])
    assert texts(answers) == ["the lme4 package  in the R software"]


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
