"""Pattern signals that say a window is worth reading for a kind of question, beside the question's own words.

BM25 on the question text finds the words of the question, but the answer to "What machine learning techniques
were used?" is a window naming "random forests (RF)" and "10-fold cross-validation", words the question does
not contain. Each signal here scores windows by what answers of a kind look like:

* ``methods``: distinct machine-learning / text-analysis method names (a generic vocabulary written for this
  project) and "long form (ABBR)" definitions; generic words ("accuracy", "trained") count less;
* ``software``: distinct software, package and language names, "package"/"library"/"toolbox", version numbers;
* ``aims``: phrases that state a study's aim or research question ("we aimed to", "whether", "hypothesis");
* ``purpose``: "used / applied / employed ... to / for", "in order to", "goal", "purpose";
* ``early``: earlier windows first (aims and research questions sit in the abstract and introduction).

``methods`` and ``software`` also give each window its set of matched terms, so a selection can prefer windows
that add methods not yet covered (a paper's techniques are often named in different sections).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

import numpy as np

SIGNALS = ("question", "methods", "software", "aims", "purpose", "early")
# Signals whose matched terms can drive a diversity-aware selection.
TERM_SIGNALS = ("methods", "software")

# Specific method names (weight 1) and generic machine-learning words (weight GENERIC_WEIGHT): a window naming
# "lasso" and "random forest" says more than one saying "accuracy" and "trained".
_METHODS = """
neural network; artificial neural network; convolutional neural network; recurrent neural network;
long short-term memory; LSTM; CNN; RNN; ANN; DNN; DCNN; multilayer perceptron; perceptron; deep neural network;
transformer; BERT; RoBERTa; GPT; word2vec; GloVe; fastText; doc2vec; word embedding; sentence embedding;
random forest; decision tree; classification tree; regression tree; CART; gradient boosting; XGBoost; LightGBM;
CatBoost; AdaBoost; boosting; bagging; support vector machine; support vector regression; support vector; SVM; SVR;
naive Bayes; Bayesian network; k-nearest neighbor; k-nearest neighbour; nearest neighbor; kNN; k-means;
clustering; cluster analysis; hierarchical clustering; latent class analysis; mixture model;
latent Dirichlet allocation; LDA; topic model; topic modeling; topic modelling; structural topic model;
latent semantic analysis; latent semantic indexing; LSA; sentiment analysis; text mining; LIWC; bag-of-words;
n-gram; TF-IDF; named entity recognition; part-of-speech; tokenization; lemmatization; stemming;
logistic regression; linear regression; lasso; ridge; elastic net; discriminant analysis;
principal component analysis; PCA; factor analysis; dimensionality reduction; t-SNE; UMAP; feature selection;
feature importance; SHAP; permutation importance; cross-validation; crossvalidation; k-fold; leave-one-out;
grid search; reinforcement learning; fine-tuning; fine-tune; fine-tuned; pretrained; pre-trained;
association rule; apriori; hidden Markov model; Gaussian process; autoencoder; generative adversarial network;
language model; large language model; semi-supervised; self-supervised; gradient descent; backpropagation;
speech recognition; computer vision; image classification; object detection; network analysis; sequence analysis
"""
_GENERIC = """
machine learning; deep learning; natural language processing; artificial intelligence; classifier;
classification; regression; algorithm; trained; train; accuracy; precision; recall; F1; AUC; ROC;
training set; test set; validation set; training data; fold; tuning; hyperparameter; attention; encoder;
decoder; automated; computational; embedding; ensemble; supervised; unsupervised; regularization;
regularized; penalized; predictive model; prediction model; predictive modeling; area under the curve;
overfitting
"""
# Software: specific names (tools, packages, languages) and the generic words around them, kept apart so a
# benchmark can take a paper's own tools out of the vocabulary (``exclude``) and see what the generic words find.
_SOFTWARE_NAMES = """
Python; R; SPSS; Stata; SAS; MATLAB; Matlab; Mplus; scikit-learn; sklearn; caret; glmnet; randomForest; ranger;
xgboost; e1071; nnet; keras; Keras; TensorFlow; tensorflow; PyTorch; pytorch; Weka; WEKA; RapidMiner; KNIME; NLTK;
spaCy; gensim; Gensim; Hugging Face; HuggingFace; pandas; NumPy; numpy; SciPy; statsmodels; lme4; mlr; tidymodels;
quanteda; stm; topicmodels; tidytext; LIWC; Orange; JASP; jamovi; AMOS; lavaan; RStudio; CRAN; GitHub; Java; Julia;
Excel
"""
_SOFTWARE_WORDS = """
software; package; library; toolbox; toolkit; version; implemented; implementation; open-source; source code;
script; function
"""
_AIMS = """
aim; aimed; purpose; goal; objective; research question; hypothesis; hypotheses; hypothesize; hypothesized;
we investigate; we investigated; we examine; we examined; we explore; we explored; this study; the present study;
the current study; this paper; this research; whether; we propose; we test; we tested; to examine;
to investigate; to explore; to identify; to predict; to understand; to determine; to assess
"""
GENERIC_WEIGHT = 0.3

_ACRONYM_DEFINITION = re.compile(r"\b[A-Za-z][\w\-]+(?:\s+[\w\-]+){0,5}\s*\(([A-Z][A-Za-z0-9\-]*[A-Z][A-Za-z0-9\-]*s?)\)")
_VERSION = re.compile(r"\b(?:version|v\.?)\s*\d+(?:\.\d+)+|\b\d+\.\d+\.\d+\b", re.IGNORECASE)
_PURPOSE = re.compile(r"\b(?:used|use|using|applied|apply|employed|utili[sz]ed|adopted|performed|conducted)\b"
                      r"[^.]{0,120}?\b(?:to|for)\b|\bin order to\b|\b(?:aims?|aimed|goal|purpose|objective)\b",
                      re.IGNORECASE)


def _terms(block: str) -> list[str]:
    return sorted({t.strip() for t in " ".join(block.split()).split(";") if t.strip()}, key=len, reverse=True)


def term_pattern(terms: Sequence[str]) -> re.Pattern:
    """One regex for a vocabulary: hyphen/space/no separator between words, optional plural, word boundaries.

    A term written with a capital ("R", "BERT", "Python") matches case-sensitively, so "R" is not "r = .32".
    """
    parts = []
    for term in terms:
        words = [w for w in re.split(r"[\s\-]+", term) if w]
        body = r"[\s\-]*".join(re.escape(w) for w in words) + r"(?:s|es)?"
        parts.append(f"(?-i:{body})" if any(c.isupper() for c in term) else body)
    return re.compile(r"(?<!\w)(?:" + "|".join(parts) + r")(?!\w)", re.IGNORECASE)


def term_key(match: str) -> str:
    """Matched text folded to one key per term: "Random-Forests" and "random forest" are one method."""
    key = re.sub(r"[\s\-]+", " ", match.lower()).strip()
    return key[:-1] if key.endswith("s") and len(key) > 3 else key


def _kept(block: str, exclude: frozenset[str]) -> list[str]:
    """The vocabulary's terms whose key (as ``window_terms`` reports it) is not in ``exclude``."""
    return [t for t in _terms(block) if term_key(t) not in exclude]


@lru_cache(maxsize=None)
def _patterns(exclude: frozenset[str] = frozenset()) -> dict[str, re.Pattern]:
    software = sorted(_kept(_SOFTWARE_NAMES, exclude) + _kept(_SOFTWARE_WORDS, exclude), key=len, reverse=True)
    return {"methods": term_pattern(_kept(_METHODS, exclude) + _kept(_GENERIC, exclude)),
            "software": term_pattern(software), "aims": term_pattern(_kept(_AIMS, exclude))}


@lru_cache(maxsize=None)
def _generic_keys() -> frozenset[str]:
    return frozenset(term_key(t) for t in _terms(_GENERIC))


def software_names(text: str) -> frozenset[str]:
    """Keys of the software vocabulary's specific names (not its generic words) found in ``text``: what to
    ``exclude`` to score a paper as if the vocabulary had never heard of the tools a text names."""
    return frozenset(term_key(m.group()) for m in term_pattern(_terms(_SOFTWARE_NAMES)).finditer(text))


def window_terms(signal: str, text: str, exclude: frozenset[str] = frozenset()) -> dict[str, float]:
    """Distinct terms of a ``methods`` / ``software`` signal found in the text, with their weights.

    ``exclude``: keys of vocabulary terms left out (every spelling of each), as if the vocabulary lacked them.
    """
    patterns = _patterns(frozenset(exclude))
    found: dict[str, float] = {}
    if signal == "methods":
        generic = _generic_keys()
        for match in patterns["methods"].finditer(text):
            key = term_key(match.group())
            found[key] = GENERIC_WEIGHT if key in generic else 1.0
        for match in _ACRONYM_DEFINITION.finditer(text):
            found["defines:" + match.group(1)] = 1.0
    elif signal == "software":
        for match in patterns["software"].finditer(text):
            found[term_key(match.group())] = 1.0
        for match in _VERSION.finditer(text):
            found["version:" + match.group().lower()] = 1.0
    else:
        raise ValueError(f"signal {signal!r} has no terms (terms come from: {', '.join(TERM_SIGNALS)})")
    return found


def signal_scores(signal: str, texts: Sequence[str], exclude: frozenset[str] = frozenset()) -> np.ndarray:
    """Score of each window for a pattern signal (not ``question``, which the selector scores itself);
    ``exclude`` as in ``window_terms``."""
    if signal in TERM_SIGNALS:
        return np.asarray([sum(window_terms(signal, t, exclude).values()) for t in texts], dtype=np.float64)
    if signal == "aims":
        return np.asarray([len(_patterns(frozenset(exclude))["aims"].findall(t)) for t in texts], dtype=np.float64)
    if signal == "purpose":
        return np.asarray([len(_PURPOSE.findall(t)) for t in texts], dtype=np.float64)
    if signal == "early":
        return -np.arange(len(texts), dtype=np.float64)
    raise ValueError(f"unknown retrieval signal {signal!r} (choose from: {', '.join(SIGNALS)})")


def reciprocal_rank_fusion(score_lists: Sequence[np.ndarray], k: int = 10, shared_ties: bool = False) -> np.ndarray:
    """Sum of 1 / (k + rank) over the score lists (rank 1 = best; ties: the earlier window ranks first, or with
    ``shared_ties`` all take the best rank among them, so windows a signal knows nothing about gain nothing by it).

    Fusing ranks, not raw scores, lets a BM25 score and a count of method names be combined without scaling.
    """
    total = np.zeros(len(score_lists[0]), dtype=np.float64)
    for scores in score_lists:
        values = np.asarray(scores, dtype=np.float64)
        if shared_ties:
            ranks = 1.0 + (values[None, :] > values[:, None]).sum(axis=1)
        else:
            order = np.argsort(-values, kind="stable")
            ranks = np.empty(len(order), dtype=np.float64)
            ranks[order] = np.arange(1, len(order) + 1)
        total += 1.0 / (k + ranks)
    return total


def diverse_order(scores: np.ndarray, terms: Sequence[dict[str, float]]) -> list[int]:
    """Positions in greedy order: each next window adds the most weight of terms not yet covered.

    Ties go to the higher score, then to the earlier window. Windows that add nothing come last, by score.
    """
    left = set(range(len(scores)))
    seen: set[str] = set()
    order: list[int] = []
    while left:
        def key(i: int) -> tuple[float, float, int]:
            gain = sum(w for t, w in terms[i].items() if t not in seen)
            return (gain, float(scores[i]), -i)

        best = max(left, key=key)
        order.append(best)
        left.remove(best)
        seen.update(terms[best])
    return order
