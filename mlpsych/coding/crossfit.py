"""A calibrator for an adapted reader's answers, fitted on coded papers it did not learn from (cross-fitting).

An adapted reader is right more often than its base reader, so a calibrator fitted on the base reader's answers
(the shipped default, or ``mlpsych calibrate`` on zero-shot coding) says too little; fitted on the adapted
reader's answers to its own coded papers it would say too much (it learnt them). So ``mlpsych adapt`` also adapts
the base reader on all coded papers but one fold, for each fold; each of those readers reads its fold as runs
read (LLM stage off), its answers are labelled by the coding (an answer matching a coded positive of its paper and
question, as ``mlpsych calibrate --gold`` labels; pairs nobody coded are left out), and the calibrator is fitted
on all of them and saved in the reader folder (:data:`CALIBRATOR_FILE`). Runs calibrate the answers of questions
this reader answers with it, unless ``--calibrator`` names another.

The fold readers learn from fewer papers than the reader they stand for, so they are right somewhat less often:
the calibrator errs on the side of caution (benchmarks/README.md, adapt).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from mlpsych.coding import confidence as cf
from mlpsych.coding.coded import Coding
from mlpsych.documents import Document
from mlpsych.questions import QuestionSet
from mlpsych.settings import RunSettings

log = logging.getLogger(__name__)

CALIBRATOR_FILE = "calibrator.json"  # in a reader folder: the calibrator of that reader's answers


@dataclass
class CrossFitted:
    """The calibrator (None when none could be fitted, ``reason`` says why) and what it was fitted on."""

    calibrator: cf.Calibrator | None
    reason: str = ""


def folds_of(papers: Sequence[str], folds: int) -> list[list[str]]:
    """Papers dealt round-robin into ``folds`` folds (coded papers come sorted by id: no order to keep)."""
    return [list(papers[i::folds]) for i in range(folds)]


def coding_gold(coding: Coding) -> dict[str, dict[str, list[str]]]:
    """The coding as gold: per question, per coded paper, the texts of its positive spans (none: no answer)."""
    gold: dict[str, dict[str, list[str]]] = {}
    for paper, question in coding.pairs:
        gold.setdefault(question, {}).setdefault(paper, [])
    for span in coding.spans:
        if span.correct and (span.paper_id, span.question_id) in coding.pairs:
            gold[span.question_id][span.paper_id].append(span.text)
    return gold


def read_as_runs(reader: Path, documents: list[Document], questions: QuestionSet, settings: RunSettings,
                 cache_dir: Path, progress: bool) -> list[dict]:
    """Final answer rows of ``reader`` as the only model of every question, read with a run's ``settings``, LLM
    stage off."""
    from mlpsych.cache import ResultCache
    from mlpsych.export import answer_rows
    from mlpsych.pipeline import Pipeline
    from mlpsych.settings import substitute_models

    asked = substitute_models(questions, {m: str(reader) for q in questions.questions for m in q.models})
    settings = settings.model_copy(update={"llm": settings.llm.model_copy(update={"enabled": False})})
    result = Pipeline(asked, settings, ResultCache(cache_dir), progress=progress).run(documents)
    return answer_rows(result, final_only=True)


def cross_fitted_calibrator(coding: Coding, documents: dict[str, Document], questions: QuestionSet, folds: int,
                            settings: RunSettings, workdir: Path, train_fold: Callable[[Coding, Path, str], Path | None],
                            progress: bool = True) -> CrossFitted:
    """The calibrator of the module docstring, for runs that read with ``settings`` (the readers' settings and
    the windows read shape the answers). ``train_fold(coding, folder, description)`` adapts the base reader
    on a part of the coding into ``folder`` (None when that part holds no answer); fold readers and their reading
    cache are kept in ``workdir``, so a rerun resumes."""
    papers = coding.papers
    if folds < 2:
        return CrossFitted(None, "cross-fitting turned off")
    if len(papers) < folds:
        return CrossFitted(None, f"{len(papers)} coded paper(s): too few for {folds} folds")
    asked = questions.select(coding.questions)
    rows: list[dict] = []
    for i, fold in enumerate(folds_of(papers, folds)):
        reader = train_fold(coding.only([p for p in papers if p not in fold]), workdir / f"fold{i}",
                            f"calibration reader {i + 1}/{folds}")
        if reader is None:
            log.info("calibration fold %d: the other papers hold no answer; its papers are left out", i + 1)
            continue
        rows += read_as_runs(reader, [documents[p] for p in fold], asked, settings, workdir / "cache", progress)
    gold = coding_gold(coding)
    data = cf.labelled(rows, {p: documents[p].text for p in papers}, {q.id: q.kind for q in asked.questions},
                       lambda row, item: cf.gold_label(item, gold, unanswerable=()))
    try:
        calibrator = cf.fit(data.x, data.y, {
            "description": f"cross-fitted by mlpsych adapt: {folds} folds of {len(papers)} coded papers, each read "
                           f"by a reader adapted on the others (windows read: {settings.retrieval.read})",
            "papers": papers}, groups=data.papers)
    except cf.CalibratorError as error:
        return CrossFitted(None, f"{error} among the fold readers' answers ({len(data.y)} labelled)")
    return CrossFitted(calibrator)


def reader_calibrator(model: str) -> Path | None:
    """The calibrator a reader folder carries (written by ``mlpsych adapt``), or None."""
    path = Path(model) / CALIBRATOR_FILE
    return path if path.is_file() else None
