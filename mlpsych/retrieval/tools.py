"""Where a paper marks a tool as software: the places q2's answers are, whatever the tool is called.

A fixed list of tools (``signals._SOFTWARE_NAMES``) knows R and scikit-learn but not the package a paper names once,
in an aside, and that aside is often the only place q2's answer is. But papers mark their tools: "the missRanger
package", "Python 3.8", "implemented in PlaidML", "github.com/owner/tool", "cv.glmnet()". The cascade reads every
window holding such a mark for q2 (``CascadeSettings.tool_windows``), besides those it chooses. The patterns are
generic (written from what software mentions look like, not from the development papers' answers), and a mark
only chooses a window to read: it never becomes an answer.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# A name as papers write tools: letters, digits and the joiners of package names (scikit-learn, cv.glmnet,
# lme4, word2vec); it starts with a letter and does not end with a joiner.
_NAME = r"[A-Za-z](?:[\w+#]|[.\-](?=\w))*"
_KINDS = r"(?:package|library|libraries|toolbox|toolkit|software|module|framework|platform|plug-?in)s?"
_QUOTE = r"[\"'\u2018\u2019\u201c\u201d`]?"


@dataclass(frozen=True)
class _Context:
    """A pattern whose group 1 is a tool's name; ``lowercase``: whether the context alone makes a plain
    lower-case word a name ("the glmnet package", a CRAN address) or it must look like one (a capital, a digit, a
    code joiner: "Keras", "lme4", "cv.glmnet"), since "the machine learning library" is no tool called "learning"."""

    pattern: re.Pattern
    lowercase: bool = False


_CONTEXTS = (
    # "the glmnet package", "the caret R package"; and, looking like names, "Keras library", "cv.glmnet function"
    _Context(re.compile(rf"\b(?:the)\s+{_QUOTE}({_NAME}){_QUOTE}\s+(?:(?:R|Python|Java|MATLAB|Julia)\s+)?"
                        rf"{_KINDS}\b", re.IGNORECASE), lowercase=True),
    _Context(re.compile(rf"(?<![\w.+#\-])({_NAME}){_QUOTE}\s+(?:(?:R|Python|Java|MATLAB|Julia)\s+)?"
                        rf"(?:{_KINDS}|functions?|commands?)\b")),
    # "the R package glmnet", "Python library 'spaCy'", "package 'caret'"; unquoted without a language: a name
    _Context(re.compile(rf"\b(?:R|Python|Java|MATLAB|Julia)\s+{_KINDS}\s+{_QUOTE}({_NAME})"), lowercase=True),
    _Context(re.compile(rf"\b(?:{_KINDS}|functions?|commands?)\s+[\"'\u2018\u201c`]({_NAME})", re.IGNORECASE),
             lowercase=True),
    _Context(re.compile(rf"\b(?:{_KINDS}|functions?|commands?)\s+({_NAME})", re.IGNORECASE)),
    # "Python 3.8.2", "R version 4.0.3", "SPSS v25", "MATLAB (version 9.1)"
    _Context(re.compile(rf"(?<![\w.+#\-])({_NAME})\s*,?\s*\(?(?:version|ver\.|v\.?)\s*\d+(?:\.\d+)*", re.IGNORECASE)),
    _Context(re.compile(rf"(?<![\w.+#\-])({_NAME})\s+\(?\d+\.\d+(?:\.\d+)+\b")),
    # "implemented in PlaidML", "written in Python", "coded using TensorFlow"
    _Context(re.compile(rf"\b(?:implemented|written|programmed|coded|developed)\s+(?:in|with|using)\s+(?:the\s+)?"
                        rf"({_NAME})", re.IGNORECASE)),
    # repositories and package indexes: github.com/owner/NAME, cran.r-project.org/package=NAME, pypi.org/project/NAME
    _Context(re.compile(rf"\b(?:github|gitlab|bitbucket)\.(?:com|org)/[\w.\-]+/({_NAME})", re.IGNORECASE),
             lowercase=True),
    _Context(re.compile(rf"\bcran\.r-project\.org/(?:web/)?packages?[/=]({_NAME})", re.IGNORECASE), lowercase=True),
    _Context(re.compile(rf"\b(?:pypi\.org|pypi\.python\.org)/(?:project|pypi)/({_NAME})", re.IGNORECASE),
             lowercase=True),
    _Context(re.compile(rf"\bbioconductor\.org/packages/(?:release/|devel/)?(?:bioc/(?:html/)?)?({_NAME})",
                        re.IGNORECASE), lowercase=True),
    # code: "cv.glmnet()", "train_test_split()"
    _Context(re.compile(rf"(?<![\w.+#\-])({_NAME})\(\)"), lowercase=True),
)

# Words the contexts catch that are not tools: function words, the kinds themselves, words around versions and
# figures, the field's own acronyms, and dotted abbreviations. Lower case; a name is compared lower-cased.
_NOT_TOOLS = frozenset("""
a an the this that these those which what whose who its it their our his her my your we they he she one each every
all any some other such same new own open source based used using use uses via of in on at by for from to with
without into onto and or nor but as is are was were be been being has have had do does did can could may might
will would should must not no yes than then also only both either neither so software package packages library
libraries toolbox toolkit module framework platform program programs plugin plug-in function functions command
commands version versions ver release statistical statistics analysis analyses data code script scripts tool
tools free commercial custom standard following available open-source table tables figure figures fig section
sections study studies experiment experiments chapter appendix equation eq step steps phase wave model models
sample samples time note see e.g i.e et al etc vs cf nlp ml ai dl api gui
""".split())
_MIN_LENGTH = 2  # single letters are tools only as the fixed vocabulary knows them (R, C)


def _looks_like_name(name: str) -> bool:
    """A capital, a digit or a code joiner; not a hyphen alone: "third-party software" names no tool."""
    return any(c.isupper() or c.isdigit() or c in "._+#" for c in name)


@functools.lru_cache(maxsize=64)
def tool_marks(text: str) -> tuple[tuple[int, int], ...]:
    """Character ranges of ``text`` where a name is marked as software (a context of ``_CONTEXTS`` whose name is
    a tool's, not a word around software), in order; found once per text."""
    marks = set()
    for context in _CONTEXTS:
        for match in context.pattern.finditer(text):
            name = match.group(1).rstrip(".-")
            folded = name.lower()
            if len(name) < _MIN_LENGTH or folded in _NOT_TOOLS or not (context.lowercase or _looks_like_name(name)):
                continue
            if "." in name and all(len(part) <= 2 for part in name.split(".")):  # e.g., i.e., al.
                continue
            marks.add(match.span())
    return tuple(sorted(marks))
