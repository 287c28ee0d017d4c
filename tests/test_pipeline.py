"""The pipeline with tiny real models: levels, caching/resume, bridges, per-paper failures."""

from __future__ import annotations

import pytest

from mlpsych.cache import ResultCache
from mlpsych.documents import Document
from mlpsych.models import dtype_name
from mlpsych.normalize.grounding import ground
from mlpsych.pipeline import Pipeline, question_levels
from mlpsych.pipeline.context import StageContext
from mlpsych.pipeline.records import Level, LevelSize
from mlpsych.progress import ProgressEvent
from mlpsych.questions import load_question_set
from mlpsych.settings import LLMSettings, ReaderSettings, RunSettings

PAPER = (
    "Participants (N = 312) completed an online survey about burnout. "
    "We used random forests (RF) and support vector machines (SVM) to predict turnover intention. "
    "Models were fitted with the caret package in R and with scikit-learn in Python. "
    "Random forests were used to rank the importance of job demands. "
) * 12


def docs() -> list[Document]:
    return [Document(id="a", text=PAPER), Document(id="b", text=PAPER.replace("burnout", "engagement"))]


def settings(**llm) -> RunSettings:
    return RunSettings(reader=ReaderSettings(max_length=128, stride=32, batch_size=8, question_tokens=32),
                       llm=LLMSettings(enabled=False, **llm), max_sub_questions=3)


@pytest.mark.slow
def test_levels_put_bridges_first(tiny_questions):
    qs = load_question_set(tiny_questions)
    assert [[q.id for q in level] for level in question_levels(qs)] == [["q1", "q2", "q3"], ["q4"]]


@pytest.mark.slow
def test_run_then_rerun_reads_nothing(tiny_questions, tmp_path):
    qs = load_question_set(tiny_questions)
    first = Pipeline(qs, settings(), ResultCache(tmp_path / "cache"), progress=False)
    result = first.run(docs())
    assert first.windows_read > 0
    assert result.info.reader_dtype == dtype_name("auto")  # the run sheet says what "auto" was here
    finals = [a for a in result.answers if a.final]
    assert {"q1", "q3", "q4"} <= {a.question_id for a in finals}  # q2 may be empty
    texts = {d.id: d.text for d in docs()}
    for a in result.answers:
        assert a.text == " ".join(texts[a.doc_id][a.start : a.end].split())
        assert a.page is None and a.text in a.evidence  # texts without pages: no page number made up
    # q4 answers are per bridge entity, and each entity is a q1 final answer of that paper.
    for doc_id in ("a", "b"):
        q1 = {a.text for a in result.answers if a.doc_id == doc_id and a.question_id == "q1" and a.final}
        entities = {a.bridge_entity for a in result.answers if a.doc_id == doc_id and a.question_id == "q4"}
        assert entities and entities <= q1
        assert len(entities) <= 3

    second = Pipeline(qs, settings(), ResultCache(tmp_path / "cache"), progress=False)
    again = second.run(docs())
    assert second.windows_read == 0 and second.model_loads == []
    assert [a.to_dict() for a in again.answers] == [a.to_dict() for a in result.answers]


@pytest.mark.slow
def test_spans_from_the_cache_get_the_evidence_of_this_version(tiny_questions, tmp_path):
    """Spans are cached with their evidence: after an upgrade that cut the evidence sentence another way (not after
    "et al.", not with a heading), a rerun from the cache showed the old evidence and a fresh run the new."""
    import json
    import sqlite3

    qs = load_question_set(tiny_questions).select(["q1"])
    fresh = Pipeline(qs, settings(), ResultCache(tmp_path / "cache"), progress=False).run(docs())
    with sqlite3.connect(tmp_path / "cache" / "results.sqlite") as db:  # as an older version cut it
        rows = db.execute("SELECT key, value FROM results WHERE stage = 'read'").fetchall()
        assert rows
        for key, value in rows:
            spans = [{**span, "evidence": "the old evidence"} for span in json.loads(value)]
            db.execute("UPDATE results SET value = ? WHERE key = ?", (json.dumps(spans), key))
    rerun = Pipeline(qs, settings(), ResultCache(tmp_path / "cache"), progress=False)
    again = rerun.run(docs())
    assert rerun.windows_read == 0
    assert [a.to_dict() for a in again.answers] == [a.to_dict() for a in fresh.answers]


@pytest.mark.slow
def test_changed_setting_recomputes_only_what_it_touches(tiny_questions, tmp_path):
    qs = load_question_set(tiny_questions).select(["q1", "q2"])
    cache = tmp_path / "cache"
    Pipeline(qs, settings(), ResultCache(cache), progress=False).run(docs())
    changed = qs.model_copy(update={"questions": [qs.get("q1").model_copy(update={"top_k": 3}), qs.get("q2")]})
    rerun = Pipeline(changed, settings(), ResultCache(cache), progress=False)
    rerun.run(docs())
    q1_models = set(qs.get("q1").models)
    assert set(rerun.model_loads) == q1_models  # q2's models were not loaded again


@pytest.mark.slow
def test_unreadable_paper_is_reported_and_others_answered(tiny_questions, tmp_path):
    qs = load_question_set(tiny_questions).select(["q1"])
    bad = Document(id="broken", text="", status="encrypted PDF: password required")
    result = Pipeline(qs, settings(), ResultCache(tmp_path), progress=False).run([bad, *docs()])
    assert result.errors["broken"] == ["encrypted PDF: password required"]
    assert {a.doc_id for a in result.answers} == {"a", "b"}


@pytest.mark.slow
def test_normalization_with_tiny_llama_is_cached_and_kept_apart(tiny_questions, tmp_path):
    qs = load_question_set(tiny_questions).select(["q1"])
    run_settings = settings()
    run_settings.llm.enabled = True
    first = Pipeline(qs, run_settings, ResultCache(tmp_path), progress=False)
    result = first.run(docs())
    # One raw output per paper and reader model, recorded for audit; every LLM item is a row either way.
    assert len(result.llm_outputs) == 2 * len(qs.get("q1").models)
    llm_rows = [a for a in result.answers if a.stage in ("normalized", "ungrounded")]
    texts = {d.id: d.text for d in docs()}
    for a in llm_rows:
        grounding = ground(a.text, texts[a.doc_id])
        assert grounding.grounded == (a.stage == "normalized")
        if a.stage == "normalized":
            assert a.final and a.start is not None and a.evidence
        else:
            assert not a.final and a.start is None
    # Without grounded items the extractive answers stay the paper's answers.
    for doc_id in ("a", "b"):
        finals = [a for a in result.answers if a.doc_id == doc_id and a.final]
        assert finals and all(a.stage == ("normalized" if any(r.stage == "normalized" and r.doc_id == doc_id
                                                               for r in llm_rows) else "extractive") for a in finals)
    second = Pipeline(qs, run_settings, ResultCache(tmp_path), progress=False)
    again = second.run(docs())
    assert first.llm_generated == len(result.llm_outputs)
    assert second.model_loads == [] and second.llm_generated == 0 and [a.to_dict() for a in again.answers] == [a.to_dict() for a in result.answers]


@pytest.mark.slow
@pytest.mark.parametrize("progress", [False, True])
def test_the_llms_bar_shows_only_with_progress(tiny_questions, tmp_path, capsys, progress):
    """`mlpsych run --no-progress` (and the CLI's own progress line) turn the pipeline's bars off: the LLM's bar
    over its batches showed all the same."""
    qs = load_question_set(tiny_questions).select(["q1"])
    run_settings = settings(batch_size=1)  # one prompt a batch: several batches, so a bar would show
    run_settings.llm.enabled = True
    capsys.readouterr()
    Pipeline(qs, run_settings, ResultCache(tmp_path), progress=progress).run(docs())
    assert ("batch/s" in capsys.readouterr().err) == progress


@pytest.mark.slow
def test_sub_questions_are_exactly_the_grounded_bridge_entities(tiny_questions, tmp_path, monkeypatch):
    """q4 asks about each grounded normalized q1 item; an item the paper does not contain is never asked about."""
    import gc
    import warnings

    import torch

    import mlpsych.normalize.llm as normalize

    qa_alive = []

    class FixedOutput(normalize.Normalizer):
        # The real tiny Llama is loaded (warm_up is not replaced); only its random text is replaced by a known list.
        def _generate(self, texts):
            with warnings.catch_warnings():  # isinstance on every live object touches deprecated torch aliases
                warnings.simplefilter("ignore", FutureWarning)
                qa_alive.append([type(o).__name__ for o in gc.get_objects()
                                 if isinstance(o, torch.nn.Module) and "QuestionAnswering" in type(o).__name__])
            return ['["random forests", "Support Vector Machine (SVM)", "gradient boosting"]'] * len(texts)

    monkeypatch.setattr(normalize, "Normalizer", FixedOutput)
    qs = load_question_set(tiny_questions).select(["q4"])
    run_settings = settings()
    run_settings.llm.enabled = True
    result = Pipeline(qs, run_settings, ResultCache(tmp_path), progress=False).run(docs())
    assert qa_alive and all(alive == [] for alive in qa_alive)  # readers released before the LLM ran
    for doc_id in ("a", "b"):
        q1 = [a for a in result.answers if a.doc_id == doc_id and a.question_id == "q1"]
        grounded = sorted(a.text for a in q1 if a.stage == "normalized")
        assert grounded == ["Support Vector Machine (SVM)", "random forests"]
        assert [a.text for a in q1 if a.stage == "ungrounded"] == ["gradient boosting"]
        entities = {a.bridge_entity for a in result.answers if a.doc_id == doc_id and a.question_id == "q4"}
        assert entities == set(grounded)


@pytest.mark.slow
def test_a_run_ends_with_one_full_collection_for_all_its_readers(tiny_questions, tmp_path, monkeypatch):
    """The run's end drops every reader (their models already freed by their stages) and collects once, not once
    per reader; that one collection is what clears a model left in cyclic garbage by earlier work."""
    from mlpsych import models
    from mlpsych.pipeline.context import ModelPool

    collections, pooled = [], []
    monkeypatch.setattr(models.gc, "collect", lambda *args: collections.append(args) or 0)
    release = ModelPool.release

    def counted(pool):
        pooled.append(len(pool.readers))
        before = len(collections)
        release(pool)
        pooled.append(len(collections) - before)

    monkeypatch.setattr(ModelPool, "release", counted)
    Pipeline(load_question_set(tiny_questions).select(["q1", "q2"]), settings(), ResultCache(tmp_path),
             progress=False).run(docs())
    readers, collected = pooled
    assert readers >= 2 and collected == 1


def test_an_empty_cache_given_is_the_cache_used(tmp_path, tiny_questions):
    """Regression: an empty ResultCache is falsy (it has __len__); it must still be used, not the default."""
    cache = ResultCache(tmp_path / "mine")
    assert len(cache) == 0
    assert Pipeline(load_question_set(tiny_questions), settings(), cache, progress=False).cache is cache


@pytest.mark.slow
def test_a_paper_whose_reading_fails_is_reported_and_the_group_read_with_it_is_kept(tiny_questions, tmp_path):
    qs = load_question_set(tiny_questions).select(["q1"])
    pipeline = Pipeline(qs, settings(), ResultCache(tmp_path), progress=False, keep_loaded=True)
    poison = "Zyzzogeton"
    bad = Document(id="bad", text=PAPER.replace("burnout", poison))
    pipeline.run([docs()[0]])  # loads the readers, which stay loaded
    for reader in pipeline.models.readers.values():  # a model that fails on one paper's words, as a real fault would
        ids = lambda text: set(reader.tokenizer(text, add_special_tokens=False)["input_ids"])  # noqa: E731
        marker = ids(bad.text) - ids(" ".join(d.text for d in docs()))
        assert marker  # pieces only the bad paper has
        forward = reader.model.forward

        def failing(*args, forward=forward, marker=marker, **kwargs):
            if marker & set(kwargs["input_ids"].flatten().tolist()):
                raise RuntimeError("simulated kernel failure")
            return forward(*args, **kwargs)

        reader.model.forward = failing
    result = pipeline.run([bad, *docs()])
    assert any("simulated kernel failure" in e for e in result.errors["bad"])
    answered = {a.doc_id for a in result.answers if a.final}
    assert answered == {"a", "b"}


@pytest.mark.slow
def test_reference_preset_unions_the_models_released_answers_and_keeps_three_per_entity(tiny_questions, tmp_path):
    """--preset reference: each model's top 20 (duplicates kept) through the released rules, the final list the
    plain union of the models' texts, and every q1 text asked about in q4 with at most 3 answers kept."""
    from mlpsych.reading.released import released_answers, trim_bounds
    from mlpsych.settings import apply_preset

    qs, ref = apply_preset("reference", load_question_set(tiny_questions).select(["q1", "q4"]), settings())
    ref.reader = ref.reader.model_copy(update={"max_length": 128, "stride": 32, "batch_size": 8})
    result = Pipeline(qs, ref, ResultCache(tmp_path), progress=False).run(docs()[:1])
    q1 = [a for a in result.answers if a.question_id == "q1"]
    models = qs.get("q1").models
    per_model = {m: [a for a in q1 if not a.ensemble and a.models == [m]] for m in models}
    assert len(models) == 2 and all(per_model.values())
    for model, answers in per_model.items():
        raw = sorted({id(s): s for a in answers for s in a.spans}.values(), key=lambda s: -s.score)
        assert len(raw) <= 20 and [a.text for a in released_answers(docs()[0], raw)] == [a.text for a in answers]
    finals = [a for a in q1 if a.final]
    assert all(a.ensemble for a in finals)
    assert [a.text for a in finals] == list(dict.fromkeys(a.text for m in models for a in per_model[m]))
    assert all(trim_bounds(a.text) == (0, len(a.text)) for a in finals)
    q4 = [a for a in result.answers if a.question_id == "q4" and a.final]
    entities = {a.bridge_entity for a in q4}
    assert entities == {a.text for a in finals}  # every text of the union is asked about, as written
    assert max(sum(1 for a in q4 if a.bridge_entity == e and a.models == [m]) for e in entities
               for m in qs.get("q4").models) <= 3


@pytest.mark.slow
@pytest.mark.parametrize("output, kept", [("The study was conducted in the United States of America.", True),
                                          ("I'm sorry, I cannot answer that.", True), ("[]", False)])
def test_a_question_that_may_have_no_answer_loses_its_answers_only_to_an_explicit_none(
        tiny_questions, tmp_path, monkeypatch, output, kept):
    """With allow_empty, the LLM saying "[]" leaves the paper without an answer; prose or garbage with no list in it
    (which also parses to no item) left it without one too, and the extractive answers are now kept."""
    import mlpsych.normalize.llm as normalize

    class FixedOutput(normalize.Normalizer):  # the real tiny Llama is loaded; only its text is replaced
        def _generate(self, texts):
            return [output] * len(texts)

    monkeypatch.setattr(normalize, "Normalizer", FixedOutput)
    qs = load_question_set(tiny_questions).select(["q2"])
    qs = qs.model_copy(update={"questions": [qs.get("q2").model_copy(update={"allow_empty": True})]})
    without_llm = Pipeline(qs, settings(), ResultCache(tmp_path), progress=False).run(docs()[:1])
    extractive = [a.text for a in without_llm.answers if a.final]
    run_settings = settings()
    run_settings.llm.enabled = True
    result = Pipeline(qs, run_settings, ResultCache(tmp_path), progress=False).run(docs()[:1])
    assert extractive and [a.text for a in result.answers if a.final] == (extractive if kept else [])


@pytest.mark.slow
def test_reference_llm_step_keeps_ungrounded_items_and_asks_about_them(tiny_questions, tmp_path, monkeypatch):
    """--preset reference's LLM step: the released prompt with the answers joined, every returned item an answer
    (grounding only reported in the stage column) and a bridge entity."""
    import mlpsych.normalize.llm as normalize
    from mlpsych.settings import apply_preset

    seen: list[str] = []

    class FixedOutput(normalize.Normalizer):  # the real tiny Llama is loaded; only its text is replaced
        def _generate(self, texts):
            seen.extend(texts)
            return ['["random forests", "gradient boosting"]'] * len(texts)

    monkeypatch.setattr(normalize, "Normalizer", FixedOutput)
    qs, ref = apply_preset("reference", load_question_set(tiny_questions).select(["q4"]), settings())
    ref.reader = ref.reader.model_copy(update={"max_length": 128, "stride": 32})
    ref.llm.enabled = True
    result = Pipeline(qs, ref, ResultCache(tmp_path), progress=False).run(docs()[:1])
    assert seen and all("Directly return the python-readable flat list of techniques" in t for t in seen)
    q1 = {a.text: a.stage for a in result.answers if a.question_id == "q1" and a.final}
    assert q1 == {"random forests": "normalized", "gradient boosting": "ungrounded"}
    assert {a.bridge_entity for a in result.answers if a.question_id == "q4"} == set(q1)


class Checker:
    """A stage added to the pipeline's list: plans one event per level and notes what it is run on."""

    name = "checker"

    def __init__(self) -> None:
        self.ran: list[tuple[list[str], int]] = []  # each level's questions and units (answer lists to make)

    def plan(self, size: LevelSize) -> list[ProgressEvent]:
        ids = tuple(q.id for q in size.questions)
        return [size.event("read", ids, "checker", size.answer_lists(ids))]

    def run(self, level: Level, ctx: StageContext) -> None:
        self.ran.append(([q.id for q in level.questions], len(level.units)))
        ctx.report(ProgressEvent("read", tuple(q.id for q in level.questions), "checker", len(level.units),
                                 len(level.units), "paper"))


@pytest.mark.slow
def test_plan_and_run_walk_the_same_stages(tiny_questions, tmp_path):
    """A stage added to the list is in the plan, runs for every level and is sized with a follow-up level; every
    stage the run reports was planned, so the plan cannot drift from what runs."""
    checker = Checker()

    class Checked(Pipeline):
        def stages(self):
            return [*super().stages(), checker]

    events: list[ProgressEvent] = []
    pipeline = Checked(load_question_set(tiny_questions), settings(), ResultCache(tmp_path / "c"), progress=False,
                       on_progress=events.append)
    plan = pipeline.plan(2)
    assert [(e.model, e.questions, e.total, e.counted) for e in plan if e.model == "checker"] == [
        ("checker", ("q1", "q2", "q3"), 6, True), ("checker", ("q4",), 0, False)]  # q4's size is not known yet
    pipeline.run(docs())
    assert [questions for questions, _ in checker.ran] == [["q1", "q2", "q3"], ["q4"]]
    assert {e.key for e in events} == {e.key for e in plan}
    sized = [e for e in events if e.sizing and e.model == "checker"]
    assert len(sized) == 1 and sized[0].total == checker.ran[1][1] > 0  # q4: its sub-questions' answer lists


def test_every_merging_choice_of_the_settings_has_its_rule_and_an_unknown_one_names_the_known():
    from typing import get_args

    from mlpsych.errors import UnknownChoice
    from mlpsych.pipeline.merge import MERGING_RULES, MODEL_COMBINERS
    from mlpsych.settings import AnswerSettings

    for registry, field in ((MERGING_RULES, "rules"), (MODEL_COMBINERS, "models")):
        choices = get_args(AnswerSettings.model_fields[field].annotation)
        assert choices and all(callable(registry.get(name)) for name in choices)
        with pytest.raises(UnknownChoice, match=", ".join(choices)):
            registry.get("no-such-choice")


@pytest.mark.slow
def test_each_paper_is_tokenized_once_per_reader_and_models_are_freed_between_stages(tiny_questions, tmp_path,
                                                                                      monkeypatch):
    """A model is freed when its stage ends (encoders and the LLM never resident together), but its tokenizer and
    the papers it tokenized serve the run's later stages; after the run nothing is kept."""
    from collections import Counter

    from mlpsych.reading.reader import Reader

    tokenized, loaded = Counter(), []
    encode, warm_up = Reader.encode, Reader.warm_up

    def counting_encode(self, doc):
        if doc.sha256 not in self._encoded:
            tokenized[(self.model_id, doc.id)] += 1
        return encode(self, doc)

    def checking_warm_up(self):
        loaded.append(self.model_id)
        assert all(r.model is None for r in pipeline.models.readers.values() if r is not self)  # one at a time
        warm_up(self)

    monkeypatch.setattr(Reader, "encode", counting_encode)
    monkeypatch.setattr(Reader, "warm_up", checking_warm_up)
    qs = load_question_set(tiny_questions)
    pipeline = Pipeline(qs, settings(), ResultCache(tmp_path / "cache"), progress=False)
    result = pipeline.run(docs())
    assert not result.errors and len(loaded) > len(set(loaded))  # models were loaded again in later stages
    assert tokenized and set(tokenized.values()) == {1}
    assert {model for model, _ in tokenized} == {m for q in qs.questions for m in q.models}
    assert pipeline.models.readers == {}


def test_the_run_sheet_names_each_models_revision_the_llms_dtype_and_the_tokenizers_version(tmp_path):
    """The run sheet named the models by id alone and said what the readers' dtype ``auto`` became, not the LLM's:
    a Hub model updated in place, or a reader folder trained again, gave other answers from a sheet that read the
    same. Every model the run loads (the LLM too) is there with its commit or its files' fingerprint."""
    from mlpsych.cache import model_fingerprint
    from mlpsych.export import run_rows
    from mlpsych.questions import QuestionSet, QuestionTemplate

    folder = tmp_path / "my-reader"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}')
    question = QuestionTemplate(id="q1", text="What techniques were used?", models=[str(folder), "org/reader"],
                                normalize={"prompt": "List them: {answers}", "model": "org/llm"})
    result = Pipeline(QuestionSet(questions=[question]), RunSettings(), ResultCache(tmp_path / "c"),
                      progress=False).run([])
    assert result.info.model_revisions == {str(folder): model_fingerprint(str(folder)), "org/reader": "org/reader",
                                           "org/llm": "org/llm"}  # Hub ids never downloaded: no commit to name
    assert result.info.llm_dtype == dtype_name("auto")
    rows = dict(run_rows(result))
    assert model_fingerprint(str(folder)) in rows["model_revisions"] and rows["llm_dtype"] == dtype_name("auto")
    import tokenizers

    assert rows["tokenizers"] == tokenizers.__version__  # offsets come from it: the version a rerun needs
    from mlpsych.provenance import version

    assert rows["mlpsych"] == version()  # with the commit where it runs from a checkout
    quiet = Pipeline(QuestionSet(questions=[question]), RunSettings(llm=LLMSettings(enabled=False)),
                     ResultCache(tmp_path / "c"), progress=False).run([])
    assert quiet.info.llm_dtype is None and "llm_dtype" not in dict(run_rows(quiet))
    assert set(quiet.info.model_revisions) == {str(folder), "org/reader"}


@pytest.mark.slow
def test_a_long_paper_moves_the_progress_and_gives_a_time_left_while_it_is_read(tiny_questions, tmp_path):
    """A book-length thesis is one paper whose reading can take many minutes: the stage's progress moves with its
    windows, so the bar and a time left come before it is finished (it stood at "paper 0 of 1", with "time left:
    measured after the first paper", through the whole read)."""
    from mlpsych.estimate import ProgressTracker

    questions = load_question_set(tiny_questions).select(["q3"])
    events: list[ProgressEvent] = []
    pipeline = Pipeline(questions, settings(), ResultCache(tmp_path / "c"), progress=False, on_progress=events.append)
    plan = pipeline.plan(1)
    pipeline.run([Document(id="thesis", text=PAPER * 10)])
    first_reader = [e for e in events if e.stage == "read" and e.model == events[0].model and not e.loading]
    done = [e.done for e in first_reader]
    assert any(0 < d < 1 for d in done) and done == sorted(done) and done[-1] == 1
    clock = iter(range(1000))
    tracker = ProgressTracker(plan, clock=lambda: float(next(clock)))
    for event in events[: events.index(next(e for e in first_reader if 0 < e.done < 1)) + 1]:
        tracker.update(event)
    assert tracker.seconds_left() is not None and 0 < tracker.fraction() < 1
    assert "paper 0 of 1" in tracker.describe() and " left · " in tracker.describe() and "about " in tracker.describe()
