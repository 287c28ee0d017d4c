"""Hand-computed checks of every metric and matching rule in mlpsych.evaluation.metrics."""

from __future__ import annotations

import math

import pytest

from mlpsych.evaluation.metrics import (
    aggregate,
    exact_match,
    mention_candidates,
    mentions,
    normalize_answer,
    score_item,
    token_f1,
)


def test_normalize_answer_follows_squad():
    assert normalize_answer("The Support-Vector Machines!") == "supportvector machines"
    assert normalize_answer("  an   R  package ") == "r package"


def test_token_f1_hand_values():
    # gold [random, forests] vs pred [random, forest, model]: 1 common, P=1/3, R=1/2 -> F1=0.4
    assert token_f1("random forests", "random forest model") == pytest.approx(0.4)
    assert token_f1("LASSO", "lasso regression") == pytest.approx(2 / 3)
    assert token_f1("SPSS", "Python") == 0.0
    assert token_f1("the", "") == 1.0  # both normalize to nothing


def test_exact_match_after_normalization():
    assert exact_match("cross-validation", "Crossvalidation")  # hyphen is punctuation, dropped
    assert not exact_match("cross-validation", "cross validation")
    assert exact_match("The random forest.", "random forest")


def test_mentions_one_letter_gold_only_as_whole_word():
    assert mentions("R", "analyses were run in R (R Core Team, 2020)")
    assert mentions("R", "the lme4 R package")
    assert mentions("R", "R's caret")
    assert not mentions("R", "randomForest package")
    assert not mentions("R", "ranger")
    assert not mentions("R", "SPSS")


def test_mentions_parenthesis_rule():
    gold = "support vector machines (SVMs)"
    assert mention_candidates(gold) == [gold, "support vector machines", "SVMs"]
    assert mentions(gold, "SVMs")
    assert mentions(gold, "support vector machines")
    assert mentions(gold, "linear support vector machines with an RBF kernel")
    assert not mentions(gold, "support vector")
    assert not mentions("support vector machines", "SVMs")  # no parenthesis, no rule
    # inner part with punctuation, as in the gold "... (BERT;)"
    assert mentions("Bidirectional Encoder Representations from Transformers (BERT;)", "fine-tuned BERT")


def test_mentions_without_spaces_and_hyphens():
    assert mentions("cross-validation", "10-fold cross validation")
    assert mentions("crossvalidation", "cross-validation")
    assert mentions("cross validation", "crossvalidation")
    assert mentions("random forest", "randomforest")
    assert not mentions("cross-validation", "validation")


def test_mentions_short_acronym_is_substring_unless_configured():
    # The paper's rule protects one-letter answers only: "RF" is found inside "performance".
    assert mentions("random forests (RF)", "model performance")
    assert not mentions("random forests (RF)", "model performance", whole_word_max_len=2)
    assert mentions("random forests (RF)", "RF", whole_word_max_len=2)


def test_empty_gold_scores_one_only_without_predictions_and_has_no_f1():
    nothing = score_item([], [], similarity=lambda a, b: 0.0)
    assert (nothing.em, nothing.smat, nothing.ment, nothing.concat_f1) == (1, 1, 1, 1)
    something = score_item([], ["SAS"], similarity=lambda a, b: 1.0)
    assert (something.em, something.smat, something.ment, something.concat_f1) == (0, 0, 0, 0)
    # F1 of an empty gold list is undefined (the paper's np.mean([]) is NaN), with or without predictions
    assert math.isnan(nothing.f1) and math.isnan(something.f1)
    blank = score_item([], ["  ", ""])  # blank answers are no answers
    assert blank.em == 1.0 and math.isnan(blank.f1) and blank.n_pred == 0 and blank.smat is None


# Worked example 1
# gold  = ["random forests (RF)", "LASSO"]; preds = ["random forest", "RF", "lasso regression", "k-means"]
# F1:   gold1 [random, forests, rf]: vs "random forest" P=1/2 R=1/3 F1=0.4; vs "RF" P=1 R=1/3 F1=0.5 -> 0.5
#       gold2 [lasso]: vs "lasso regression" P=1/2 R=1 F1=2/3                                     -> 2/3
#       F1 = (0.5 + 2/3) / 2 = 7/12
# EM 0; Ment: gold1 by its parenthesis part "RF", gold2 inside "lassoregression" -> 1
# SMat (injected): gold1~"random forest" 0.9 > 0.7; gold2~"lasso regression" 0.7, not above 0.7 -> 0.5
# MultiSpanQA exact: no prediction equals a gold span -> tp 0
# MultiSpanQA partial: best precision per prediction 1/2, 1, 1/2, 0 -> sum 2; best recall per gold 1/3, 1 -> 4/3
# Qasper: gold joined [random, forests, rf, lasso], preds joined [random, forest, rf, lasso, regression, kmeans]
#         common 3: P=3/6, R=3/4 -> F1 = 0.6
# words: 2 + 1 + 2 + 1 = 6
GOLD_1 = ["random forests (RF)", "LASSO"]
PRED_1 = ["random forest", "RF", "lasso regression", "k-means"]
SIMS = {("random forests (RF)", "random forest"): 0.9, ("LASSO", "lasso regression"): 0.7}


def table_similarity(a: str, b: str) -> float:
    return SIMS.get((a, b), 0.1)


def test_score_item_worked_example():
    item = score_item(GOLD_1, PRED_1, similarity=table_similarity)
    assert item.f1 == pytest.approx(7 / 12)
    assert item.em == 0.0
    assert item.ment == 1.0
    assert item.smat == 0.5
    assert item.exact_tp == 0
    assert item.partial_precision_sum == pytest.approx(2.0)
    assert item.partial_recall_sum == pytest.approx(4 / 3)
    assert item.concat_f1 == pytest.approx(0.6)
    assert (item.n_gold, item.n_pred, item.pred_words) == (2, 4, 6)
    assert score_item(GOLD_1, PRED_1, similarity=table_similarity, threshold=0.65).smat == 1.0


def test_no_predictions_for_answerable_gold_scores_zero():
    item = score_item(["SVM"], [], similarity=table_similarity)
    assert (item.f1, item.em, item.smat, item.ment, item.concat_f1) == (0, 0, 0, 0, 0)


def test_duplicates_are_dropped():
    item = score_item(["Python", "python", "scikit-learn"], ["Python", "Python."])
    assert item.n_gold == 2 and item.n_pred == 1
    assert item.f1 == pytest.approx(0.5)
    assert score_item(["Python", "python"], ["Python", "Python."], dedupe=False).n_pred == 2


# Worked example 2: aggregate four items
# item1 = worked example 1
# item2: gold ["SPSS", "R"], preds ["SPSS", "Python"]: F1 (1+0)/2, EM 0.5, Ment 0.5, tp 1,
#        partial precision 1+0, partial recall 1+0, Qasper [spss, r] vs [spss, python] -> 0.5, words 2
# item3: empty gold, no prediction -> EM, Ment 1, F1 undefined, Qasper 1
# item4: empty gold, ["SAS"] -> EM, Ment 0, F1 undefined, Qasper 0, words 1
# F1 over items 1-2 only = (7/12 + 0.5) / 2 = 13/24; EM = (0 + .5 + 1 + 0)/4 = 0.375; Ment = (1 + .5 + 1 + 0)/4
# = 0.625
# spans/answer = (4+2+0+1)/4 = 1.75; words/span = (6+2+0+1)/7 = 9/7
# MultiSpanQA exact micro: tp 1, predicted 7, gold 4 -> P 1/7, R 1/4, F1 = 2/11
# partial micro: P = (2+1+0)/7 = 3/7, R = (4/3+1)/4 = 7/12, F1 = 2PR/(P+R) = 42/85
# Qasper = (0.6 + 0.5 + 1 + 0)/4 = 0.525
def test_aggregate_worked_example():
    items = [
        score_item(GOLD_1, PRED_1),
        score_item(["SPSS", "R"], ["SPSS", "Python"]),
        score_item([], []),
        score_item([], ["SAS"]),
    ]
    result = aggregate(items)
    assert result["F1"] == pytest.approx(13 / 24)  # was (7/12 + .5 + 1 + 0)/4 = 25/48 with empty gold counted
    assert result["EMat"] == pytest.approx(0.375)
    assert result["Ment"] == pytest.approx(0.625)
    assert math.isnan(result["SMat"])
    assert result["spans/answer"] == pytest.approx(1.75)
    assert result["words/span"] == pytest.approx(9 / 7)
    assert result["P"] == pytest.approx(1 / 7)
    assert result["R"] == pytest.approx(1 / 4)
    assert result["mF1"] == pytest.approx(2 / 11)
    assert result["pP"] == pytest.approx(3 / 7)
    assert result["pR"] == pytest.approx(7 / 12)
    assert result["pF1"] == pytest.approx(42 / 85)
    assert result["qF1"] == pytest.approx(0.525)
    assert result["n"] == 4


def test_aggregate_of_nothing_is_nan():
    assert math.isnan(aggregate([])["F1"])


def test_aggregate_of_empty_gold_only_has_no_f1():
    result = aggregate([score_item([], []), score_item([], ["SAS"])])
    assert math.isnan(result["F1"])
    assert result["EMat"] == 0.5 and result["Ment"] == 0.5 and result["n"] == 2
    # the prediction on an empty-gold paper is a false positive of the micro P/R/F1
    assert (result["P"], result["R"], result["mF1"]) == (0.0, 0.0, 0.0)
