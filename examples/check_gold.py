"""Hand-coded gold answers for the example papers, and a check that their offsets match the .txt files.

Why: the evaluation harness (`mlpsych eval`-style code) needs gold in the MLPsych answers format with exact
character offsets. Offsets are easy to get wrong by hand, so the gold is written here as (text, anchor)
pairs -- the span is the first occurrence of `text` at or after the first occurrence of `anchor` -- and
turned into offsets by code. Coding choices: q1 codes modelling/NLP techniques (not evaluation procedures
such as cross-validation); a paper without ML software is left out of q2 (its gold is "no answer"); q3 is
the research question text without its "RQ1:" label; q4 is the purpose phrase for each q1 technique.

Usage:  python examples/check_gold.py            verify examples/gold.json and examples/texts.json
        python examples/check_gold.py --write    (re)write both from the spans below, then verify
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAPERS = HERE / "papers"
GOLD = HERE / "gold.json"
TEXTS = HERE / "texts.json"

# question -> paper -> list of (span text, anchor that precedes it; "" = from the start)
SPANS: dict[str, dict[str, list[tuple[str, str]]]] = {
    "q1": {
        "burnout-survey-text": [
            ("latent Dirichlet allocation (LDA)", "2.3 Text processing"),
            ("Random forests", "2.4 Predictive models"),
            ("LASSO logistic regression", "2.4 Predictive models"),
        ],
        "social-media-wellbeing": [
            ("support vector machine (SVM)", "2.4 Models"),
            ("BERT", "Second, a pretrained"),
            ("latent Dirichlet allocation (LDA)", "2.4 Models"),
        ],
        "online-course-dropout": [
            ("Logistic regression", "2.4 Analysis"),
            ("Extreme gradient boosting (XGBoost)", "2.4 Analysis"),
            ("SHapley Additive exPlanations (SHAP)", "2.4 Analysis"),
        ],
        "moral-language-speeches": [
            ("Word2vec embeddings", "2.2 Measuring"),
            ("multinomial naive Bayes classifier", "2.3 Classification"),
            ("k-means clustering", "2.3 Classification"),
        ],
    },
    "q2": {  # moral-language-speeches names no software: absent on purpose
        "burnout-survey-text": [
            ("MALLET", "2.3 Text processing"),
            ("R", "fitted with the R package caret"),
            ("caret", "2.4 Predictive models"),
            ("glmnet", "2.4 Predictive models"),
        ],
        "social-media-wellbeing": [
            ("scikit-learn", "2.4 Models"),
            ("Python", "2.4 Models"),
            ("Hugging Face transformers", "2.4 Models"),
            ("PyTorch", "2.4 Models"),
        ],
        "online-course-dropout": [
            ("Python", "2.4 Analysis"),
            ("xgboost", "2.4 Analysis"),
            ("scikit-learn", "2.4 Analysis"),
            ("shap", "with the shap package"),
        ],
    },
    "q3": {
        "burnout-survey-text": [
            ("Do the topics nurses raise in open-ended survey comments predict emotional exhaustion beyond job "
             "demands and job resources measured with rating scales?", "RQ1: "),
            ("Which comment topics are most strongly associated with high exhaustion?", "RQ2: "),
        ],
        "social-media-wellbeing": [
            ("How accurately can the language of everyday social media posts predict young adults' self-reported "
             "life satisfaction and positive affect, and does a contextual language model improve on a "
             "word-count classifier?", "RQ1: "),
        ],
        "online-course-dropout": [
            ("To what extent do self-reported self-regulated learning strategies in the first week predict dropout "
             "from online courses, compared with and in addition to early click data?", "RQ1: "),
            ("Which strategies and behaviours contribute most to the prediction?", "RQ2: "),
        ],
        "moral-language-speeches": [
            ("Do left- and right-leaning politicians differ in the moral foundations they invoke in campaign "
             "speeches, and are these differences larger when speaking to partisan audiences than to general "
             "audiences?", "RQ1: "),
        ],
    },
    "q4": {
        "burnout-survey-text": [
            ("to identify the themes nurses wrote about", "2.3 Text processing"),
            ("to predict exhaustion from the 22 topic proportions, either alone or together with the four survey "
             "scales", "2.4 Predictive models"),
            ("to select the smallest set of individual words that predicted exhaustion", "2.4 Predictive models"),
        ],
        "social-media-wellbeing": [
            ("to predict well-being scores (as support vector regression) from the relative frequencies of the "
             "5,000 most common words", "2.4 Models"),
            ("to predict each participant's well-being scores from their post segments", "2.4 Models"),
            ("To understand what the language model had learned", "2.4 Models"),
        ],
        "online-course-dropout": [
            ("an interpretable baseline", "2.4 Analysis"),
            ("to predict dropout from the self-report items, from the click features, and from both sets combined",
             "2.4 Analysis"),
            ("to rank the contribution of each feature", "2.4 Analysis"),
        ],
        "moral-language-speeches": [
            ("to find, for each foundation, the 50 words closest to the centroid of its seed terms", "2.2 Measuring"),
            ("to predict the speaker's party bloc from the ten moral foundation scores", "2.3 Classification"),
            ("to group speakers by their average moral profile", "2.3 Classification"),
        ],
    },
}


def load_texts() -> dict[str, str]:
    """{paper_id: text} from examples/papers/*.txt; paper_id is the file stem."""
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(PAPERS.glob("*.txt"))}


def locate(text: str, span: str, anchor: str) -> int:
    """Start of `span` at or after `anchor`; a whole-word match so that 'R' does not hit inside 'RQ'."""
    pos = text.index(anchor) if anchor else 0
    while True:
        start = text.index(span, pos)
        before = text[start - 1] if start else " "
        after = text[start + len(span)] if start + len(span) < len(text) else " "
        if not (before.isalnum() or after.isalnum()):
            return start
        pos = start + 1


def build_gold(texts: dict[str, str]) -> dict[str, dict[str, list[dict]]]:
    """The MLPsych answers format: {q: {paper_id: [{start, end, text}]}}."""
    gold: dict[str, dict[str, list[dict]]] = {}
    for qid, papers in SPANS.items():
        gold[qid] = {}
        for pid, spans in papers.items():
            entries = []
            for span, anchor in spans:
                start = locate(texts[pid], span, anchor)
                entries.append({"start": start, "end": start + len(span), "text": span})
            gold[qid][pid] = entries
    return gold


def verify(gold: dict, texts: dict[str, str]) -> list[str]:
    """Problems: unknown papers, or spans whose offsets do not reproduce their text."""
    problems = []
    for qid, papers in gold.items():
        for pid, entries in papers.items():
            if pid not in texts:
                problems.append(f"{qid}/{pid}: no such paper in examples/papers")
                continue
            for e in entries:
                if texts[pid][e["start"]:e["end"]] != e["text"]:
                    problems.append(f"{qid}/{pid}: offsets {e['start']}-{e['end']} do not give {e['text']!r}")
    missing = set(texts) - set(gold.get("q1", {}))
    problems += [f"q1/{pid}: paper not annotated" for pid in sorted(missing)]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="verify (or --write) examples/gold.json and examples/texts.json")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    texts = load_texts()
    if args.write:
        GOLD.write_text(json.dumps(build_gold(texts), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        with TEXTS.open("w", encoding="utf-8") as f:
            json.dump(json.dumps(texts, ensure_ascii=False), f, ensure_ascii=False)  # a JSON string, as in MLPsych
    gold = json.loads(GOLD.read_text(encoding="utf-8"))
    stored = json.loads(json.loads(TEXTS.read_text(encoding="utf-8")))
    problems = verify(gold, texts)
    if stored != texts:
        problems.append("texts.json is out of date with examples/papers (run with --write)")
    for p in problems:
        print(p, file=sys.stderr)
    n = sum(len(v) for papers in gold.values() for v in papers.values())
    print(f"{len(texts)} papers, {n} gold spans: {'OK' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
