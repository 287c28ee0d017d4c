"""Human validation: read back a coded "answers" sheet, report precision and agreement between coders.

A researcher marks each exported answer correct or not in the ``correct`` column (a second coder in
``correct_2`` or any ``correct_<name>``). Precision is the share of coded answers marked correct, by
question, model and stage; an answer counts for the same table rows as in ``mlpsych eval`` (ensemble rows
for ``combined``; a normalized answer for each model whose output held it and for ``combined``). The
``all`` rows count each of the tool's answers once; an ``ungrounded`` item (an LLM's, not found in the paper, not
one of the paper's answers unless the run kept them, as ``--preset reference`` does) has its own rows but is not in
them. A coder's mark is read as :func:`mlpsych.marks.verdict` reads it for ``mlpsych calibrate`` and ``adapt``
too: the mark a coder wrote wins, and an answer a coder corrected (``corrected_answer``, a second coder's
``corrected_answer_2``) without marking it counts as marked wrong. Answers a coder added (stage ``coder``, marked
correct by the review view) are not the tool's answers and are left out: counted, they would raise its precision.
Cohen's kappa is computed for every pair of coder columns over the answers both coded.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from mlpsych.answers import AnswerStage
from mlpsych.evaluation.evaluate import EvalInputError, parse_models, read_sheet, row_groups
from mlpsych.evaluation.sheets import check_coded
from mlpsych.marks import is_final, row_stage, verdict, warn_unreadable

logger = logging.getLogger(__name__)

ALL = "all"
# ``correct``, ``correct_2``, ``correct_maria``; a column a coder added by hand may read ``correct 2``, ``correct2``
# or ``correct (maria)`` (but ``corrected_answer`` is no coder's).
_CODER_COLUMN = re.compile(r"^correct(?:[\s_\-.]+\S.*|\d+)?$")


def coder_columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """``correct`` first, then ``correct_2`` and any other ``correct_<name>`` columns, in sheet order."""
    names = list(dict.fromkeys(k for row in rows for k in row if _CODER_COLUMN.match(k)))
    return sorted(names, key=lambda n: n != "correct")


@dataclass
class Coding:
    """One coded answer: the table rows it counts for (as in `mlpsych eval`) and each coder's mark."""

    question: str
    models: list[str]
    stage: str
    marks: dict[str, bool | None]
    final: bool = True  # one of the paper's answers; an ungrounded item is, only where the run kept them


def read_codings(path: str | Path) -> tuple[list[Coding], list[str]]:
    """Codings of the "answers" sheet and the coder columns found; unreadable marks are skipped with a warning,
    answers a coder added are left out (the module docstring says why)."""
    rows = read_sheet(path, "answers")
    coders = coder_columns(rows)
    if not coders:
        check_coded(rows, path)
        raise EvalInputError(f"{path}: sheet 'answers' has no 'correct' column to read codes from")
    found = [r for r in rows if row_stage(r) != AnswerStage.CODER.value]
    if len(found) < len(rows):
        logger.info("left out %d answer(s) coders added: they are not the tool's answers", len(rows) - len(found))
    rows = found
    warn_unreadable(rows, coders, path)
    codings = []
    models_of: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        models_of[str(row.get("question_id") or "").strip()].update(parse_models(row.get("models")))
    for row in rows:
        marks = {coder: _mark(row, coder) for coder in coders}
        question = str(row.get("question_id") or "").strip()
        stage = row_stage(row)
        groups = row_groups(row, "normalized" if stage != "extractive" else stage, len(models_of[question]) > 1)
        codings.append(Coding(question, groups, stage, marks, is_final(row)))
    return codings, coders


def _mark(row: dict[str, Any], coder: str) -> bool | None:
    """A coder's verdict on a row (:func:`mlpsych.marks.verdict`, whose docstring gives the rule); None: not judged
    or an unreadable mark (warned of once, by :func:`warn_unreadable`)."""
    try:
        return verdict(row, coder)
    except ValueError:
        return None


@dataclass
class PrecisionRow:
    """Precision of one (question, model, stage) group for each coder: coded answers and share correct."""

    question: str
    model: str
    stage: str
    n: int
    coded: dict[str, int]
    precision: dict[str, float]


def precision_table(codings: Sequence[Coding], coders: Sequence[str]) -> list[PrecisionRow]:
    """Precision by question, model and stage, then an ``all`` row per question and one overall (of the tool's
    answers: ungrounded items left out, see the module docstring)."""
    keys = list(dict.fromkeys((c.question, m, c.stage) for c in codings for m in c.models))
    keys.sort(key=lambda k: (k[0], k[1] == "combined", k[1], k[2]))
    groups: list[tuple[str, str, str, list[Coding]]] = []
    answers = [c for c in codings if c.final]
    for question in dict.fromkeys(k[0] for k in keys):
        for key in (k for k in keys if k[0] == question):
            members = [c for c in codings if c.question == key[0] and key[1] in c.models and c.stage == key[2]]
            groups.append((*key, members))
        groups.append((question, ALL, "", [c for c in answers if c.question == question]))
    groups.append((ALL, ALL, "", answers))
    return [_precision_row(q, m, s, members, coders) for q, m, s, members in groups]


def _precision_row(question: str, model: str, stage: str, members: Sequence[Coding], coders: Sequence[str]
                   ) -> PrecisionRow:
    coded, precision = {}, {}
    for coder in coders:
        marks = [c.marks[coder] for c in members if c.marks[coder] is not None]
        coded[coder] = len(marks)
        precision[coder] = sum(marks) / len(marks) if marks else math.nan
    return PrecisionRow(question, model, stage, len(members), coded, precision)


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float:
    """Cohen's kappa of two coders' binary marks; nan when chance agreement is total (one shared label)."""
    if len(a) != len(b):
        raise ValueError("coders must mark the same answers")
    n = len(a)
    if n == 0:
        return math.nan
    observed = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    if expected >= 1.0:
        return math.nan
    return (observed - expected) / (1 - expected)


@dataclass
class KappaRow:
    """Agreement of two coders over the answers both coded, for one question or ``all``."""

    coder_a: str
    coder_b: str
    question: str
    n: int
    agreement: float
    kappa: float


def kappa_table(codings: Sequence[Coding], coders: Sequence[str]) -> list[KappaRow]:
    """Kappa for every pair of coder columns, per question and overall."""
    rows = []
    questions = list(dict.fromkeys(c.question for c in codings))
    for first, second in itertools.combinations(coders, 2):
        for question in [*questions, ALL]:
            pairs = [(c.marks[first], c.marks[second]) for c in codings
                     if (question == ALL or c.question == question)
                     and c.marks[first] is not None and c.marks[second] is not None]
            a = [p[0] for p in pairs]
            b = [p[1] for p in pairs]
            agreement = sum(x == y for x, y in pairs) / len(pairs) if pairs else math.nan
            rows.append(KappaRow(first, second, question, len(pairs), agreement, cohen_kappa(a, b)))
    return rows


def _fmt(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.3f}"


def report_markdown(precision: Sequence[PrecisionRow], kappas: Sequence[KappaRow], coders: Sequence[str]) -> str:
    """Markdown report: the precision table, then the agreement table when there are two or more coders."""
    lines = ["### Precision (share of coded answers marked correct)", ""]
    header = ["question", "model", "stage", "answers"]
    for coder in coders:
        header += [f"coded ({coder})", f"precision ({coder})"]
    lines += ["| " + " | ".join(header) + " |", "|---|---|---|" + "---:|" * (len(header) - 3)]
    for row in precision:
        cells = [row.question, row.model, row.stage, str(row.n)]
        for coder in coders:
            cells += [str(row.coded[coder]), _fmt(row.precision[coder])]
        lines.append("| " + " | ".join(cells) + " |")
    if kappas:
        lines += ["", "### Agreement between coders", "",
                  "| coders | question | both coded | agreement | Cohen's kappa |", "|---|---|---:|---:|---:|"]
        for k in kappas:
            lines.append(f"| {k.coder_a} vs {k.coder_b} | {k.question} | {k.n} | {_fmt(k.agreement)} "
                         f"| {_fmt(k.kappa)} |")
    notes = _dash_notes(precision, kappas)
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


def _dash_notes(precision: Sequence[PrecisionRow], kappas: Sequence[KappaRow]) -> list[str]:
    """What each "–" of the report means: a figure that cannot be computed is shown as none, and a reader of the
    report (or a reviewer of the paper) must know why rather than take it for a missing or zero value."""
    notes = []
    if any(math.isnan(p) for row in precision for p in row.precision.values()):
        notes.append("– under precision: that coder marked none of these answers.")
    if any(k.n == 0 for k in kappas):
        notes.append("– where both coded is 0: the two coders marked none of the same answers.")
    if any(k.n and math.isnan(k.kappa) for k in kappas):
        notes.append("– under Cohen's kappa with answers both coded: kappa is undefined, both coders gave all of "
                     "them one and the same mark (chance agreement is total); report the agreement instead.")
    return notes


def report_csv(precision: Sequence[PrecisionRow], coders: Sequence[str]) -> str:
    """Precision table as CSV (one line per group)."""
    import csv
    import io

    from mlpsych.export import csv_text  # question ids, models and stages come from the coded sheet

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["question", "model", "stage", "answers",
                     *[f"{kind}_{coder}" for coder in coders for kind in ("coded", "precision")]])
    for row in precision:
        cells: list[Any] = [csv_text(row.question), csv_text(row.model), csv_text(row.stage), row.n]
        for coder in coders:
            p = row.precision[coder]
            cells += [row.coded[coder], "" if math.isnan(p) else f"{p:.6g}"]
        writer.writerow(cells)
    return buffer.getvalue()
