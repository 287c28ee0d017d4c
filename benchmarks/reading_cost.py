"""Windows read per paper with and without retrieval, and the share of gold answer spans those windows cover.

    python benchmarks/reading_cost.py --data ../shared/mlpsych [--tokenizer DIR] [--budget 3] [--sweep]

For the mlpsych template (q1-q3 read by the template's models, q4 asked once per bridge entity) it prints,
per question, the large-model windows a paper costs when every window is read (the paper's approach) and when
retrieval picks the windows (BM25 or dense, q4 anchored on its entity), and the **coverage**: the share of gold
answer spans (answers_dev.json) lying wholly inside some window that is read. For entity questions (q1, q2),
whose answers are scored on their text, ``text cov`` also counts a gold answer whose text (case-insensitive)
appears in some window read, wherever in the paper. The bridge entities of q4 are the
gold q1 answers of the paper (no model runs here: windows are decided by the tokenizer alone).

Tokenizer: windows depend on how many tokens a paper takes. By default the tokenizer of the offline
all-MiniLM-L6-v2 package is used: it is the real BERT-uncased WordPiece vocabulary (30,522 pieces), which is
exactly ELECTRA-large's tokenizer and close to DeBERTa-v3's 128k sentencepiece vocabulary in tokens per word on
English prose. All four readers of the template take 512 positions, so one tokenizer stands in for all.
Prints counts and ratios, not pass/fail.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mlpsych.documents import Document  # noqa: E402
from mlpsych.questions import load_question_set  # noqa: E402
from mlpsych.reader import Reader, ReaderSettings  # noqa: E402
from mlpsych.retrieval import Plan, WindowSelector  # noqa: E402
from mlpsych.settings import RetrievalSettings  # noqa: E402


# Retrieval queries proposed for questions/mlpsych.yaml (``retrieval.query``: words added to the question when
# windows are scored). Written after reading a handful of gold answers in context, so figures with them on the
# development split are optimistic; they name generic method/software vocabulary, nothing paper-specific.
PROPOSED_QUERIES = {
    "q1": "machine learning algorithm model classifier classification regression random forest neural network "
          "support vector decision tree boosting clustering topic model text analysis cross-validation trained predict",
    "q2": "software package library Python R implemented version toolbox scikit-learn caret programming language code",
    "q3": "research question aim goal purpose hypothesis investigate examine whether we study",
}


def load_data(folder: Path) -> tuple[dict[str, str], dict]:
    with open(folder / "text.json", encoding="utf-8") as handle:
        texts = json.loads(json.load(handle))
    with open(folder / "answers_dev.json", encoding="utf-8") as handle:
        gold = json.load(handle)
    return texts, gold


def gold_spans(text: str, answers: list[dict]) -> list[tuple[int, int]]:
    """Character spans of the gold answers; where offsets do not line up, the occurrence nearest to them."""
    spans = []
    for a in answers:
        start, end, wanted = int(a["start"]), int(a["end"]), a["text"]
        if text[start:end] == wanted:
            spans.append((start, end))
            continue
        hits, at = [], text.find(wanted)
        while at >= 0:
            hits.append(at)
            at = text.find(wanted, at + 1)
        if hits:
            best = min(hits, key=lambda h: abs(h - start))
            spans.append((best, best + len(wanted)))
    return spans


def _squash(text: str) -> str:
    return " ".join(text.split()).casefold()


def text_covered(answer: str, doc: Document, windows, chosen: tuple[int, ...] | None) -> bool:
    picked = windows if chosen is None else [windows[i] for i in chosen]
    wanted = _squash(answer)
    return any(wanted in _squash(doc.text[w.char_start:w.char_end]) for w in picked)


def covered(span: tuple[int, int], windows, chosen: tuple[int, ...] | None) -> bool:
    picked = windows if chosen is None else [windows[i] for i in chosen]
    return any(w.char_start <= span[0] and span[1] <= w.char_end for w in picked)


@dataclass
class Tally:
    full_windows: int = 0
    read_windows: int = 0
    gold: int = 0
    full_hits: int = 0
    read_hits: int = 0
    text_hits: int = 0  # gold answer text found (case-insensitive) in some window read, at any position

    def coverage(self, hits: int) -> float:
        return hits / self.gold if self.gold else float("nan")


def bridge_entities(text: str, q1_gold: list[dict], cap: int) -> list[str]:
    seen, out = set(), []
    for a in q1_gold:
        entity = " ".join(a["text"].split())
        if entity and entity.casefold() not in seen:
            seen.add(entity.casefold())
            out.append(entity)
    return out[:cap]


def measure(texts, gold, reader: Reader, questions, plans: dict[str, Plan | None], selector: WindowSelector,
            nominal_sub_questions: int | None) -> tuple[dict[str, Tally], dict]:
    papers = list(gold["q1"])
    tallies = {q.id: Tally() for q in questions.questions}
    extra = {"windows": [], "sub_questions": [], "seconds": 0.0}
    started = time.perf_counter()
    for pid in papers:
        doc = Document(id=pid, text=texts[pid])
        windows = reader.windows(doc)
        extra["windows"].append(len(windows))
        for q in questions.questions:
            tally = tallies[q.id]
            n_models = len(q.models)
            plan = plans.get(q.id)
            if q.bridge_from:
                entities = bridge_entities(doc.text, gold["q1"].get(pid, []), q.max_sub_questions)
                extra["sub_questions"].append(len(entities))
                asked = [(e, q.sub_question(e)) for e in entities]
            else:
                asked = [(None, q.text)]
            chosen_all = []
            for entity, text in asked:
                chosen = selector.select(doc, windows, text, plan, entity)
                chosen_all.append(chosen)
                tally.full_windows += n_models * len(windows)
                tally.read_windows += n_models * (len(windows) if chosen is None else len(chosen))
            if q.id not in gold or pid not in gold[q.id] or not asked:
                continue
            for span in gold_spans(doc.text, gold[q.id][pid]):
                tally.gold += 1
                tally.full_hits += covered(span, windows, None)
                tally.read_hits += any(covered(span, windows, c) for c in chosen_all)
                tally.text_hits += any(text_covered(doc.text[span[0]:span[1]], doc, windows, c) for c in chosen_all)
    extra["seconds"] = time.perf_counter() - started
    extra["papers"] = len(papers)
    return tallies, extra


def report(label: str, tallies: dict[str, Tally], extra: dict) -> tuple[float, float]:
    n = extra["papers"]
    print(f"\n== {label}")
    print(f"{'question':<9}{'full win/paper':>15}{'read win/paper':>15}{'fewer x':>9}"
          f"{'gold':>6}{'cov full':>10}{'cov read':>10}{'read/full':>10}{'text cov':>10}")
    full_total = read_total = 0
    for qid, t in tallies.items():
        full_total += t.full_windows
        read_total += t.read_windows
        ratio = t.coverage(t.read_hits) / t.coverage(t.full_hits) if t.full_hits else float("nan")
        print(f"{qid:<9}{t.full_windows / n:>15.1f}{t.read_windows / n:>15.1f}"
              f"{t.full_windows / max(t.read_windows, 1):>9.1f}{t.gold:>6}"
              f"{t.coverage(t.full_hits):>10.3f}{t.coverage(t.read_hits):>10.3f}{ratio:>10.3f}"
              f"{t.coverage(t.text_hits):>10.3f}")
    print(f"{'total':<9}{full_total / n:>15.1f}{read_total / n:>15.1f}{full_total / max(read_total, 1):>9.1f}")
    print(f"windows per paper: mean {statistics.mean(extra['windows']):.1f}, "
          f"min {min(extra['windows'])}, max {max(extra['windows'])}; "
          f"q4 sub-questions per paper: {statistics.mean(extra['sub_questions'] or [0]):.1f}; "
          f"selection took {extra['seconds']:.1f} s for {n} papers")
    return full_total / n, read_total / n


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="the MLPsych folder (text.json, answers_dev.json)")
    parser.add_argument("--tokenizer", default=None, help="model folder whose tokenizer cuts the windows "
                        "(default: the offline MiniLM's BERT-uncased vocabulary)")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--stride", type=int, default=128)
    parser.add_argument("--mode", choices=["bm25", "dense"], default="bm25")
    parser.add_argument("--budget", type=int, default=None, help="windows per question (default: the fast preset's)")
    parser.add_argument("--entity-budget", type=int, default=None)
    parser.add_argument("--neighbours", type=int, default=None)
    parser.add_argument("--no-entity-anchor", action="store_true")
    parser.add_argument("--expand", action="store_true",
                        help="add the proposed retrieval queries (PROPOSED_QUERIES) to q1-q3 when scoring")
    parser.add_argument("--sweep", action="store_true", help="also print coverage for budgets 1..6")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    from mlpsych.embeddings import default_model
    from mlpsych.settings import PRESETS

    texts, gold = load_data(args.data)
    tokenizer_dir = args.tokenizer or default_model()
    reader = Reader(tokenizer_dir, ReaderSettings(max_length=args.max_length, stride=args.stride))
    reader.load_tokenizer()
    questions = load_question_set("mlpsych")
    fast = PRESETS["fast"].retrieval
    print(f"papers: {len(gold['q1'])} (development split); tokenizer: {tokenizer_dir}; "
          f"window {args.max_length} tokens ({reader.context_tokens} of paper), stride {args.stride}")

    def plans_for(budget, entity_budget, neighbours, anchor) -> dict[str, Plan]:
        return {q.id: Plan(mode=args.mode, budget=budget, neighbours=neighbours, entity_anchor=anchor,
                           entity_budget=entity_budget, terms=PROPOSED_QUERIES.get(q.id, "") if args.expand else "")
                for q in questions.questions}

    budget = args.budget or fast.budget
    entity_budget = args.entity_budget or fast.entity_budget
    neighbours = fast.neighbours if args.neighbours is None else args.neighbours
    settings = RetrievalSettings(read="retrieve", mode=args.mode)
    anchor = not args.no_entity_anchor
    tallies, extra = measure(texts, gold, reader, questions,
                             plans_for(budget, entity_budget, neighbours, anchor), WindowSelector(settings), None)
    report(f"{args.mode}, budget {budget}, entity budget {entity_budget}, neighbours {neighbours}, "
           f"entity anchoring {'on' if anchor else 'off'}, queries {'expanded' if args.expand else 'as asked'}",
           tallies, extra)
    if args.sweep:
        print("\n== sweep: coverage of gold spans (read/full) and windows per paper")
        print(f"{'budget':>6} {'anchor':>6} " + " ".join(f"{q:>7}" for q in tallies) + f"{'win/paper':>10}{'fewer x':>9}")
        for b in range(1, 7):
            for a in (False, True):
                t, e = measure(texts, gold, reader, questions, plans_for(b, b if a else None, neighbours, a),
                               WindowSelector(settings), None)
                cov = [x.read_hits / x.full_hits if x.full_hits else float("nan") for x in t.values()]
                full = sum(x.full_windows for x in t.values()) / e["papers"]
                read = sum(x.read_windows for x in t.values()) / e["papers"]
                print(f"{b:>6} {str(a):>6} " + " ".join(f"{c:>7.3f}" for c in cov) + f"{read:>10.1f}{full / read:>9.1f}")


if __name__ == "__main__":
    main()
