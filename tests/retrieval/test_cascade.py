"""The cascade: a small reader reads every window, the large readers only the windows its spans weigh most in."""

from __future__ import annotations

import pytest

from mlpsych.answers import Span
from mlpsych.cache import ResultCache
from mlpsych.documents import Document
from mlpsych.pipeline import Pipeline, RunResult
from mlpsych.pipeline.context import ModelPool, RunCounters, StageContext
from mlpsych.pipeline.read import CachedReader
from mlpsych.pipeline.retrieve import cascade_identity, cascaded
from mlpsych.questions import QuestionSet
from mlpsych.reading.cost import flops
from mlpsych.reading.reader import Reader
from mlpsych.reading.windows import Window
from mlpsych.retrieval import WindowSelector, cascade, plan_for
from mlpsych.retrieval.ranking import Plan
from mlpsych.retrieval.signals import reciprocal_rank_fusion
from mlpsych.settings import CascadeSettings, LLMSettings, ReaderSettings, RetrievalSettings, RunSettings


def _windows(n: int, width: int = 100, overlap: int = 20) -> list[Window]:
    return [Window(i, 0, 0, i * (width - overlap), i * (width - overlap) + width) for i in range(n)]


def _span(start: int, score: float, length: int = 5) -> Span:
    return Span("p", "q1", "small", "", start, start + length, score)


def _chosen(spans: list[Span], n: int = 6, **settings) -> list[int]:
    windows = _windows(n)
    weights, inside = cascade.span_mass(windows, spans)
    order = [int(i) for i in sorted(range(n), key=lambda i: -weights[i])]
    return sorted(cascade.choose_windows(order, inside, [s.score for s in spans], CascadeSettings(**settings)))


def test_mass_decides_how_many_windows_are_read():
    concentrated = [_span(10, 0.8), _span(30, 0.15), _span(250, 0.05)]
    assert _chosen(concentrated, mass=0.9) == [0]  # window 0 holds 0.95 of the mass
    spread = [_span(30 + 80 * i, 0.2) for i in range(5)]  # one span in each of five windows, none in the overlaps
    assert _chosen(spread, mass=0.9) == [0, 1, 2, 3, 4]
    assert _chosen(spread, mass=0.5) == [0, 1, 2]
    assert _chosen(spread, mass=0.5, max_windows=2) == [0, 1]
    assert _chosen(concentrated, mass=0.9, min_windows=2) == [0, 2]  # the next best: 250-255 lies in windows 2, 3


def test_a_span_in_two_overlapping_windows_counts_once_and_only_whole_spans_count():
    windows = _windows(3)
    spans = [_span(85, 0.6), _span(95, 0.4, length=10)]  # the first in the overlap of windows 0 and 1
    weights, inside = cascade.span_mass(windows, spans)
    assert inside == [[0], [0, 1], []]  # the second runs past window 0's end: it lies wholly in window 1 only
    assert weights.tolist() == pytest.approx([0.6, 1.0, 0.0])
    chosen = cascade.choose_windows([1, 0, 2], inside, [0.6, 0.4], CascadeSettings(mass=1.0))
    assert chosen == [1]  # window 1 already holds both spans: window 0 adds nothing


def test_without_any_span_every_window_is_read_up_to_the_cap():
    assert _chosen([], mass=0.9) == [0, 1, 2, 3, 4, 5]
    assert _chosen([], mass=0.9, max_windows=3) == [0, 1, 2]


def test_fusion_ranks_the_small_readers_mass_with_bm25():
    texts = ["Participants were students.", "Random forests predicted loneliness.", "Limitations are discussed.",
             "We used random forests and machine learning techniques."]
    doc = Document(id="d", text="\n".join(texts))
    windows, at = [], 0
    for i, t in enumerate(texts):
        windows.append(Window(i, 0, 0, at, at + len(t)))
        at += len(t) + 1
    spans = [_span(windows[1].char_start, 0.9, 6)]
    selector = WindowSelector()
    question = "What machine learning techniques were used?"
    small_only = Plan(mode="bm25", budget=1, cascade=CascadeSettings(model="s"))
    assert cascade.window_order(cascade.span_mass(windows, spans)[0], small_only, selector, doc, windows,
                                question)[0] == 1
    fused = Plan(mode="bm25", budget=1, cascade=CascadeSettings(model="s", fuse="question"))
    weights = cascade.span_mass(windows, spans)[0]
    expected = reciprocal_rank_fusion([weights, selector.scores(fused, question, texts, "question")],
                                      shared_ties=True)
    order = cascade.window_order(weights, fused, selector, doc, windows, question)
    assert order == sorted(range(4), key=lambda i: (-expected[i], i))
    assert set(order[:2]) == {1, 3}  # the small reader's window and BM25's best (windows 0, 2: no signal)


def test_a_software_question_also_reads_the_windows_where_the_paper_marks_a_tool():
    texts = ["Participants rated forty texts.", "Missing answers were imputed with the missRanger package.",
             "Results are in Table 2.", "Models were fitted in PyTorch 2.1.0 on a laptop.", "We thank the raters."]
    doc = Document(id="d", text="\n".join(texts))
    windows, at = [], 0
    for i, t in enumerate(texts):
        windows.append(Window(i, 0, 0, at, at + len(t)))
        at += len(t) + 1
    spans = [_span(windows[2].char_start, 0.9, 6)]  # the small reader weighs only window 2
    question = "What software was used?"

    def chosen(tool_windows: bool, signals: tuple[str, ...]) -> tuple[int, ...] | None:
        plan = Plan(mode="bm25", budget=1, signals=signals,
                    cascade=CascadeSettings(model="s", mass=0.5, tool_windows=tool_windows))
        return cascade.select(doc, windows, question, plan, WindowSelector(), spans)

    assert chosen(False, ("question", "software")) == (2,)
    assert chosen(True, ("question", "software")) == (1, 2, 3)  # the marked ones besides the chosen one
    assert chosen(True, ("question", "methods")) == (2,)  # only a question ordered by the software signal
    assert cascade.marked_windows(doc, windows[:1]) == set()


def test_plan_carries_the_cascade_only_when_a_small_reader_is_named():
    on = RetrievalSettings(read="retrieve", cascade=CascadeSettings(model="small", mass=0.8))
    assert plan_for(None, on).cascade.mass == 0.8
    assert plan_for(None, RetrievalSettings(read="retrieve")).cascade is None
    assert plan_for(None, on.model_copy(update={"read": "all"})) is None


def test_flops_charge_the_weights_applied_per_token():
    assert flops("deepset/deberta-v3-large-squad2", 1) == 2 * 24 * (4 * 1024**2 + 2 * 1024 * 4096)
    # ALBERT stores one layer's weights and applies them 12 times: charged 12 times
    assert flops("ahotrod/albert_xxlargev1_squad2_512", 1) == 2 * 12 * (4 * 4096**2 + 2 * 4096 * 16384)
    ratio = flops("deepset/minilm-uncased-squad2", 100) / flops("deepset/deberta-v3-large-squad2", 100)
    assert 0.06 < ratio < 0.08


def test_flops_of_a_model_folder_come_from_its_config(tiny_models):
    import json

    config = json.loads((tiny_models["bert"] / "config.json").read_text())
    h, i, n = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    assert flops(str(tiny_models["bert"]), 10) == 2 * n * (4 * h * h + 2 * h * i) * 10


# -- the pipeline ------------------------------------------------------------------------------------------

FILLER = " ".join(f"Paragraph {i} describes the sample and its recruitment in detail." for i in range(40))
TEXT = (f"{FILLER} We trained random forests and support vector machines (SVM) on the essays. {FILLER} "
        f"Random forests were used to predict loneliness from text. {FILLER}")


def _setup(tiny_models, small: str = "bert", also_ask: tuple[str, ...] = (), **cascade_settings):
    large = str(tiny_models["deberta-v2"])
    questions = QuestionSet.model_validate({"name": "t", "questions": [
        {"id": "q1", "text": "What machine learning techniques were used?", "models": [large], "top_k": 3,
         "retrieval": {"mode": "bm25", "budget": 1}},
        {"id": "q4", "text": "What was __PLACEHOLDER__ used for?", "models": [large], "bridge_from": "q1",
         "kind": "phrase", "top_k": 2, "max_sub_questions": 2,
         "retrieval": {"mode": "bm25", "budget": 1, "also_ask": list(also_ask)}}]})
    settings = RunSettings(
        reader=ReaderSettings(max_length=64, stride=16, question_tokens=16), llm=LLMSettings(enabled=False),
        retrieval=RetrievalSettings(read="retrieve", cascade=CascadeSettings(
            model=str(tiny_models[small]), **{"mass": 0.5, **cascade_settings})))
    return questions, settings


@pytest.mark.slow
def test_small_reader_reads_every_window_and_the_large_reader_only_the_chosen(tiny_models, tmp_path, monkeypatch):
    questions, settings = _setup(tiny_models)
    small, large = settings.retrieval.cascade.model, questions.questions[0].models[0]
    calls: list[tuple[str, list]] = []
    run_many = Reader.run_many

    def spy(self, papers):
        found = run_many(self, papers)
        calls.append((self.model_id, [(doc, list(queries), result) for (doc, queries), result in zip(papers, found)]))
        return found

    monkeypatch.setattr(Reader, "run_many", spy)
    doc = Document(id="p", text=TEXT)
    pipe = Pipeline(questions, settings, ResultCache(tmp_path / "c"), progress=False)
    result = pipe.run([doc])
    assert not result.errors
    assert [m for m, _ in calls] == [small, large, small, large]  # q1 (small, large), then q4's sub-questions
    small_reader, large_reader = Reader(small, settings.reader), Reader(large, settings.reader)
    (_, [(_, [small_q1], small_found)]), (_, [(_, [large_q1], _)]) = calls[0], calls[1]
    small_spans = small_found[0]
    assert small_q1.windows is None and small_q1.top_k == settings.retrieval.cascade.spans  # the whole paper
    plan = plan_for(questions.questions[0].retrieval, settings.retrieval)
    windows = large_reader.windows(doc)
    expected = cascade.select(doc, windows, small_q1.text, plan, WindowSelector(), small_spans)
    assert large_q1.windows == expected and 0 < len(expected) < len(windows)  # exactly the cascade's choice
    entities = {q.bridge_entity for _, [(_, queries, _)] in calls[2:3] for q in queries}
    assert entities and None not in entities
    for _, [(_, queries, _)] in calls[2:3]:  # the small reader reads each entity's windows only
        for q in queries:
            named = cascade.small_query(q, settings.retrieval.cascade, small_reader, doc).windows
            assert q.windows == named
    assert pipe.tokens_read[small] > 0 and pipe.tokens_read[large] > 0
    assert set(result.info.reader_gflops) == {small, large}

    again = Pipeline(questions, settings, ResultCache(tmp_path / "c"), progress=False)
    second = again.run([doc])  # a rerun reads nothing: both readers' reads are cached
    assert again.windows_read == 0 and again.model_loads == []
    assert [a.to_dict() for a in second.answers] == [a.to_dict() for a in result.answers]


def test_the_windows_naming_an_entity_are_found_among_those_chosen_and_again_by_their_characters():
    text = "Intro text here. We used Random Forests. Methods follow. SVM and random forest again. The end."
    doc = Document(id="d", text=text)
    cut = [0, 17, 41, 57, 86, len(text)]
    windows = [Window(i, 0, 0, a, b) for i, (a, b) in enumerate(zip(cut, cut[1:]))]
    assert cascade.ranges_of(windows, (1, 3)) == ((17, 41), (57, 86))
    assert cascade.ranges_of(windows, None) == tuple(zip(cut, cut[1:]))
    everything = cascade.ranges_of(windows, None)
    assert cascade.naming(doc, everything, "random forest") == ((17, 41), (57, 86))  # case and plural
    assert cascade.naming(doc, cascade.ranges_of(windows, (0, 3, 4)), "random forest") == ((57, 86),)
    assert cascade.naming(doc, everything, "forest") == ((17, 41), (57, 86))
    assert cascade.naming(doc, everything, "rest") == ()  # whole words only
    assert cascade.naming(doc, cascade.ranges_of(windows, (0, 2)), "random forest") == ()  # chosen, none names it
    assert cascade.windows_at(windows, ((57, 86), (17, 41))) == (1, 3)
    shifted = [Window(i, 0, 0, a + 1, b) for i, (a, b) in enumerate(zip(cut, cut[1:]))]
    assert cascade.windows_at(shifted, ((57, 86),)) == ()  # another tokenizer's windows are not these


def test_a_sub_question_reads_the_q1_windows_naming_its_entity_and_the_others_fall_back(tiny_models):
    from mlpsych.pipeline.follow_up import source_windows
    from mlpsych.pipeline.records import Unit
    from mlpsych.reading.reader import Query

    questions, _ = _setup(tiny_models)
    q4, large = questions.questions[1], questions.questions[1].models[0]
    doc = Document(id="p", text=TEXT)
    forests = TEXT.index("Random forests were used")
    chosen = {large: ((0, 200), (forests - 10, forests + 100)), "another model": ((0, len(TEXT)),)}
    units = {e: Unit(doc, q4, Query("q4", q4.sub_question(e), 2, 96, bridge_entity=e))
             for e in ("random forest", "SVM", "loneliness")}
    assert source_windows(units["random forest"], chosen) == {large: ((forests - 10, forests + 100),)}
    # named only outside q1's windows (SVM, defined with its long form in the paper) or only as part of a window
    # of another model: no windows of its own reader, so it is read as before
    assert source_windows(units["SVM"], chosen) == {}
    with_svm = {large: chosen[large] + ((TEXT.index("(SVM)") - 50, TEXT.index("(SVM)") + 10),)}
    assert source_windows(units["SVM"], with_svm) == {large: with_svm[large][2:]}
    _, settings = _setup(tiny_models, bridge_windows="source")
    units["random forest"].source = source_windows(units["random forest"], chosen)
    assert not cascaded(units["random forest"], settings) and cascaded(units["loneliness"], settings)


@pytest.mark.slow
def test_under_bridge_windows_source_q4_reads_q1s_windows_and_the_small_reader_less(tiny_models, tmp_path,
                                                                                    monkeypatch):
    calls: list[tuple[str, Document, list]] = []
    run_many = Reader.run_many

    def spy(self, papers):
        calls.extend((self.model_id, doc, list(queries)) for doc, queries in papers)
        return run_many(self, papers)

    monkeypatch.setattr(Reader, "run_many", spy)
    doc = Document(id="p", text=TEXT)
    cost, reads = {}, {}
    for value in ("small", "source"):
        questions, settings = _setup(tiny_models, also_ask=("zebra finch",), bridge_windows=value)
        small, large = settings.retrieval.cascade.model, questions.questions[0].models[0]
        calls.clear()
        pipe = Pipeline(questions, settings, ResultCache(tmp_path / value), progress=False)
        assert not pipe.run([doc]).errors
        cost[value] = {m: flops(m, t) for m, t in pipe.tokens_read.items()}
        reads[value] = {(m, q.question_id, q.bridge_entity): q.windows for m, _, qs in calls for q in qs}
    windows = Reader(large, settings.reader).windows(doc)
    q1 = cascade.ranges_of(windows, reads["source"][(large, "q1", None)])
    entities = {e for m, q, e in reads["source"] if q == "q4"}
    assert "zebra finch" in entities and len(entities) > 1
    sourced = 0
    for entity in entities:
        named = cascade.naming(doc, q1, entity)
        if named:  # read on q1's windows naming it, without a small read
            sourced += 1
            assert reads["source"][(large, "q4", entity)] == cascade.windows_at(windows, named)
            assert (small, "q4", entity) not in reads["source"]
        else:  # the fallback: as under "small"
            assert reads["source"][(small, "q4", entity)] == reads["small"][(small, "q4", entity)]
            assert reads["source"][(large, "q4", entity)] == reads["small"][(large, "q4", entity)]
    assert sourced >= 1 and cascade.naming(doc, q1, "zebra finch") == ()
    assert cost["source"][small] < cost["small"][small]
    assert sum(cost["source"].values()) < sum(cost["small"].values())


def test_cache_keys_of_the_large_reader_include_the_small_reader(tiny_models):
    from dataclasses import replace

    from mlpsych.reading.reader import Query

    doc = Document(id="p", text=TEXT)
    questions, bert = _setup(tiny_models, "bert")
    _, electra = _setup(tiny_models, "electra")
    _, looser = _setup(tiny_models, "bert", mass=0.9)
    _, tools = _setup(tiny_models, "bert", tool_windows=True)
    large = questions.questions[0].models[0]
    readers = [CachedReader(large, None, _context(s, questions)) for s in (bert, electra, looser, tools)]
    base = Query("q1", "What machine learning techniques were used?", 3, 15, windows=(0, 2))
    keys = [r.key(doc, replace(base, selected_by=cascade_identity(r.ctx.settings))) for r in readers]
    assert len(set(keys)) == 4  # the same windows chosen by another small reader, or with other settings
    assert readers[0].key(doc, base) not in keys  # ... or by BM25 alone, are other reads
    assert readers[0].key(doc, replace(base, selected_by=cascade_identity(bert))) == keys[0]


def _context(settings: RunSettings, questions: QuestionSet) -> StageContext:
    return StageContext(settings, None, RunResult([], questions), RunCounters(), ModelPool(), [])


def test_the_plan_reports_the_small_readers_stage_first(tiny_models):
    questions, settings = _setup(tiny_models)
    plan = Pipeline(questions, settings, progress=False).plan(3)
    assert [(e.stage, e.model) for e in plan][:2] == [("select", settings.retrieval.cascade.model),
                                                     ("read", questions.questions[0].models[0])]


def test_the_rule_takes_the_cheapest_point_that_meets_every_target():
    from mlpsych.retrieval.tradeoff import choose_point

    targets = [0.97, 0.95]
    coverage = [[0.99, 0.96], [0.97, 0.95], [0.98, 0.99], [1.00, 0.90]]
    cost = [5.0, 3.0, 4.0, 1.0]
    assert choose_point(coverage, cost, targets) == 1  # 0, 1, 2 meet both; 1 is the cheapest; 3 is cheaper, short
    # none meets: the one whose worst question falls least short, then the cheaper
    assert choose_point([[0.96, 0.90], [0.90, 0.94], [0.95, 0.93]], [1.0, 9.0, 2.0], targets) == 2  # -0.02
    assert choose_point([[0.96, 0.94], [0.96, 0.94]], [2.0, 1.0], targets) == 1


def test_the_answer_rule_takes_the_cheapest_mass_whose_answers_and_coverage_hold():
    from mlpsych.retrieval.tradeoff import choose_by_answers

    masses, cost = [0.7, 0.9, 0.99], [1.0, 2.0, 3.0]
    reference, tolerance = [0.30, 0.20], [0.01, 0.02]  # q1 against today's point, q4 against the full read
    rule = dict(masses=masses, cost=cost, reference=reference, tolerance=tolerance, floor=0.9, fallback=0.99)
    covered = [[0.95, 0.95]] * 3
    # 0.7 loses 0.02 F1 on q1 (more than 0.01); 0.9 loses 0.01 on q1 and 0.02 on q4: within both tolerances
    assert choose_by_answers(f1=[[0.28, 0.25], [0.29, 0.18], [0.30, 0.19]], coverage=covered, **rule) == 0.9
    # the same answers, but 0.9 covers only 0.85 of q4's gold spans: below the floor, so 0.99
    assert choose_by_answers(f1=[[0.28, 0.25], [0.29, 0.18], [0.30, 0.19]],
                             coverage=[[0.95, 0.95], [0.95, 0.85], [0.95, 0.95]], **rule) == 0.99
    # no mass qualifies (q4 short everywhere): today's mass
    assert choose_by_answers(f1=[[0.30, 0.10]] * 3, coverage=covered, **rule) == 0.99
    # a question without gold on these papers (NaN reference) does not constrain; equal cost goes to the higher mass
    assert choose_by_answers(**{**rule, "reference": [0.30, float("nan")], "cost": [1.0, 1.0, 3.0]},
                             f1=[[0.30, float("nan")]] * 3, coverage=covered) == 0.9


def test_a_model_whose_architecture_is_unknown_has_no_flops_and_the_run_goes_on(tmp_path):
    from mlpsych.pipeline.core import reader_gflops

    unknown, known = str(tmp_path / "not-a-model"), "deepset/deberta-v3-large-squad2"
    assert reader_gflops({unknown: 100, known: 10**9}) == {unknown: None, known: round(flops(known, 10**9) / 1e9, 1)}
