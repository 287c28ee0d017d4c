"""benchmarks/adapt.py's cross-fitting: folds, and scoring every fold's adapted reader as one arm."""

from __future__ import annotations

from tests.benchmarks.scripts import load_script

adapt_benchmark = load_script("adapt", "adapt_benchmark")


def _row(paper: str, answer: str, model: str) -> dict:
    return {"paper_id": paper, "question_id": "q1", "answer": answer, "stage": "extractive", "models": [model],
            "ensemble": False, "final": True, "score": 0.5}


def test_each_folds_reader_is_scored_on_the_papers_it_read() -> None:
    # fold 0's reader read paper b, fold 1's read paper a: each paper's answers count, whatever folder answered
    gold = {"q1": {"a": ["random forest"], "b": ["support vector machine"]}}
    rows = [_row("a", "random forest", "work/fold1/reader"), _row("b", "support vector machine", "work/fold0/reader")]
    items = adapt_benchmark.scores(gold, rows, ["q1"], ["a", "b"], "adapted")["q1"]
    assert [item.n_pred for item in items] == [1, 1]
    assert [item.f1 for item in items] == [1.0, 1.0]


def test_papers_not_asked_for_are_not_scored() -> None:
    gold = {"q1": {"a": ["random forest"], "b": ["lasso"]}}
    rows = [_row("a", "random forest", "r"), _row("b", "lasso", "r")]
    items = adapt_benchmark.scores(gold, rows, ["q1"], ["a"], "zero-shot")["q1"]
    assert len(items) == 1 and items[0].f1 == 1.0


def test_folds_cover_every_paper_once() -> None:
    papers = [f"p{i}" for i in range(34)]
    for k in (17, 8, 4):
        folds = adapt_benchmark.folds_of(papers, k)
        assert [p for fold in folds for p in fold] == papers  # consecutive papers, each in one fold
        assert {len(fold) for fold in folds} <= {k, k + 1}


def _answers(papers: list[str], model: str) -> list[dict]:
    # per paper a right answer (high score) and a wrong one (low score)
    return [row for p in papers for row in (
        {**_row(p, "random forest", model), "score": 0.8, "start": 0},
        {**_row(p, "the data", model), "score": 0.1, "start": 20})]


def _confidence(runs: list, papers: list[str]) -> dict:
    """The benchmark's pooled confidence for ``runs`` over ``papers`` whose gold q1 answer is "random forest"."""
    gold = {"q1": {p: ["random forest"] for p in papers}}
    texts = {p: "random forest on the data" for p in papers}
    label = lambda row, item: adapt_benchmark.cf.gold_label(item, gold)  # noqa: E731
    return adapt_benchmark.confidence(runs, _answers(papers, "zero"), texts, {"q1": "entity"}, label)


def test_adapted_answers_are_recalibrated_only_by_a_reader_that_never_saw_the_scored_papers() -> None:
    papers = [f"p{i}" for i in range(6)]

    def runs(folds: list[list[str]]) -> list:
        return [adapt_benchmark.FoldRun(fold, folds[(i + 1) % len(folds)],
                                        _answers(folds[(i + 1) % len(folds)], f"fold{i}"), ("q1",))
                for i, fold in enumerate(folds)]

    two = _confidence(runs([papers[:3], papers[3:]]), papers)
    assert set(two) == {("zero-shot", "zero-shot answers"), ("adapted", "zero-shot answers")}
    three = _confidence(runs([papers[:2], papers[2:4], papers[4:]]), papers)
    confidence, labels = three[("adapted", "adapted answers")]
    assert len(confidence) == len(labels) == 12  # every scored answer, once
    right = [c for c, y in zip(confidence, labels) if y]
    wrong = [c for c, y in zip(confidence, labels) if not y]
    assert min(right) > max(wrong)


def test_as_run_the_base_reader_answers_questions_with_too_few_coded_answers() -> None:
    zero = [_row("a", "zero a1", "base"), {**_row("a", "zero a3", "base"), "question_id": "q3"},
            _row("b", "zero b1", "base"), {**_row("b", "zero b3", "base"), "question_id": "q3"}]
    run = adapt_benchmark.FoldRun(["c"], ["a"], [_row("a", "adapted a1", "r"),
                                                 {**_row("a", "adapted a3", "r"), "question_id": "q3"}], ("q1",))
    got = {(r["paper_id"], r["question_id"]): r["answer"] for r in adapt_benchmark.as_run_reads([run], zero)}
    assert got == {("a", "q1"): "adapted a1", ("a", "q3"): "zero a3"}


def test_answers_as_run_get_their_own_confidence_row() -> None:
    papers = [f"p{i}" for i in range(4)]
    folds = [papers[:2], papers[2:]]
    runs = [adapt_benchmark.FoldRun(fold, folds[1 - i], _answers(folds[1 - i], f"fold{i}"), answered)
            for i, (fold, answered) in enumerate(zip(folds, [(), ("q1",)]))]
    pooled = _confidence(runs, papers)
    confidence, labels = pooled[("as run", "zero-shot answers")]
    assert len(labels) == 4  # only the fold whose reader kept q1 for the base reader: its 2 papers' 2 answers
