"""Calibrated confidence: the probability that a coder marks an answer correct, so the least sure are checked first.

A logistic model on what a run knows of each final answer (:data:`FEATURES`): the reader's score (and its log), the
answer's rank and the number of answers in its list (paper, question, bridge entity), how many of the question's
readers gave it, how often its text recurs in the paper, whether it is grounded in the paper, the question's kind
and the answer's length. It is stored as JSON (weights, the features' means and scales, what it was fitted on):
nothing is pickled.

Labels come from coders (a coded sheet, read as `mlpsych agree` reads it: marked correct = 1; marked wrong, or
corrected and left unmarked = 0) or from gold (an answer whose best word-overlap F1 with a gold answer of its paper
and question reaches ``GOLD_F1``; a paper whose gold is empty makes every answer wrong). mlpsych ships a default
fitted on the development papers (``default_calibrator.json``, how in its ``fitted_on``) until a study fits its own
with ``mlpsych calibrate``.
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from mlpsych.answers import AnswerStage
from mlpsych.errors import UserError
from mlpsych.evaluation.metrics import token_f1
from mlpsych.files import write_whole
from mlpsych.provenance import version

log = logging.getLogger(__name__)


class CalibratorError(UserError):
    """A calibrator file that is not one, or coding that cannot fit one: the message says which."""


FEATURES = ("score", "log_rank", "log_answers", "agreement", "log_recurrence", "grounded", "phrase", "log_words",
            "log_score")
# A reader's score is a probability crowded near 0; its log spreads the answers a logistic model must tell apart.
# The floor keeps an answer without a score (0) from dominating the fit.
SCORE_FLOOR = 1e-4
# The L2 penalties a fit chooses from by cross-validation over papers: a study's coding has a few dozen correct
# answers, too few for nine free weights (the benchmark's calibrators fitted on 4-8 papers were over-confident);
# the grid spans "almost free" to "almost only the base rate". Fixed before any figure with it was measured.
L2_GRID = (0.1, 1.0, 10.0, 100.0, 1000.0)
L2_UNGROUPED = 1.0  # the penalty when the answers' papers are not known (or fewer than two)
CV_FOLDS = 5
GOLD_F1 = 0.5  # word-overlap F1 with a gold answer from which an answer counts as one a coder would accept
DEFAULT_FILE = "default_calibrator.json"
RECURRENCE_CAP = 50


@dataclass(frozen=True)
class Scored:
    """What the calibrator reads of one final answer (from a run's Answer or a results-sheet row)."""

    paper_id: str
    question_id: str
    text: str
    score: float
    n_models: int
    grounded: bool
    bridge_entity: str | None = None


def scored_from_row(row: dict[str, Any]) -> Scored:
    """A results-sheet (or JSONL) answer row; ``models`` is a list or a "+"-joined string."""
    from mlpsych.evaluation.evaluate import parse_models

    start = row.get("start")
    stage = str(row.get("stage") or "").strip().lower()
    try:
        score = float(row.get("score") or 0.0)
    except (TypeError, ValueError):
        score = 0.0
    return Scored(str(row.get("paper_id") or "").strip(), str(row.get("question_id") or "").strip(),
                  str(row.get("answer") or ""), score, max(1, len(parse_models(row.get("models")))),
                  start not in (None, "") and stage != "ungrounded", str(row.get("bridge_entity") or "") or None)


def fold(text: str) -> str:
    """Text with case and spacing aside: white space runs as one space, lower case."""
    return " ".join(text.split()).lower()


def recurrence(text: str, folded_paper: str) -> int:
    """How often the answer's text occurs in the paper (``fold``ed once per paper: scanning it with a case-blind
    regex per answer cost 1.5 ms an answer, a minute of a thousand-paper run), capped."""
    needle = fold(text)
    return min(RECURRENCE_CAP, folded_paper.count(needle)) if needle else 0


def reader_counts(items: Sequence[Scored], readers: dict[str, int] | None = None) -> dict[str, int]:
    """Question id -> the readers an answer's agreement is a share of: the question's ``readers`` where they are
    known (a run knows its questions' models), else the most readers any answer of that question had (a coded
    sheet, of many papers, does not say). A run's own answers never set it: the most over a run's papers made one
    paper's confidence depend on which other papers were read with it."""
    most: dict[str, int] = defaultdict(lambda: 1)
    if readers is not None:
        most.update({q: max(1, n) for q, n in readers.items()})
        return most
    for item in items:
        most[item.question_id] = max(most[item.question_id], item.n_models)
    return most


def feature_matrix(items: Sequence[Scored], texts: dict[str, str], kinds: dict[str, str],
                   readers: dict[str, int] | None = None) -> np.ndarray:
    """One row of :data:`FEATURES` per answer. Ranks and list sizes are within (paper, question, bridge entity);
    agreement is the share of the question's readers that gave the answer (:func:`reader_counts`; 1 for a single
    reader)."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    most = reader_counts(items, readers)
    for i, item in enumerate(items):
        groups[(item.paper_id, item.question_id, item.bridge_entity)].append(i)
    rank = [0] * len(items)
    size = [0] * len(items)
    for members in groups.values():
        for r, i in enumerate(sorted(members, key=lambda i: -items[i].score), start=1):
            rank[i], size[i] = r, len(members)
    folded: dict[str, str] = {}
    rows = []
    for i, item in enumerate(items):
        if item.paper_id not in folded:
            folded[item.paper_id] = fold(texts.get(item.paper_id, ""))
        rows.append([
            item.score, math.log(rank[i]), math.log(size[i]),
            item.n_models / max(most[item.question_id], item.n_models),
            math.log1p(recurrence(item.text, folded[item.paper_id])), float(item.grounded),
            float(kinds.get(item.question_id) == "phrase"), math.log1p(len(item.text.split())),
            math.log(max(item.score, SCORE_FLOOR)),
        ])
    return np.array(rows, dtype=float).reshape(len(items), len(FEATURES))


@dataclass
class Calibrator:
    """A logistic model on standardized features; ``fitted_on`` says on what (shown in the run sheet)."""

    weights: list[float]
    intercept: float
    mean: list[float]
    scale: list[float]
    fitted_on: dict
    features: tuple[str, ...] = FEATURES

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Probabilities for rows of :data:`FEATURES` (``feature_matrix``), read through the features this
        calibrator was fitted on: a file fitted before a feature was added keeps predicting as it did."""
        if x.shape[0] == 0:
            return np.zeros(0)
        x = x[:, [FEATURES.index(name) for name in self.features]]
        z = (x - np.array(self.mean)) / np.array(self.scale)
        return _logistic(z @ np.array(self.weights) + self.intercept)

    def to_json(self) -> str:
        return json.dumps({"features": list(self.features), "weights": self.weights, "intercept": self.intercept,
                           "mean": self.mean, "scale": self.scale, "fitted_on": self.fitted_on}, indent=1)

    def save(self, path: str | Path) -> None:
        """Written whole (:func:`mlpsych.files.write_whole`): two writers of one file at once (two `calibrate
        --out`, two adapts of one reader folder) shared one work file, and the first failed as a bug."""
        write_whole(Path(path), self.to_json())

    @classmethod
    def load(cls, path: str | Path | None = None) -> "Calibrator":
        """A calibrator file, or the shipped default (``path`` None). Raises CalibratorError for a file that is not
        one (or was fitted on other features)."""
        if path is None:
            raw = importlib.resources.files("mlpsych.coding").joinpath(DEFAULT_FILE).read_text(encoding="utf-8")
            source = DEFAULT_FILE
        else:
            try:
                raw = Path(path).read_text(encoding="utf-8")
            except OSError as error:
                raise CalibratorError(f"calibrator {path}: {error.strerror or error}") from None
            source = str(path)
        try:
            data = json.loads(raw)
            features = tuple(data["features"])
            unknown = [f for f in features if f not in FEATURES]
            if unknown or not (len(features) == len(data["weights"]) == len(data["mean"]) == len(data["scale"])):
                raise CalibratorError(f"calibrator {source}: fitted on features {list(features)}, this version "
                                      f"knows {list(FEATURES)}")
            weights, mean, scale = ([float(v) for v in data[key]] for key in ("weights", "mean", "scale"))
            intercept = float(data["intercept"])
            # a file from a shared reader folder is not trusted: text or NaN here failed or gave NaN confidences
            # only after every paper was read
            if not all(math.isfinite(v) for v in [intercept, *weights, *mean, *scale]) or min(scale) <= 0:
                raise CalibratorError(f"calibrator {source}: not a calibrator file (its weights, intercept, means "
                                      "and scales must be finite numbers, the scales above 0)")
            return cls(weights, intercept, mean, scale, dict(data.get("fitted_on") or {}), features)
        except (ValueError, KeyError, TypeError) as error:  # JSON or numbers that do not parse
            raise CalibratorError(f"calibrator {source}: not a calibrator file ({error})") from None


def _logistic(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def _newton(z: np.ndarray, y: np.ndarray, l2: float, iterations: int = 50) -> np.ndarray:
    """Weights (the last one the intercept, not penalized) of a penalized logistic fit on standardized ``z``."""
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[-1] = 0.0
    for _ in range(iterations):
        p = _logistic(z @ w)
        gradient = z.T @ (y - p) - penalty * w
        hessian = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hessian, gradient)
        w += step
        if np.abs(step).max() < 1e-8:
            break
    return w


def _standardized(x: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return np.hstack([(x - mean) / scale, np.ones((len(x), 1))])


def _moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    return x.mean(axis=0), scale


def choose_l2(x: np.ndarray, y: np.ndarray, groups: Sequence[str], grid: Sequence[float] = L2_GRID,
              folds: int = CV_FOLDS) -> float:
    """The penalty of ``grid`` with the least held-out log loss, papers (``groups``) held out together in up to
    ``folds`` folds (answers of one paper are alike, so holding out single answers would favour overfitting);
    ties go to the larger penalty. A fold whose training part has one class only is skipped; with no fold left
    (or fewer than two papers) it is :data:`L2_UNGROUPED`."""
    papers = sorted(set(groups))
    if len(papers) < 2:
        return L2_UNGROUPED
    fold_of = {paper: i % min(folds, len(papers)) for i, paper in enumerate(papers)}
    which = np.array([fold_of[g] for g in groups])
    loss = np.zeros(len(grid))
    scored = False
    for f in set(fold_of.values()):
        train, test = which != f, which == f
        if y[train].min() == y[train].max():
            continue
        mean, scale = _moments(x[train])
        z_train, z_test = _standardized(x[train], mean, scale), _standardized(x[test], mean, scale)
        for i, l2 in enumerate(grid):
            p = np.clip(_logistic(z_test @ _newton(z_train, y[train], l2)), 1e-6, 1 - 1e-6)
            loss[i] -= float(np.sum(y[test] * np.log(p) + (1 - y[test]) * np.log(1 - p)))
        scored = True
    if not scored:
        return L2_UNGROUPED
    best = loss.min()
    return max(l2 for l2, value in zip(grid, loss) if value <= best + 1e-9)


def fit(x: np.ndarray, y: Sequence[bool], fitted_on: dict, l2: float | None = None,
        groups: Sequence[str] | None = None) -> Calibrator:
    """Logistic regression by Newton steps with an L2 penalty on the weights (not the intercept), on features
    standardized by their mean and spread (a constant feature gets scale 1). The penalty is ``l2`` when given,
    else chosen by :func:`choose_l2` over the answers' papers ``groups`` (:data:`L2_UNGROUPED` without them)."""
    y = np.asarray(y, dtype=float)
    if len(y) == 0 or y.min() == y.max():
        raise CalibratorError("a calibrator needs answers marked correct and answers marked wrong")
    if l2 is None:
        l2 = choose_l2(x, y, groups) if groups is not None else L2_UNGROUPED
    mean, scale = _moments(x)
    w = _newton(_standardized(x, mean, scale), y, l2)
    return Calibrator([float(v) for v in w[:-1]], float(w[-1]), [float(v) for v in mean], [float(v) for v in scale],
                      {**fitted_on, "answers": int(len(y)), "correct": int(y.sum()), "l2": l2, "mlpsych": version()})


def scored_from_answer(answer) -> Scored:
    """A run's final :class:`~mlpsych.answers.Answer` as the calibrator reads it (as its sheet row would be)."""
    return Scored(answer.doc_id, answer.question_id, answer.text, answer.score, max(1, len(answer.models)),
                  answer.start is not None and answer.stage != AnswerStage.UNGROUNDED, answer.bridge_entity)


def add_confidence(answers: Sequence, texts: dict[str, str], kinds: dict[str, str], calibrator: Calibrator,
                   by_question: dict[str, Calibrator] | None = None, readers: dict[str, int] | None = None) -> None:
    """The confidence stage: every final answer's ``confidence`` (the other rows are not shown to coders), from
    its question's calibrator in ``by_question`` (an adapted reader's own) or else ``calibrator``; each answer is
    predicted by that one calibrator only. ``readers``: question id -> its number of readers (see
    :func:`reader_counts`)."""
    finals = [a for a in answers if a.final]
    x = feature_matrix([scored_from_answer(a) for a in finals], texts, kinds, readers)
    chosen = [(by_question or {}).get(a.question_id, calibrator) for a in finals]
    p = np.zeros(len(finals))
    for each in {id(c): c for c in chosen}.values():
        mine = np.array([c is each for c in chosen])
        p[mine] = each.predict(x[mine])
    for answer, value in zip(finals, p):
        answer.confidence = round(float(value), 4)


# ----------------------------------------------------------------------------------------------------------
# Labels and how good a calibrator is
# ----------------------------------------------------------------------------------------------------------


def gold_label(item: Scored, gold: dict[str, dict[str, list[str]]], unanswerable: Sequence[str] = ("q2",),
               anchor: str = "q1") -> bool | None:
    """Whether a coder would accept the answer, judged by gold: best word-overlap F1 with a gold answer of its
    paper and question reaching ``GOLD_F1``. None where the gold does not cover the paper for that question (the
    dataset's rules: a paper of the ``anchor`` question absent from an ``unanswerable`` one has no answer)."""
    from mlpsych.evaluation.evaluate import question_of

    question = question_of(item.question_id, gold)
    if question is None:
        return None
    answers = gold[question].get(item.paper_id)
    if answers is None:
        if question not in unanswerable or item.paper_id not in gold.get(anchor, {}):
            return None
        answers = []
    return any(token_f1(g, item.text) >= GOLD_F1 for g in answers)


def sheet_label(row: dict[str, Any]) -> bool | None:
    """A coder's verdict on an answers-sheet row, as `mlpsych agree` counts it (:func:`mlpsych.marks.verdict`:
    the mark written wins, a correction left unmarked is wrong); None: not judged, an unreadable mark, or an answer
    the coder added (not the tool's, so nothing to calibrate)."""
    from mlpsych.coding.coded import CODER_STAGE
    from mlpsych.marks import row_stage, verdict

    if row_stage(row) == CODER_STAGE:
        return None
    try:
        return verdict(row)
    except ValueError:
        return None


def merged_sheets(sheets: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The answer rows of several coded sheets, an answer in more than one of them once: copies of one run's sheet
    coded by different coders (or each coding some papers) would count it twice and double the size of its list,
    a feature. The coded copy of a row wins over an uncoded one; two verdicts that differ leave it unlabelled (as
    `mlpsych adapt` leaves such a span out)."""
    rows: list[dict[str, Any]] = []
    found: dict[tuple, tuple[int, int]] = {}  # answer -> (its index in rows, the sheet it came from)
    disputed: set[tuple] = set()
    for number, sheet in enumerate(sheets):
        for row in sheet:
            key = tuple(str(row.get(k) or "").strip() for k in ("paper_id", "question_id", "bridge_entity", "stage",
                                                                "answer", "start"))
            index, origin = found.get(key, (len(rows), number))
            if origin == number:  # a new answer, or one this sheet itself holds twice
                found.setdefault(key, (len(rows), number))
                rows.append(row)
                continue
            first, other = sheet_label(rows[index]), sheet_label(row)
            if key in disputed or other is None:
                continue
            if first is None:
                rows[index] = row
            elif other != first:
                rows[index] = {**rows[index], "correct": None, "corrected_answer": None}
                disputed.add(key)
    if disputed:
        log.warning("%d answer(s) marked differently in two sheets are left out", len(disputed))
    return rows


@dataclass
class Labelled:
    """Answers a label has a verdict on: features, verdicts, each answer's paper (what the penalty's
    cross-validation holds out together) and question."""

    x: np.ndarray
    y: np.ndarray
    papers: list[str]
    questions: list[str]


def labelled(rows: Sequence[dict[str, Any]], texts: dict[str, str], kinds: dict[str, str], label) -> Labelled:
    """Features and labels of the final answer rows that ``label`` (a :class:`Scored` or row -> bool | None)
    has a verdict on; features are computed over all final rows, so ranks count the unlabelled answers too."""
    from mlpsych.coding.coded import CODER_STAGE
    from mlpsych.marks import is_final, row_stage

    finals = [r for r in rows if is_final(r) and str(r.get("answer") or "").strip() and row_stage(r) != CODER_STAGE]
    items = [scored_from_row(r) for r in finals]
    x = feature_matrix(items, texts, kinds)
    verdicts = [label(r, item) for r, item in zip(finals, items)]
    keep = [i for i, v in enumerate(verdicts) if v is not None]
    return Labelled(x[keep], np.array([verdicts[i] for i in keep], dtype=bool), [items[i].paper_id for i in keep],
                    [items[i].question_id for i in keep])


@dataclass
class CalibrationReport:
    """Expected calibration error (10 equal-width bins), Brier score, and the share of wrong answers among the
    least-sure ``review_share`` of the answers, beside the most any order could find there (``review_share`` over
    the share of answers that are wrong, at most 1): where most answers are wrong, no confidence finds most of
    them in a short review."""

    answers: int
    correct: int
    ece: float
    brier: float
    review_share: float
    wrong_found: float
    wrong_found_best: float

    def line(self) -> str:
        return (f"{self.answers} answers ({self.correct} correct): calibration error {self.ece:.3f}, Brier "
                f"{self.brier:.3f}; reviewing the least-sure {self.review_share:.0%} finds "
                f"{self.wrong_found:.0%} of the wrong answers (at most {self.wrong_found_best:.0%} in any order)")


def report(confidence: Iterable[float], labels: Iterable[bool], review_share: float = 0.3,
           bins: int = 10) -> CalibrationReport:
    p = np.asarray(list(confidence), dtype=float)
    y = np.asarray(list(labels), dtype=float)
    edges = np.minimum((p * bins).astype(int), bins - 1)
    ece = sum(abs(p[edges == b].mean() - y[edges == b].mean()) * (edges == b).sum() for b in range(bins)
              if (edges == b).any()) / max(1, len(p))
    order = np.argsort(p, kind="stable")
    reviewed = order[: math.ceil(review_share * len(p))]
    wrong = (y == 0).sum()
    found = float((y[reviewed] == 0).sum() / wrong) if wrong else float("nan")
    best = float(min(len(reviewed), wrong) / wrong) if wrong else float("nan")
    return CalibrationReport(len(p), int(y.sum()), float(ece), float(np.mean((p - y) ** 2)) if len(p) else math.nan,
                             review_share, found, best)
