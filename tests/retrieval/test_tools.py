"""Where a paper marks a tool as software, whatever the tool is called."""

from __future__ import annotations

import pytest

from mlpsych.retrieval.tools import tool_marks


def _names(text: str) -> list[str]:
    return [text[a:b] for a, b in tool_marks(text)]


@pytest.mark.parametrize("sentence, tool", [
    ("Imputation used the missRanger package (Mayer, 2019).", "missRanger"),
    ("We fitted models with the caret R package.", "caret"),
    ("Trees were grown with the R package ranger.", "ranger"),
    ("Texts were parsed with the Python library 'spaCy'.", "spaCy"),
    ("Networks were trained in Keras 2.3.1 on a laptop.", "Keras"),
    ("All analyses ran in Stata version 16.", "Stata"),
    ("The model was implemented in PlaidML.", "PlaidML"),
    ("Code: https://github.com/someone/textfeatures.", "textfeatures"),
    ("See cran.r-project.org/package=lexicalrichness for details.", "lexicalrichness"),
    ("It is on pypi.org/project/readability for anyone.", "readability"),
    ("The penalty was chosen by cv.glmnet() with ten folds.", "cv.glmnet"),
    ("The lme4 package fitted the mixed models.", "lme4"),
])
def test_a_tool_is_marked_in_each_kind_of_context(sentence, tool):
    marks = _names(sentence)
    assert marks and any(tool in mark for mark in marks)


@pytest.mark.parametrize("sentence", [
    "We used a machine learning library to classify texts.",  # "learning" is no tool
    "Scores came from third-party software.",  # a hyphenated adjective
    "The correlation was r = .32, e.g. in Table 2.1 and Figure 3.2.1.",  # abbreviations, captions
    "Details are at https://doi.org/10.1177/0956797620959594 and osf.io/abc12.",  # addresses are no tools
    "Funded by the Horizon 2020 programme of the European Union.",
    "The activation function was a rectified linear unit; the loss function cross-entropy.",
    "The following software was used.",
])
def test_words_around_software_are_not_tools(sentence):
    assert tool_marks(sentence) == ()


def test_marks_are_places_in_the_text_in_order():
    text = "Data came from a survey. We used the lme4 package. Later, PlaidML 0.7.0 trained the network."
    marks = tool_marks(text)
    assert list(marks) == sorted(marks)
    assert any("lme4" in text[a:b] for a, b in marks) and any("PlaidML" in text[a:b] for a, b in marks)
    assert all(b <= text.index("Later") or a >= text.index("Later") for a, b in marks)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("unit", ["a-", "a+", "a#", "a.", "Ab1 ", "x_-"])
def test_a_long_run_of_name_characters_is_scanned_once(unit):
    """A name may start only where no name character precedes it: a run like "a-a-a-..." (a table rule, a garbled
    extraction) is not re-scanned from each of its letters, which took 7.6 s for 10,000 characters."""
    assert tool_marks(unit * 20_000) == ()
