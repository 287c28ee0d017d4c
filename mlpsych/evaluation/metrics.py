"""Answer-list metrics the way the MLPsych paper scores them, plus the multi-span views it leaves out.

One *item* is one paper and one question: a list of gold spans against a list of predicted answers.

Paper metrics (max over predictions for each gold answer, averaged over gold answers):

- **F1**: SQuAD word overlap after SQuAD normalization.
- **EM**: a prediction equal to the gold answer after normalization.
- **SMat** (Similar Match): a prediction whose embedding cosine with the gold answer exceeds a threshold
  (0.7 by default); the similarity function is injected, so everything else runs without a model.
- **Ment** (Mentions): the gold answer is contained in a prediction, with the paper's rules: a gold answer
  ending in a parenthesis ("support vector machines (SVMs)") also matches either part alone; containment is
  checked after normalization and removal of all spaces ("cross-validation" ~ "cross validation"); a gold
  answer of one letter ("R") matches only as a whole word.
- Empty gold (unanswerable, e.g. a q2 paper without ML software): EM, SMat and Ment are 1 if nothing is
  predicted, else 0; F1 is undefined (NaN) and left out of the F1 mean, as in the paper's evaluation (its
  ``np.mean([])`` is NaN, which pandas' mean skips).

Because max-per-gold metrics never punish extra predictions, an item also records what micro-averaged
precision/recall needs (MultiSpanQA style, exact and partial), the F1 of the concatenated spans (Qasper
style), the number of predicted spans and their words.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

SimilarityFn = Callable[[str, str], float]

DEFAULT_SIMILARITY_THRESHOLD = 0.7

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
# "head (inner)" at the very end of a gold answer; the inner part holds no further parentheses.
_TRAILING_PARENTHESIS = re.compile(r"^(?P<head>.*?\S)\s*\((?P<inner>[^()]*)\)\s*$", re.DOTALL)


# ----------------------------------------------------------------------------------------------------------
# Normalization and per-pair scores
# ----------------------------------------------------------------------------------------------------------


def normalize_answer(text: str) -> str:
    """SQuAD normalization: lower case, ASCII punctuation dropped, articles removed, whitespace collapsed."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _tokens(text: str) -> list[str]:
    return normalize_answer(text).split()


def token_f1(gold: str, pred: str) -> float:
    """SQuAD v2 word-overlap F1 of one gold answer and one prediction (1.0 when both normalize to nothing)."""
    gold_toks, pred_toks = _tokens(gold), _tokens(pred)
    if not gold_toks or not pred_toks:
        return float(gold_toks == pred_toks)
    common = sum((Counter(gold_toks) & Counter(pred_toks)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred_toks), common / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def exact_match(gold: str, pred: str) -> bool:
    """Equal after SQuAD normalization."""
    return normalize_answer(gold) == normalize_answer(pred)


def _overlap(gold: str, pred: str) -> tuple[float, float]:
    """(precision, recall) of the bag-of-words overlap of a prediction with a gold span."""
    gold_toks, pred_toks = _tokens(gold), _tokens(pred)
    if not gold_toks or not pred_toks:
        return 0.0, 0.0
    common = sum((Counter(gold_toks) & Counter(pred_toks)).values())
    return common / len(pred_toks), common / len(gold_toks)


def mention_candidates(gold: str) -> list[str]:
    """The gold answer and, when it ends in a parenthesis, the part before it and the part inside it."""
    candidates = [gold]
    match = _TRAILING_PARENTHESIS.match(gold.strip())
    if match:
        candidates += [match.group("head"), match.group("inner")]
    return [c for c in candidates if normalize_answer(c)]


def _nospace(text: str) -> str:
    return normalize_answer(text).replace(" ", "")


def _whole_word_in(candidate: str, pred: str) -> bool:
    """Case-insensitive match of ``candidate`` in ``pred`` bounded by non-alphanumeric characters."""
    needle = normalize_answer(candidate)
    pattern = r"(?<![0-9a-z])" + re.escape(needle) + r"(?![0-9a-z])"
    return re.search(pattern, pred.lower()) is not None or re.search(pattern, normalize_answer(pred)) is not None


def mentions(gold: str, pred: str, whole_word_max_len: int = 1) -> bool:
    """True when the gold answer (or a part of it, by the parenthesis rule) is contained in the prediction.

    Containment is tested on normalized text with all spaces removed, so hyphen and space variants match.
    Candidates of at most ``whole_word_max_len`` characters (the paper: one letter, e.g. "R") must instead
    stand as a whole word in the prediction, otherwise "R" would be found in nearly every answer.
    """
    pred_nospace = _nospace(pred)
    if not pred_nospace:
        return False
    for candidate in mention_candidates(gold):
        needle = _nospace(candidate)
        if len(needle) <= whole_word_max_len:
            if _whole_word_in(candidate, pred):
                return True
        elif needle in pred_nospace:
            return True
    return False


# ----------------------------------------------------------------------------------------------------------
# One item: a gold list against a prediction list
# ----------------------------------------------------------------------------------------------------------


@dataclass
class ItemScore:
    """Scores and counts for one paper and one question; ``smat`` is None when no similarity was given."""

    f1: float  # NaN for empty gold: undefined, left out of the F1 mean
    em: float
    smat: float | None
    ment: float
    n_gold: int
    n_pred: int
    pred_words: int
    exact_tp: int  # predicted spans equal (normalized) to a gold span: MultiSpanQA exact match
    partial_precision_sum: float  # per prediction, best overlap precision with any gold span
    partial_recall_sum: float  # per gold span, best overlap recall of any prediction
    concat_f1: float  # Qasper: F1 of all predictions joined against all gold spans joined


def clean_answers(texts: Iterable[str], dedupe: bool = True) -> list[str]:
    """Drop blank answers and, optionally, later duplicates of an answer (same normalized text)."""
    result: list[str] = []
    seen: set[str] = set()
    for text in texts:
        if text is None or not str(text).strip():
            continue
        text = str(text).strip()
        key = normalize_answer(text) or text.lower()
        if dedupe and key in seen:
            continue
        seen.add(key)
        result.append(text)
    return result


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _nanmean(values: Iterable[float]) -> float:
    """Mean of the defined values (NaN skipped, as pandas' mean does); NaN when none is defined."""
    defined = [v for v in values if not math.isnan(v)]
    return sum(defined) / len(defined) if defined else math.nan


def score_item(
    gold: Sequence[str],
    preds: Sequence[str],
    similarity: SimilarityFn | None = None,
    threshold: float = DEFAULT_SIMILARITY_THRESHOLD,
    whole_word_max_len: int = 1,
    dedupe: bool = True,
) -> ItemScore:
    """Score one prediction list against one gold list (both lists of answer strings)."""
    gold = clean_answers(gold, dedupe)
    preds = clean_answers(preds, dedupe)
    n_words = sum(len(p.split()) for p in preds)
    concat = token_f1(" ".join(gold), " ".join(preds))
    if not gold:
        empty = float(not preds)
        return ItemScore(math.nan, empty, empty if similarity else None, empty, 0, len(preds), n_words,
                         0, 0.0, 0.0, concat)
    f1 = _mean([max((token_f1(g, p) for p in preds), default=0.0) for g in gold])
    em = _mean([float(any(exact_match(g, p) for p in preds)) for g in gold])
    ment = _mean([float(any(mentions(g, p, whole_word_max_len) for p in preds)) for g in gold])
    smat = None
    if similarity is not None:
        smat = _mean([float(any(similarity(g, p) > threshold for p in preds)) for g in gold])
    gold_norm = {normalize_answer(g) for g in gold}
    exact_tp = sum(normalize_answer(p) in gold_norm for p in preds)
    partial_p = sum(max(_overlap(g, p)[0] for g in gold) for p in preds)
    partial_r = sum(max((_overlap(g, p)[1] for p in preds), default=0.0) for g in gold)
    return ItemScore(f1, em, smat, ment, len(gold), len(preds), n_words, exact_tp, partial_p, partial_r, concat)


# ----------------------------------------------------------------------------------------------------------
# Aggregation over items
# ----------------------------------------------------------------------------------------------------------


def _prf(tp: float, n_pred: int, n_gold: int) -> tuple[float, float, float]:
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def aggregate(items: Sequence[ItemScore]) -> dict[str, float]:
    """Dataset-level numbers: paper metrics and Qasper F1 averaged over items, P/R/F1 micro-averaged.

    F1 is averaged over the items where it is defined (not those with empty gold; NaN if there is none).

    Keys: F1, EMat, SMat (nan without similarity), Ment, spans/answer, words/span, P, R, mF1 (MultiSpanQA
    exact), pP, pR, pF1 (MultiSpanQA partial), qF1 (Qasper concatenated), n (items).
    """
    if not items:
        return {key: math.nan for key in COLUMNS}
    n_pred = sum(i.n_pred for i in items)
    n_gold = sum(i.n_gold for i in items)
    smat = [i.smat for i in items if i.smat is not None]
    exact = _prf(sum(i.exact_tp for i in items), n_pred, n_gold)
    partial_p = sum(i.partial_precision_sum for i in items) / n_pred if n_pred else 0.0
    partial_r = sum(i.partial_recall_sum for i in items) / n_gold if n_gold else 0.0
    partial_f = 2 * partial_p * partial_r / (partial_p + partial_r) if partial_p + partial_r else 0.0
    return {
        "F1": _nanmean(i.f1 for i in items),
        "EMat": _mean([i.em for i in items]),
        "SMat": _mean(smat) if len(smat) == len(items) else math.nan,
        "Ment": _mean([i.ment for i in items]),
        "spans/answer": n_pred / len(items),
        "words/span": sum(i.pred_words for i in items) / n_pred if n_pred else 0.0,
        "P": exact[0],
        "R": exact[1],
        "mF1": exact[2],
        "pP": partial_p,
        "pR": partial_r,
        "pF1": partial_f,
        "qF1": _mean([i.concat_f1 for i in items]),
        "n": float(len(items)),
    }


# Column order of the tables: the paper's six first, then the multi-span views.
COLUMNS = ("F1", "EMat", "SMat", "Ment", "spans/answer", "words/span", "P", "R", "mF1", "pP", "pR", "pF1",
           "qF1", "n")
PAPER_COLUMNS = COLUMNS[:6]
