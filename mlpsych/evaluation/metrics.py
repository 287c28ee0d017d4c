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
from functools import lru_cache
from typing import Callable, Iterable, Sequence

SimilarityFn = Callable[[str, str], float]

DEFAULT_SIMILARITY_THRESHOLD = 0.7

_DROP_PUNCTUATION = str.maketrans("", "", string.punctuation)
_PREPARED_CACHE = 1 << 16  # answers prepared and kept: a study's items reuse a gold list for every model row
_ARTICLES = re.compile(r"\b(a|an|the)\b")
# "head (inner)" at the very end of a gold answer; the inner part holds no further parentheses.
_TRAILING_PARENTHESIS = re.compile(r"^(?P<head>.*?\S)\s*\((?P<inner>[^()]*)\)\s*$", re.DOTALL)


# ----------------------------------------------------------------------------------------------------------
# Normalization and per-pair scores
# ----------------------------------------------------------------------------------------------------------


def normalize_answer(text: str) -> str:
    """SQuAD normalization: lower case, ASCII punctuation dropped, articles removed, whitespace collapsed."""
    text = _ARTICLES.sub(" ", text.lower().translate(_DROP_PUNCTUATION))
    return " ".join(text.split())


def token_f1(gold: str, pred: str) -> float:
    """SQuAD v2 word-overlap F1 of one gold answer and one prediction (1.0 when both normalize to nothing)."""
    gold_answer, pred_answer = _answer(gold), _answer(pred)
    return _pair_f1(gold_answer, pred_answer, _common(gold_answer, pred_answer))


def exact_match(gold: str, pred: str) -> bool:
    """Equal after SQuAD normalization."""
    return normalize_answer(gold) == normalize_answer(pred)


def mention_candidates(gold: str) -> list[str]:
    """The gold answer and, when it ends in a parenthesis, the part before it and the part inside it."""
    candidates = [gold]
    match = _TRAILING_PARENTHESIS.match(gold.strip())
    if match:
        candidates += [match.group("head"), match.group("inner")]
    return [c for c in candidates if normalize_answer(c)]


def _nospace(text: str) -> str:
    return normalize_answer(text).replace(" ", "")


@dataclass(frozen=True)
class PreparedAnswer:
    """One answer string normalized once: every per-pair score reads these instead of normalizing the pair again
    (a 1,000-paper study normalized each answer once per gold answer it met)."""

    text: str
    normalized: str
    tokens: tuple[str, ...]
    counts: Counter
    nospace: str
    lower: str


@dataclass(frozen=True)
class MentionNeedle:
    """A gold answer's mention candidate: its space-free text, or the whole-word pattern a short one must match."""

    nospace: str
    whole_word: re.Pattern | None


def _answer(text: str) -> PreparedAnswer:
    normalized = normalize_answer(text)
    tokens = tuple(normalized.split())
    return PreparedAnswer(text, normalized, tokens, Counter(tokens), normalized.replace(" ", ""), text.lower())


@lru_cache(maxsize=_PREPARED_CACHE)
def prepare_answer(text: str) -> PreparedAnswer:
    """``text`` normalized, split and counted, once per distinct string (bounded cache; :func:`token_f1` of the
    joined lists, each seen once, does not fill it)."""
    return _answer(text)


@lru_cache(maxsize=_PREPARED_CACHE)
def mention_needles(gold: str, whole_word_max_len: int = 1) -> tuple[MentionNeedle, ...]:
    """The candidates of :func:`mention_candidates`, each with its whole-word pattern compiled once when it is
    short (``whole_word_max_len`` characters or fewer without spaces)."""
    needles = []
    for candidate in mention_candidates(gold):
        nospace = _nospace(candidate)
        pattern = None
        if len(nospace) <= whole_word_max_len:
            pattern = re.compile(r"(?<![0-9a-z])" + re.escape(normalize_answer(candidate)) + r"(?![0-9a-z])")
        needles.append(MentionNeedle(nospace, pattern))
    return tuple(needles)


def _mentioned(needles: Sequence[MentionNeedle], pred: PreparedAnswer) -> bool:
    """:func:`mentions` on prepared strings."""
    if not pred.nospace:
        return False
    for needle in needles:
        if needle.whole_word is not None:
            if any(needle.whole_word.search(text) is not None for text in (pred.lower, pred.normalized)):
                return True
        elif needle.nospace in pred.nospace:
            return True
    return False


def mentions(gold: str, pred: str, whole_word_max_len: int = 1) -> bool:
    """True when the gold answer (or a part of it, by the parenthesis rule) is contained in the prediction.

    Containment is tested on normalized text with all spaces removed, so hyphen and space variants match.
    Candidates of at most ``whole_word_max_len`` characters (the paper: one letter, e.g. "R") must instead
    stand as a whole word in the prediction, otherwise "R" would be found in nearly every answer.
    """
    return _mentioned(mention_needles(gold, whole_word_max_len), prepare_answer(pred))


def _common(gold: PreparedAnswer, pred: PreparedAnswer) -> int:
    """Words the two answers share (bag of words)."""
    if not gold.tokens or not pred.tokens:
        return 0
    return sum((gold.counts & pred.counts).values())


def _pair_f1(gold: PreparedAnswer, pred: PreparedAnswer, common: int) -> float:
    """:func:`token_f1` from the prepared answers and their shared word count."""
    if not gold.tokens or not pred.tokens:
        return float(gold.tokens == pred.tokens)
    if common == 0:
        return 0.0
    precision, recall = common / len(pred.tokens), common / len(gold.tokens)
    return 2 * precision * recall / (precision + recall)


def _pair_overlap(gold: PreparedAnswer, pred: PreparedAnswer, common: int) -> tuple[float, float]:
    """(precision, recall) of the bag-of-words overlap of a prediction with a gold span."""
    if not gold.tokens or not pred.tokens:
        return 0.0, 0.0
    return common / len(pred.tokens), common / len(gold.tokens)


def similar_hits(similarity: SimilarityFn, gold: Sequence[str], preds: Sequence[str], threshold: float) -> list[bool]:
    """Per gold answer, whether a prediction's similarity exceeds ``threshold``. A similarity with a ``matches``
    method (:class:`mlpsych.evaluation.similarity.EmbeddingSimilarity`) answers for the whole item at once."""
    matches = getattr(similarity, "matches", None)
    if matches is not None:
        return matches(gold, preds, threshold)
    return [any(similarity(g, p) > threshold for p in preds) for g in gold]


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
    golds, answers = [prepare_answer(g) for g in gold], [prepare_answer(p) for p in preds]
    common = [[_common(g, p) for p in answers] for g in golds]  # shared words of each (gold, prediction) pair
    f1 = _mean([max((_pair_f1(g, p, c) for p, c in zip(answers, row)), default=0.0)
                for g, row in zip(golds, common)])
    em = _mean([float(any(g.normalized == p.normalized for p in answers)) for g in golds])
    needles = [mention_needles(g, whole_word_max_len) for g in gold]
    ment = _mean([float(any(_mentioned(n, p) for p in answers)) for n in needles])
    smat = None
    if similarity is not None:
        smat = _mean([float(hit) for hit in similar_hits(similarity, gold, preds, threshold)])
    gold_norm = {g.normalized for g in golds}
    exact_tp = sum(p.normalized in gold_norm for p in answers)
    partial_p = sum(max(_pair_overlap(g, p, common[i][j])[0] for i, g in enumerate(golds))
                    for j, p in enumerate(answers))
    partial_r = sum(max((_pair_overlap(g, p, c)[1] for p, c in zip(answers, row)), default=0.0)
                    for g, row in zip(golds, common))
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
