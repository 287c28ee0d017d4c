"""The cascade's choice of windows, judged out of sample: coverage of gold spans and FLOPs of both readers.

    python benchmarks/cascade_retrieval.py --data ../shared/mlpsych --small READER_FOLDER [--cache DIR] [--json OUT]

READER_FOLDER is the real SQuAD2 stand-in reader (``mlpsych dev train-reader``): it is the cascade's small reader
here. It reads every window of each development paper for q1-q3 and, for q4, the windows naming each bridge entity
(the paper's gold q1 answers, as ``reading_cost.py``), and its best spans are kept (cached in ``--cache``). Then,
for every configuration of the grid (``SHARED`` x ``FOLLOW``: the fusion, spans kept, least windows,
the mass, and whether q4 also asks about "machine learning" in general) the library's own selection
(``mlpsych.retrieval.cascade.select``) picks the large readers' windows (shared windows of 512 tokens, as the
``fast`` preset reads) and this prints:

* **coverage**: the share of the gold spans that the full read covers which lie wholly inside a window read;
* **FLOPs** (``mlpsych.reading.cost``: 2 x weights applied per token x tokens): the paper's full read by the
  template's models (two large readers for q1-q3, one per q4 sub-question; windows of 384 tokens laid out per
  question), and the cascade: the small reader's whole-paper read (charged as ``deepset/minilm-uncased-squad2``,
  the preset's small reader, on the stand-in's measured tokens) plus the ``fast`` preset's readers on the windows
  chosen. ``fewer x`` is the full read's FLOPs over the cascade's, small reader included; beside it, the same
  against the fast preset's own readers reading every window (what the cascade saves by itself).

Out of sample: every configuration is scored per paper once; the rule ``choose`` then picks one on some papers and
it is measured on others: two-fold (halves A and B, alternate papers in the gold's order, as answer_quality.py)
and leave-one-paper-out. The rule was fixed before any figure was read: the cheapest configuration (cascade FLOPs)
whose coverage reaches the targets (q1-q3 0.97, q4 0.95) on the papers it is chosen on; if none does, the one whose
worst question falls least short, then the cheaper. Settings are judged the same way: the two-fold figure again
with the choice barred from a setting (no general sub-question, no fusion ...). Pooled
in-sample figures (the rule applied to all 34 papers and measured on them) are labelled so.

``--bridge-windows small,source`` also scores q4 with its sub-questions read from the windows chosen for q1 that
name the entity (``CascadeSettings.bridge_windows``; no small read for those, the rest as before) and judges it
the same way: the rule restricted to each value, two-fold. The main sections keep the preset's value.

``--unseen-software`` scores each paper as if the ``software`` signal's vocabulary had never heard of that paper's
own tools: the vocabulary's specific names found in the paper's gold q2 answers (every spelling, and the other
name of the same tool in ``ALIASES``) are left out (``signals.window_terms``'s ``exclude``) when its windows are
scored; the generic words (software, package, library, version, implemented ...) and version numbers stay. It
measures how much of q2's coverage rests on the vocabulary naming the papers' software.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.reading_cost import bridge_entities, covered, gold_spans, load_data  # noqa: E402
from mlpsych.answers import Span  # noqa: E402
from mlpsych.documents import Document  # noqa: E402
from mlpsych.embeddings import default_model  # noqa: E402
from mlpsych.questions import load_question_set  # noqa: E402
from mlpsych.reading.cost import flops  # noqa: E402
from mlpsych.reading.reader import Query, Reader  # noqa: E402
from mlpsych.retrieval import WindowSelector, cascade, plan_for  # noqa: E402
from mlpsych.retrieval.signals import (  # noqa: E402
    TERM_SIGNALS,
    signal_scores,
    software_names,
    term_key,
)
from mlpsych.retrieval.tradeoff import choose_point  # noqa: E402
from mlpsych.settings import (  # noqa: E402
    FAST_CASCADE,
    CascadeSettings,
    ReaderSettings,
    RetrievalSettings,
    apply_preset,
)

SMALL_HUB = "deepset/minilm-uncased-squad2"
QUESTIONS = ("q1", "q2", "q3", "q4")
TARGETS = np.array([0.97, 0.97, 0.97, 0.95])
GENERAL = "machine learning"  # q4's general sub-question (the template's also_ask), tried with and without
MAX_SPANS = 100
MASSES = [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99]
# Settings every question shares, then q4's own (whether "machine learning" is asked about too).
SHARED = {"fuse": ["small", "question", "signals"], "spans": [20, 50, 100], "min_windows": [1, 2], "mass": MASSES}
FOLLOW = {"general": [False, True], "bridge_windows": [FAST_CASCADE.bridge_windows]}
TOOL_WINDOWS = FAST_CASCADE.tool_windows  # CascadeSettings.tool_windows for every configuration (--tool-windows)
FIELDS = ("gold", "full_hits", "read_hits", "windows", "small", "large", "full", "same")
F = {name: i for i, name in enumerate(FIELDS)}
# One tool under two keys of the software vocabulary: a vocabulary that never heard of one never heard of the other.
ALIASES = {"sklearn": "scikit learn", "scikit learn": "sklearn", "huggingface": "hugging face",
           "hugging face": "huggingface"}


class MemoSelector(WindowSelector):
    """Signal scores kept per paper, question and signal: the grid asks for the same ones hundreds of times.

    ``exclude``: keys of vocabulary terms the pattern signals leave out (``--unseen-software``)."""

    def __init__(self, settings: RetrievalSettings, exclude: frozenset[str] = frozenset()) -> None:
        super().__init__(settings)
        self.exclude = exclude
        self._memo: dict[tuple, object] = {}

    def scores(self, plan, question, texts, signal):
        key = (question, plan.terms, signal, hash(tuple(texts)))
        if key not in self._memo:
            if self.exclude and signal in TERM_SIGNALS:
                self._memo[key] = signal_scores(signal, texts, exclude=self.exclude)
            else:
                self._memo[key] = super().scores(plan, question, texts, signal)
        return self._memo[key]


def unseen_software(answers: list[dict]) -> frozenset[str]:
    """The software vocabulary's names (keys, with their ``ALIASES``) found in a paper's gold q2 answers, and each
    answer's own key (a gold "statsmodel" is the vocabulary's "statsmodels"; a key it lacks excludes nothing)."""
    names = {key for a in answers for key in software_names(a["text"]) | {term_key(a["text"])}}
    return frozenset(names | {ALIASES[n] for n in names if n in ALIASES})


def full_read_tokens(reader: Reader, doc: Document, question: str) -> int:
    """Input tokens of the paper's full read: windows of 384 tokens laid out around the question (per_question)."""
    q_len = len(reader.tokenizer(question, add_special_tokens=False)["input_ids"])
    size = 384 - 3 - q_len
    windows = reader.encode(doc).windows_for(size, 128)
    return sum(w.token_end - w.token_start + q_len + 3 for w in windows)


def small_reads(small: Reader, texts: dict[str, str], gold: dict, papers: list[str], questions, cache: Path) -> dict:
    """The small reader's best spans and input tokens per paper and (sub-)question, read once and kept in ``cache``."""
    store = json.loads(cache.read_text()) if cache.is_file() else {}
    settings = CascadeSettings(model=str(small.model_id), spans=MAX_SPANS)
    for n, pid in enumerate(papers, start=1):
        doc = Document(id=pid, text=texts[pid])
        wanted = {}
        for q in questions.questions:
            if q.bridge_from:
                entities = bridge_entities(doc.text, gold["q1"].get(pid, []), q.max_sub_questions) + [GENERAL]
                for e in dict.fromkeys(entities):
                    wanted[f"q4|{e}"] = Query(q.id, q.sub_question(e), 1, q.answer_tokens, bridge_entity=e)
            else:
                wanted[q.id] = Query(q.id, q.text, 1, q.answer_tokens)
        todo = [k for k in wanted if k not in store.get(pid, {})]
        for key in todo:
            query = cascade.small_query(wanted[key], settings, small, doc)
            before = small.tokens_read
            spans = small.run(doc, [query])[0]
            store.setdefault(pid, {})[key] = {"tokens": small.tokens_read - before,
                                              "spans": [[s.start, s.end, s.score] for s in spans]}
        if todo:
            cache.write_text(json.dumps(store))
            print(f"  small reader: paper {n}/{len(papers)} ({len(todo)} reads)", flush=True)
    return store


class LargeWindows:
    """The large readers' windows per paper and each question's length in tokens, computed once: the grid asks for
    them hundreds of times, and a reader keeps only a few papers tokenized."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self._windows: dict[str, list] = {}
        self._lengths: dict[str, int] = {}
        self._naming: dict[tuple[str, str], set[tuple[int, int]]] = {}

    def windows(self, doc: Document) -> list:
        if doc.id not in self._windows:
            self._windows[doc.id] = self.reader.windows(doc)
        return self._windows[doc.id]

    def naming(self, doc: Document, entity: str) -> set[tuple[int, int]]:
        """The paper's windows (by characters) naming ``entity``: ``cascade.naming`` keeps or drops each window on
        its own text, so the q1 windows naming it are those of these among the q1 windows."""
        key = (doc.id, entity)
        if key not in self._naming:
            self._naming[key] = set(cascade.naming(doc, cascade.ranges_of(self.windows(doc), None), entity))
        return self._naming[key]

    def question_tokens(self, text: str) -> int:
        if text not in self._lengths:
            self._lengths[text] = len(self.reader.tokenizer(text, add_special_tokens=False)["input_ids"])
        return self._lengths[text]


def score_question(config: dict, q, doc: Document, gold, store, large: LargeWindows, fast_models,
                   selectors: dict[str, MemoSelector], full_cost: dict,
                   source: cascade.Ranges = ()) -> tuple[np.ndarray, cascade.Ranges]:
    """The fields of ``FIELDS`` for one question of one paper under one configuration (q4: all its sub-questions),
    and the windows read; ``selectors``: each paper's; ``source``: the windows read for q1 (q4's sub-questions
    read those naming their entity under ``bridge_windows=source``)."""
    selector = selectors[doc.id]
    settings = RetrievalSettings(read="retrieve", cascade=CascadeSettings(
        model="small", mass=config["mass"], spans=config["spans"], min_windows=config["min_windows"],
        fuse=config["fuse"], tool_windows=TOOL_WINDOWS))
    plan = plan_for(q.retrieval, settings)
    pid, windows = doc.id, large.windows(doc)
    out = np.zeros(len(FIELDS))
    if q.bridge_from:
        entities = bridge_entities(doc.text, gold["q1"].get(pid, []), q.max_sub_questions)
        asked = [(e, q.sub_question(e)) for e in entities]
        extra = [(GENERAL, q.sub_question(GENERAL))] if config["general"] and entities and \
            GENERAL.casefold() not in {e.casefold() for e in entities} else []
        keys = [f"q4|{e}" for e, _ in asked + extra]
    else:
        asked, extra, keys = [(None, q.text)], [], [q.id]
    read: list[tuple[int, int]] = []
    for key, (entity, text) in zip(keys, asked + extra):
        found = store[pid][key]
        named = large.naming(doc, entity) if entity and config["bridge_windows"] == "source" else set()
        sourced = cascade.windows_at(windows, [r for r in source if r in named])
        if sourced:  # no small read: the q1 windows naming the entity
            picked = [windows[i] for i in sourced]
        else:
            spans = [Span(pid, q.id, "small", "", a, b, score) for a, b, score in found["spans"][: config["spans"]]]
            chosen = cascade.select(doc, windows, text, plan, selector, spans)
            picked = windows if chosen is None else [windows[i] for i in chosen]
            out[F["small"]] += flops(SMALL_HUB, found["tokens"])
        q_len = large.question_tokens(text)
        tokens = sum(w.token_end - w.token_start + q_len + 3 for w in picked)
        out[F["windows"]] += len(picked) * len(fast_models[q.id])
        out[F["large"]] += sum(flops(m, tokens) for m in fast_models[q.id])
        read.extend((w.char_start, w.char_end) for w in picked)
    for _, text in asked:
        out[F["full"]] += full_cost[(pid, text)]["template"]
        out[F["same"]] += full_cost[(pid, text)]["fast"]
    if q.id in gold and pid in gold[q.id] and asked:
        everything = [(w.char_start, w.char_end) for w in windows]
        for span in gold_spans(doc.text, gold[q.id][pid]):
            out[F["gold"]] += 1
            out[F["full_hits"]] += covered(span, everything)
            out[F["read_hits"]] += covered(span, read)
    return out, tuple(read)


def grid(options: dict[str, list]) -> list[dict]:
    """Every combination of the options' values."""
    return [dict(zip(options, values)) for values in itertools.product(*options.values())]


def score_all(docs: list[Document], template, **context) -> tuple[list[dict], np.ndarray]:
    """Every combined configuration and its fields per paper and question: ``[config, paper, question, field]``.

    q1-q3 do not depend on q4's own settings, so they are scored once per shared setting and paired with each."""
    first_qs = [q for q in template.questions if not q.bridge_from]
    follow_q = next(q for q in template.questions if q.bridge_from)
    names, blocks = [], []
    for shared in grid(SHARED):
        scored = [[score_question(shared, q, d, **context) for q in first_qs] for d in docs]
        first = np.stack([[fields for fields, _ in row] for row in scored])
        bridge = [q.id for q in first_qs].index(follow_q.bridge_from)
        source = [row[bridge][1] for row in scored]
        for own in grid(FOLLOW):
            follow = np.stack([[score_question({**shared, **own}, follow_q, d, **context, source=s)[0]]
                               for d, s in zip(docs, source)])
            names.append({**shared, **own})
            blocks.append(np.concatenate([first, follow], axis=1))
    return names, np.stack(blocks)


def coverage(sums: np.ndarray) -> np.ndarray:
    """Per question (last axis but one): read hits over the full read's hits (1 where it has none)."""
    full, read = sums[..., F["full_hits"]], sums[..., F["read_hits"]]
    return np.where(full > 0, read / np.maximum(full, 1), 1.0)


def choose(results: np.ndarray, papers: np.ndarray) -> int:
    """The rule (``mlpsych.retrieval.tradeoff.choose_point``, fixed before the figures were read) on these papers:
    the cheapest configuration (small + large reader FLOPs) reaching every target; if none does, the one whose
    worst question falls least short of its target, then the cheaper."""
    sums = results[:, papers].sum(axis=1)  # [config, question, field]
    return choose_point(coverage(sums), (sums[..., F["small"]] + sums[..., F["large"]]).sum(axis=1), TARGETS)


def name_of(config: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def report(label: str, sums: np.ndarray, n_papers: int) -> dict:
    """One line per arm: coverage and large windows per paper per question, FLOPs per paper and the ratios."""
    cov = coverage(sums)
    small, large = sums[:, F["small"]].sum(), sums[:, F["large"]].sum()
    full, same = sums[:, F["full"]].sum(), sums[:, F["same"]].sum()
    cells = ", ".join(f"{q} {cov[i]:.3f} ({sums[i, F['read_hits']]:.0f}/{sums[i, F['full_hits']]:.0f}, "
                      f"{sums[i, F['windows']] / n_papers:.1f} win)" for i, q in enumerate(QUESTIONS))
    print(f"{label}: {cells}; per paper TFLOPs: full read {full / n_papers / 1e12:.1f}, small reader "
          f"{small / n_papers / 1e12:.2f}, large readers {large / n_papers / 1e12:.2f} -> "
          f"{full / (small + large):.1f}x "
          f"fewer (the fast readers reading everything: {same / n_papers / 1e12:.1f} TFLOPs, "
          f"{same / (small + large):.2f}x)", flush=True)
    return {"coverage": dict(zip(QUESTIONS, cov.tolist())), "fewer_x": float(full / (small + large)),
            "papers": n_papers,
            "hits": {q: [float(sums[i, F["read_hits"]]), float(sums[i, F["full_hits"]])]
                     for i, q in enumerate(QUESTIONS)},
            "fewer_x_same_readers": float(same / (small + large)),
            "windows_per_paper": dict(zip(QUESTIONS, (sums[:, F["windows"]] / n_papers).tolist())),
            "tflops_per_paper": {"full": full / n_papers / 1e12, "small": small / n_papers / 1e12,
                                 "large": large / n_papers / 1e12}}


def two_fold(results: np.ndarray, halves: dict[str, np.ndarray]) -> tuple[dict[str, int], np.ndarray]:
    """Each half's configuration chosen by the rule on the other half, and the held-out halves' fields pooled."""
    picks = {test: choose(results, halves[train]) for train, test in (("A", "B"), ("B", "A"))}
    return picks, sum(results[pick, halves[test]].sum(0) for test, pick in picks.items())


def judge_bridge_windows(names: list[dict], results: np.ndarray, halves: dict[str, np.ndarray]) -> dict:
    """The rule restricted to each value of ``bridge_windows`` (out of sample: two-fold, pooled), and its choices
    per held-out half and on every paper (for answer_quality.py's ``fast-cv-<value>`` arms)."""
    print("== q4's sub-questions: the small reader's choice (small) or q1's windows naming the entity (source); "
          "the rule restricted to each, two-fold")
    out: dict = {"bridge_windows": {}, "held_out_bridge": {}, "shipped_bridge": {}}
    n_papers = len(halves["A"])
    for value in FOLLOW["bridge_windows"]:
        allowed = np.flatnonzero([c["bridge_windows"] == value for c in names])
        picks, pooled = two_fold(results[allowed], halves)
        out["held_out_bridge"][value] = {test: name_of(names[allowed[pick]]) for test, pick in picks.items()}
        out["shipped_bridge"][value] = name_of(names[allowed[choose(results[allowed], np.ones(n_papers, bool))]])
        print(f"  bridge_windows={value}: held out A [{out['held_out_bridge'][value]['A']}], "
              f"B [{out['held_out_bridge'][value]['B']}]")
        out["bridge_windows"][value] = report(f"  bridge_windows={value}, two-fold pooled (out of sample)", pooled,
                                              n_papers)
    print()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--small", required=True, help="the stand-in small reader (a trained SQuAD2 reader folder)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/mlpsych-cascade"))
    parser.add_argument("--json", type=Path, default=None, help="write the folds' choices here (for answer_quality)")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--large-tokenizer", default=None, help="model folder whose tokenizer cuts the large "
                        "readers' windows (default: the offline MiniLM's BERT-uncased vocabulary)")
    parser.add_argument("--bridge-windows", default=FAST_CASCADE.bridge_windows,
                        help="values of CascadeSettings.bridge_windows to score, comma-separated (small,source "
                             "judges q4's sub-questions read from q1's windows)")
    parser.add_argument("--unseen-software", action="store_true", help="score each paper without the software "
                        "vocabulary's names of its own gold q2 answers (as if its tools were unknown)")
    parser.add_argument("--tool-windows", choices=["on", "off"], default=None, help="CascadeSettings.tool_windows "
                        "for every configuration (default: the preset's)")
    args = parser.parse_args(argv)
    FOLLOW["bridge_windows"] = args.bridge_windows.split(",")
    global TOOL_WINDOWS
    if args.tool_windows:
        TOOL_WINDOWS = args.tool_windows == "on"
    logging.basicConfig(level=logging.WARNING)
    args.cache.mkdir(parents=True, exist_ok=True)

    texts, gold = load_data(args.data)
    ids = list(gold["q1"])
    halves = {"A": np.arange(len(ids)) % 2 == 0, "B": np.arange(len(ids)) % 2 == 1}
    template = load_question_set("mlpsych")
    fast_questions, fast_settings = apply_preset("fast", template)
    fast_models = {q.id: q.models for q in fast_questions.questions}
    small = Reader(args.small, ReaderSettings(max_length=fast_settings.reader.max_length, dtype=args.dtype,
                                              device="cpu"))
    # the large readers' windows: 512 tokens as the fast preset's base readers take (the stand-in's tokenizer is
    # capped at 384 positions; the offline MiniLM's is the same BERT-uncased vocabulary at 512)
    large = Reader(args.large_tokenizer or default_model(), ReaderSettings(max_length=512, layout="shared"))
    full_reader = Reader(args.small, ReaderSettings())
    for r in (small, large, full_reader):
        r.load_tokenizer()
    print(f"{len(ids)} development papers; small reader {args.small} (charged as {SMALL_HUB}); large windows of "
          f"{large.max_length} tokens; fast readers {fast_models}", flush=True)
    store = small_reads(small, texts, gold, ids, template, args.cache / "small_spans.json")

    docs = [Document(id=pid, text=texts[pid]) for pid in ids]
    full_cost: dict[tuple[str, str], dict[str, float]] = {}
    for doc in docs:
        for q in template.questions:
            asked = [q.sub_question(e) for e in bridge_entities(doc.text, gold["q1"].get(doc.id, []),
                                                                q.max_sub_questions)] if q.bridge_from else [q.text]
            for text in asked:
                tokens = full_read_tokens(full_reader, doc, text)
                full_cost[(doc.id, text)] = {"template": sum(flops(m, tokens) for m in q.models),
                                             "fast": sum(flops(m, tokens) for m in fast_models[q.id])}
    shared = MemoSelector(RetrievalSettings(read="retrieve"))
    selectors = {pid: shared for pid in ids}
    if args.unseen_software:
        print("--unseen-software: each paper scored without the software vocabulary's names in its gold q2 answers")
        for pid in ids:
            unseen = unseen_software(gold.get("q2", {}).get(pid, []))
            if unseen:
                selectors[pid] = MemoSelector(RetrievalSettings(read="retrieve"), exclude=unseen)
            print(f"  {pid}: {', '.join(sorted(unseen)) or '-'}")
    every_name, every_result = score_all(docs, template, gold=gold, store=store, large=LargeWindows(large),
                                         fast_models=fast_models, selectors=selectors, full_cost=full_cost)
    print(f"{len(every_name)} configurations scored\n")
    out: dict = {}
    if len(FOLLOW["bridge_windows"]) > 1:
        out.update(judge_bridge_windows(every_name, every_result, halves))
    preset = np.array([c["bridge_windows"] == FAST_CASCADE.bridge_windows for c in every_name])
    names, results = [c for c, keep in zip(every_name, preset) if keep], every_result[preset]

    print("== two-fold: chosen on one half by the rule, measured on the other")
    picks, both = two_fold(results, halves)
    held = {test: name_of(names[pick]) for test, pick in picks.items()}
    for train, test in (("A", "B"), ("B", "A")):
        pick = picks[test]
        report(f"chosen on {train} [{held[test]}], in sample on {train}", results[pick, halves[train]].sum(0),
               int(halves[train].sum()))
        out[f"held_out_{test}"] = report(f"  measured on {test} (out of sample)", results[pick, halves[test]].sum(0),
                                         int(halves[test].sum()))
    out["two_fold"] = report("two-fold, both held-out halves pooled (out of sample)", both, len(ids))

    print("\n== leave-one-paper-out: chosen on the 33 others, measured on the paper left out")
    picks = [choose(results, np.arange(len(ids)) != i) for i in range(len(ids))]
    loo = sum(results[pick, i] for i, pick in enumerate(picks))
    out["leave_one_out"] = report("leave-one-out, pooled (out of sample)", loo, len(ids))
    for pick in sorted(set(picks), key=lambda x: -picks.count(x)):
        print(f"  chosen {picks.count(pick)}x: {name_of(names[pick])}")

    shipped = choose(results, np.ones(len(ids), dtype=bool))
    print(f"\n== the rule on all {len(ids)} papers (the preset's point) [{name_of(names[shipped])}]")
    out["in_sample"] = report("in sample (the papers that chose it)", results[shipped].sum(0), len(ids))

    print("\n== out of sample, one setting changed: each fold's choice made again without it (two-fold, pooled)")
    for label, keep in [("without q4's general sub-question", lambda c: not c["general"]),
                        ("small reader's mass alone (no fusion)", lambda c: c["fuse"] == "small"),
                        ("fused with BM25 only (no pattern signals)", lambda c: c["fuse"] == "question")]:
        allowed = np.array([keep(c) for c in names])
        sub = results[allowed]
        out[label] = report(f"  {label}", two_fold(sub, halves)[1], len(ids))

    print("\n== trade-off curve: the preset's point at each mass, measured on all papers (the other settings were "
          "chosen on them: in sample)")
    point = names[shipped]
    for mass in MASSES:
        index = names.index({**point, "mass": mass})
        out.setdefault("curve", {})[mass] = report(f"mass={mass}", results[index].sum(0), len(ids))
        for half, papers in halves.items():  # answer_quality.py --masses chooses the mass on one half by these
            out.setdefault("curve_halves", {}).setdefault(mass, {})[half] = report(
                f"  half {half}", results[index, papers].sum(0), int(papers.sum()))
    if args.json:
        out.update(held_out=held, shipped=name_of(names[shipped]), point=name_of(point),
                   unseen_software=args.unseen_software)
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
