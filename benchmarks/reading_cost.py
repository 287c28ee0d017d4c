"""Windows read per paper with and without retrieval, and the share of gold answer spans those windows cover.

This measures the retrieval without a cascade (BM25, the templates' signals and budgets: ``--small-reader none``,
the fast preset before the cascade); the cascade is measured by ``cascade_retrieval.py``.

    python benchmarks/reading_cost.py --data ../shared/mlpsych [--split tune|test|all] [--baseline] [--readers template] [--sweep] [--cv]

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
from mlpsych.multihop import entities_to_ask  # noqa: E402
from mlpsych.questions import load_question_set  # noqa: E402
from mlpsych.reading.reader import Query, Reader  # noqa: E402
from mlpsych.retrieval import Plan, WindowSelector, restrict  # noqa: E402
from mlpsych.settings import CascadeSettings, ReaderSettings, RetrievalSettings  # noqa: E402


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


def text_covered(answer: str, doc: Document, read: list[tuple[int, int]]) -> bool:
    wanted = _squash(answer)
    return any(wanted in _squash(doc.text[a:b]) for a, b in read)


def covered(span: tuple[int, int], read: list[tuple[int, int]]) -> bool:
    return any(a <= span[0] and span[1] <= b for a, b in read)


def read_ranges(reader: Reader, doc: Document, windows, question: str, plan: Plan | None,
                selector: WindowSelector, entity: str | None) -> tuple[int, list[tuple[int, int]]]:
    """Windows the reader reads for one question and the char ranges it reads in them (the pieces of packed
    windows: a span is covered only if it lies inside one of them)."""
    query = restrict(Query("q", question, 1, 1, bridge_entity=entity), plan, selector, reader, doc)
    if query.passages is not None:
        offsets = reader.encode(doc).offsets
        packed = reader.packed_windows(doc, query.passages, question)
        return len(packed), [(offsets[a][0], offsets[b - 1][1]) for w in packed for a, b in w.token_ranges]
    picked = windows if query.windows is None else [windows[i] for i in query.windows]
    return len(picked), [(w.char_start, w.char_end) for w in picked]


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
            papers: list[str], read_models: dict[str, int] | None = None) -> tuple[dict[str, Tally], dict]:
    """Windows and coverage per question; the full read counts the template's models, the retrieval arm
    ``read_models`` (the preset's readers per question; default: the template's)."""
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
            n_read = (read_models or {}).get(q.id, n_models)
            plan = plans.get(q.id)
            also = []
            if q.bridge_from:
                entities = bridge_entities(doc.text, gold["q1"].get(pid, []), q.max_sub_questions)
                extra["sub_questions"].append(len(entities))
                asked = [(e, q.sub_question(e)) for e in entities]
                also = [(e, q.sub_question(e)) for e in entities_to_ask(q, entities, plan is not None)[len(entities):]]
            else:
                asked = [(None, q.text)]
            tally.full_windows += n_models * len(windows) * len(asked)
            read = []
            for entity, text in asked + also:
                n_windows, ranges = read_ranges(reader, doc, windows, text, plan, selector, entity)
                read.extend(ranges)
                tally.read_windows += n_read * n_windows
            if q.id not in gold or pid not in gold[q.id] or not asked:
                continue
            everything = [(w.char_start, w.char_end) for w in windows]
            for span in gold_spans(doc.text, gold[q.id][pid]):
                tally.gold += 1
                tally.full_hits += covered(span, everything)
                tally.read_hits += covered(span, read)
                tally.text_hits += text_covered(doc.text[span[0]:span[1]], doc, read)
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
    if not extra.get("windows"):
        return full_total / n, read_total / n
    print(f"windows per paper: mean {statistics.mean(extra['windows']):.1f}, "
          f"min {min(extra['windows'])}, max {max(extra['windows'])}; "
          f"q4 sub-questions per paper: {statistics.mean(extra['sub_questions'] or [0]):.1f}; "
          f"selection took {extra['seconds']:.1f} s for {n} papers")
    return full_total / n, read_total / n


TARGETS = {"q1": 0.97, "q2": 0.97, "q3": 0.97, "q4": 0.95}
# Budgets tried per question: a fixed window count for q1-q3, (entity windows, paper windows) for q4.
CANDIDATES = {"q1": [{"budget": b} for b in range(2, 10)], "q2": [{"budget": b} for b in range(1, 8)],
              "q3": [{"budget": b} for b in range(1, 7)],
              "q4": [{"entity_budget": e, "entity_extra": x} for e in (1, 2) for x in (0, 1, 2)]}


def cross_validate(texts, gold, reader, questions, settings: RetrievalSettings, read_models) -> None:
    """Two folds (the tune and test halves): each question's budget is chosen on one half by a fixed rule (the
    cheapest candidate reaching the target coverage, else the best covering one), then measured on the other."""

    from mlpsych.retrieval import plan_for

    def one(question, papers: list[str], change: dict) -> tuple[Tally, int]:
        tried = settings.model_copy(update={"budget": None, **change})
        plans = {question.id: plan_for(question.retrieval, tried)}
        chosen_set = questions.model_copy(update={"questions": [question]})
        tallies, extra = measure(texts, gold, reader, chosen_set, plans, WindowSelector(tried), papers, read_models)
        return tallies[question.id], extra["papers"]

    print("\n== two-fold check: budgets chosen on one half by rule, measured on the other")
    pooled = {q.id: Tally() for q in questions.questions}
    for train, held in (("tune", "test"), ("test", "tune")):
        picks = []
        for question in questions.questions:
            scored = []
            for change in CANDIDATES[question.id]:
                t, n = one(question, split_papers(gold, train), change)
                cov = t.read_hits / t.full_hits if t.full_hits else 1.0
                scored.append((cov >= TARGETS[question.id], -t.read_windows / n if cov >= TARGETS[question.id]
                               else cov, change))
            best = max(scored, key=lambda x: (x[0], x[1]))[2]
            t, n = one(question, split_papers(gold, held), best)
            for field in ("full_windows", "read_windows", "gold", "full_hits", "read_hits", "text_hits"):
                setattr(pooled[question.id], field, getattr(pooled[question.id], field) + getattr(t, field))
            picks.append(f"{question.id} {best}: {t.read_hits / t.full_hits if t.full_hits else float('nan'):.3f}, "
                         f"{t.read_windows / n:.1f} win/paper")
        print(f"chosen on {train}, measured on {held}: " + "; ".join(picks))
    report("pooled over both held-out halves", pooled, {"papers": len(split_papers(gold, "all"))})


def split_papers(gold: dict, split: str) -> list[str]:
    """Development papers by sorted id: ``tune`` the first half (where settings were chosen), ``test`` the rest."""
    ids = sorted(gold["q1"])
    half = len(ids) // 2
    return {"tune": ids[:half], "test": ids[half:], "all": ids}[split]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="the MLPsych folder (text.json, answers_dev.json)")
    parser.add_argument("--tokenizer", default=None, help="model folder whose tokenizer cuts the windows "
                        "(default: the offline MiniLM's BERT-uncased vocabulary)")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--stride", type=int, default=128)
    parser.add_argument("--split", choices=["tune", "test", "all"], default="all",
                        help="tune: the first half of the papers by sorted id (settings were chosen there); "
                             "test: the other half; all: both")
    parser.add_argument("--mode", choices=["bm25", "dense"], default="bm25")
    parser.add_argument("--budget", type=int, default=None,
                        help="windows per question for every template (default: each template's budget)")
    parser.add_argument("--entity-budget", type=int, default=None)
    parser.add_argument("--entity-extra", type=int, default=None)
    parser.add_argument("--neighbours", type=int, default=None)
    parser.add_argument("--no-entity-anchor", action="store_true")
    parser.add_argument("--readers", choices=["preset", "template"], default="preset",
                        help="readers per question when retrieving: the fast preset's (one) or the template's")
    parser.add_argument("--plain", action="store_true",
                        help="ignore the templates' retrieval blocks: BM25 on the question text alone")
    parser.add_argument("--baseline", action="store_true",
                        help="the first fast preset: BM25 on the question, budget 3, entity budget 2, two readers")
    parser.add_argument("--sweep", action="store_true", help="also print coverage for budgets 2..12 (all templates)")
    parser.add_argument("--cv", action="store_true",
                        help="two-fold check: on each half choose every question's cheapest budget that reaches "
                             "the target coverage, then measure it on the other half")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    from mlpsych.embeddings import default_model
    from mlpsych.retrieval import plan_for
    from mlpsych.settings import PRESETS, apply_preset

    texts, gold = load_data(args.data)
    papers = split_papers(gold, args.split)
    tokenizer_dir = args.tokenizer or default_model()
    reader = Reader(tokenizer_dir, ReaderSettings(max_length=args.max_length, stride=args.stride))
    reader.load_tokenizer()
    questions = load_question_set("mlpsych")
    fast_questions, _ = apply_preset("fast", questions)
    # the retrieval without a cascade (``--small-reader none``): BM25 and the templates' signals and budgets, each
    # sub-question its entity's two best windows plus the paper's best (the fast preset before the cascade)
    fast = PRESETS["fast"].retrieval.model_copy(update={"cascade": CascadeSettings()})
    if args.baseline:
        fast = RetrievalSettings(read="retrieve", mode="bm25", budget=3, entity_budget=2, entity_extra=0)
        args.plain, args.readers = True, "template"
    read_models = ({q.id: len(q.models) for q in fast_questions.questions} if args.readers == "preset" else None)
    print(f"papers: {len(papers)} ({args.split} split of the {len(gold['q1'])} development papers); "
          f"tokenizer: {tokenizer_dir}; window {args.max_length} tokens ({reader.context_tokens} of paper), "
          f"stride {args.stride}")

    def settings_with(**changes) -> RetrievalSettings:
        given = {k: v for k, v in changes.items() if v is not None}
        return fast.model_copy(update={"mode": args.mode, **given})

    def plans_for(settings: RetrievalSettings) -> dict[str, Plan | None]:
        return {q.id: plan_for(None if args.plain else q.retrieval, settings) for q in questions.questions}

    settings = settings_with(budget=args.budget, entity_budget=args.entity_budget, entity_extra=args.entity_extra,
                             neighbours=args.neighbours, entity_anchor=False if args.no_entity_anchor else None)
    tallies, extra = measure(texts, gold, reader, questions, plans_for(settings), WindowSelector(settings), papers,
                             read_models)
    budgets = ", ".join(f"{q}: {p.budget}" for q, p in plans_for(settings).items() if p is not None)
    report(f"{args.mode}{' (question only)' if args.plain else ' + template signals'}, budgets {budgets}, "
           f"entity budget {settings.entity_budget} + {settings.entity_extra} of the paper, neighbours "
           f"{settings.neighbours}, entity anchoring {'on' if settings.entity_anchor else 'off'}, readers "
           f"{'as the template' if read_models is None else read_models}", tallies, extra)
    if args.cv:
        cross_validate(texts, gold, reader, questions, settings, read_models)
    if args.sweep:
        print("\n== sweep: coverage of gold spans (read/full) and windows per paper, one budget for all templates")
        print(f"{'budget':>6} " + " ".join(f"{q:>7}" for q in tallies) + f"{'win/paper':>10}{'fewer x':>9}")
        for b in range(2, 13):
            swept = settings.model_copy(update={"budget": b})
            t, e = measure(texts, gold, reader, questions, plans_for(swept), WindowSelector(swept), papers,
                           read_models)
            cov = [x.read_hits / x.full_hits if x.full_hits else float("nan") for x in t.values()]
            full = sum(x.full_windows for x in t.values()) / e["papers"]
            read = sum(x.read_windows for x in t.values()) / e["papers"]
            print(f"{b:>6} " + " ".join(f"{c:>7.3f}" for c in cov) + f"{read:>10.1f}{full / read:>9.1f}")


if __name__ == "__main__":
    main()
