"""parse_list on a corpus of realistic and broken LLM outputs (expectations written by hand)."""

from __future__ import annotations

import pytest

from mlpsych.normalize.listparse import clean_item, parse_list, says_none

CORPUS: list[tuple[str, str, list[str]]] = [
    # --- well-formed ---------------------------------------------------------------------------------------
    ("python list", "['random forest', 'XGBoost', 'SVM']", ["random forest", "XGBoost", "SVM"]),
    ("json array", '["random forest", "XGBoost"]', ["random forest", "XGBoost"]),
    ("json multiline", '[\n  "LASSO regression",\n  "elastic net"\n]', ["LASSO regression", "elastic net"]),
    ("mixed quotes", """["k-means", 'LDA']""", ["k-means", "LDA"]),
    ("unquoted items", "[random forest, XGBoost, naive Bayes]", ["random forest", "XGBoost", "naive Bayes"]),
    ("json object", '{"techniques": ["BERT", "word2vec"]}', ["BERT", "word2vec"]),
    ("json object string value", '{"answer": "scikit-learn, R"}', ["scikit-learn", "R"]),
    ("nested list", '[["SVM", "random forest"]]', ["SVM", "random forest"]),
    ("tuple literal", "('SVM', 'random forest')", ["SVM", "random forest"]),
    # --- text around the list -----------------------------------------------------------------------------
    ("chatter around", "Sure! Here is the list: ['SVM', 'LDA'] Hope this helps!", ["SVM", "LDA"]),
    ("code fence", "```python\n['glmnet', 'caret']\n```", ["glmnet", "caret"]),
    ("json fence", "Here you go:\n```json\n[\"spaCy\", \"NLTK\"]\n```\nLet me know.", ["spaCy", "NLTK"]),
    ("citation before list", "As described in [12], the techniques are ['LASSO']", ["LASSO"]),
    ("llama3 header leftovers", "assistant\n\n['topic modeling']", ["topic modeling"]),
    # --- bullets and loose lists ----------------------------------------------------------------------------
    ("dash bullets", "- random forest\n- support vector machine\n- LASSO", ["random forest", "support vector machine", "LASSO"]),
    ("numbered", "1. XGBoost\n2. LDA\n3) BERT", ["XGBoost", "LDA", "BERT"]),
    ("bullets with explanations", "The techniques are:\n* **Random forest**: an ensemble of trees\n* SVM - a classifier",
     ["Random forest", "SVM"]),
    ("unicode bullets", "\u2022 Python\n\u2022 R", ["Python", "R"]),
    ("comma list", "random forest, XGBoost, SVM", ["random forest", "XGBoost", "SVM"]),
    ("semicolon list", "Python; R; SPSS", ["Python", "R", "SPSS"]),
    ("lead-in and 'and'", "The software used was: Python, R and SPSS.", ["Python", "R and SPSS"]),
    ("oxford comma", "Python, R, and Stata", ["Python", "R", "Stata"]),
    ("line list", "random forest\nlogistic regression", ["random forest", "logistic regression"]),
    ("single name", "XGBoost", ["XGBoost"]),
    ("llama3 numbered with abbreviations",
     "Here are the machine learning techniques mentioned:\n\n1. Random Forest (RF)\n2. Support Vector Machine (SVM)\n"
     "3. Latent Dirichlet Allocation (LDA)\n\nLet me know if you need anything else!",
     ["Random Forest (RF)", "Support Vector Machine (SVM)", "Latent Dirichlet Allocation (LDA)"]),
    ("llama3 list then note", "['scikit-learn', 'R']\n\nNote: SVM was removed because it is not software.",
     ["scikit-learn", "R"]),
    ("items with parentheses", "['R (version 4.1)', 'caret (Kuhn, 2008)']", ["R (version 4.1)", "caret (Kuhn, 2008)"]),
    ("unquoted with parentheses", "[R (version 4.1), lme4]", ["R (version 4.1)", "lme4"]),
    # --- nested quotes / apostrophes ----------------------------------------------------------------------
    ("apostrophe in double quotes", """["Bayes' theorem", "Cohen's kappa"]""", ["Bayes' theorem", "Cohen's kappa"]),
    ("broken apostrophe in single quotes", "['Bayes' theorem', 'LDA']", ["Bayes' theorem", "LDA"]),
    ("escaped quote", r"['Cohen\'s kappa', 'SVM']", ["Cohen's kappa", "SVM"]),
    ("double quotes inside single", """['the "LASSO" model']""", ['the "LASSO" model']),
    ("curly quotes", "[\u201crandom forest\u201d, \u201cSVM\u201d]", ["random forest", "SVM"]),
    # --- truncated ----------------------------------------------------------------------------------------
    ("truncated mid item", "['random forest', 'XGBoost', 'support vec", ["random forest", "XGBoost"]),
    ("truncated unquoted", "[random forest, XGBoost, supp", ["random forest", "XGBoost"]),
    ("truncated after comma", '["LDA", "BERT",', ["LDA", "BERT"]),
    ("truncated json object", '{"techniques": ["LDA", "BER', ["LDA"]),
    # --- empty --------------------------------------------------------------------------------------------
    ("empty list", "[]", []),
    ("empty with chatter", "There are no such techniques in the snippets: []", []),
    ("None", "None", []),
    ("None in list", "['None']", []),
    ("N/A", "N/A", []),
    ("empty string", "", []),
    ("whitespace", "  \n\t ", []),
    ("python None literal", "[None]", []),
    # --- duplicates, junk items -----------------------------------------------------------------------------
    ("case-insensitive dedup", "['SVM', 'svm', 'Random Forest', 'random forest', 'SVM']", ["SVM", "Random Forest"]),
    ("no letters", "['123', '...', '', 'LDA', '-']", ["LDA"]),
    ("too long item", "['" + "very long " * 20 + "', 'BERT']", ["BERT"]),
    ("numbers only list", "[1, 2, 3]", []),
    ("whitespace in items", "['  random   forest ', '\\tSVM\\n']", ["random forest", "SVM"]),
    # --- garbage ------------------------------------------------------------------------------------------
    ("refusal", "I'm sorry, but I cannot help with that request.", []),
    ("prose sentence", "The paper describes how the participants were recruited from several universities.", []),
    ("symbols", "}}]]{{[[ ''' \"\"\" ,,, ;;", []),
    ("unbalanced quote", "['SVM", []),
    ("special tokens and broken bytes", "\ufffd\ufffd <|eot_id|> \ufffd", []),
    ("special tokens around a list", "<|start_header_id|>['SVM']<|eot_id|>", ["SVM"]),
    ("random token soup", "\ufffd tokenizationcip selfYata\ufffdays2ects worlow into\ufffd mul ne desc2ects remo", []),
    ("control bytes", "\x00\x01\x02", []),
]


@pytest.mark.parametrize("raw, expected", [(raw, exp) for _, raw, exp in CORPUS], ids=[c[0] for c in CORPUS])
def test_corpus(raw: str, expected: list[str]) -> None:
    assert parse_list(raw) == expected


SAY_NONE = ["empty list", "empty with chatter", "None", "None in list", "N/A", "empty string", "whitespace",
            "python None literal"]
NO_LIST = ["refusal", "prose sentence", "symbols", "unbalanced quote", "random token soup", "control bytes",
           "numbers only list"]


@pytest.mark.parametrize("name", SAY_NONE + NO_LIST)
def test_says_none_only_for_an_explicit_none(name: str) -> None:
    """An output with no item is "none" only when it says so; prose and garbage say nothing about the paper."""
    raw = {case: text for case, text, _ in CORPUS}[name]
    assert parse_list(raw) == []
    assert says_none(raw) == (name in SAY_NONE)


def test_says_none_in_a_json_object_but_not_with_items() -> None:
    assert says_none('```json\n{"countries": []}\n```')
    assert not says_none('["Canada"]') and not says_none("The study was conducted in Canada.")


def test_max_items() -> None:
    raw = str([f"method {i}" for i in range(50)])
    assert parse_list(raw, max_items=3) == ["method 0", "method 1", "method 2"]


def test_never_evaluates_code(tmp_path) -> None:
    marker = tmp_path / "pwned"
    raw = f"[__import__('pathlib').Path({str(marker)!r}).touch()]"
    parse_list(raw)
    assert not marker.exists()


def test_huge_input_is_bounded() -> None:
    raw = "[" + ", ".join(f"'item {i}'" for i in range(20_000)) + "]"
    items = parse_list(raw, max_items=10)
    assert items == [f"item {i}" for i in range(10)]


def test_deeply_nested_does_not_raise() -> None:
    assert parse_list("[" * 5000 + "'SVM'" + "]" * 5000) == ["SVM"]


@pytest.mark.parametrize("value", [None, 42, b"['SVM']"])
def test_non_string_input(value) -> None:
    assert parse_list(value) == []  # type: ignore[arg-type]


def test_clean_item() -> None:
    assert clean_item(' "XGBoost", ') == "XGBoost"
    assert clean_item("(SVM)") == "SVM"
    assert clean_item("42") is None
    assert clean_item("n/a") is None
