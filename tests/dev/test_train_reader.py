"""`mlpsych dev train-reader`: SQuAD2 metrics, article splits, features, and training a tiny reader end to end
(a folder mlpsych's Reader loads, held-out articles never trained on, resuming from a checkpoint)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from mlpsych.dev import tiny
from mlpsych.dev.train_reader import (
    Prediction,
    SquadExample,
    TrainSettings,
    best_null_threshold,
    build_features,
    latest_checkpoint,
    length_grouped_batches,
    load_examples,
    split_articles,
    squad2_report,
    squad_scores,
    train_reader,
)
from mlpsych.documents import Document
from mlpsych.errors import InputError
from mlpsych.reading.reader import Query, Reader
from mlpsych.settings import ReaderSettings
from tests.gpu_memory import memory_limit, needs_cuda, peak_bytes

ARTICLES = {
    "Forests": [
        ("Random forests were introduced by Leo Breiman in 2001. They average many decision trees.",
         [("Who introduced random forests?", "Leo Breiman"), ("When were random forests introduced?", "2001"),
          ("Who introduced support vector machines?", None)]),
        ("The models were fitted in R with the caret package, using ten-fold cross-validation.",
         [("Which package was used?", "caret"), ("Which language was used?", "R"),
          ("How many participants were there?", None)]),
    ],
    "Networks": [
        ("Neural networks learn weights by gradient descent. The study trained them for 50 epochs.",
         [("How many epochs were used?", "50"), ("How are weights learnt?", "gradient descent"),
          ("Which optimizer won the prize?", None)]),
    ],
    "Samples": [
        ("Participants (N = 120) were students from three universities in Norway.",
         [("How many participants took part?", "120"), ("Where were the universities?", "Norway"),
          ("What was the mean age?", None)]),
    ],
    "Kernels": [
        ("Support vector machines use kernels; the radial basis function kernel was chosen.",
         [("Which kernel was chosen?", "radial basis function"), ("What was the learning rate?", None)]),
    ],
    "Trees": [
        ("Gradient boosted trees were fitted with XGBoost and tuned by grid search.",
         [("Which library fitted the trees?", "XGBoost"), ("How were they tuned?", "grid search"),
          ("What was the sample size?", None)]),
    ],
}


def squad_json(articles: dict = ARTICLES) -> dict:
    data = []
    for title, paragraphs in articles.items():
        paras = []
        for pi, (context, qas) in enumerate(paragraphs):
            items = []
            for qi, (question, answer) in enumerate(qas):
                qid = f"{title}-{pi}-{qi}"
                if answer is None:
                    items.append({"id": qid, "question": question, "answers": [], "is_impossible": True})
                else:
                    start = context.index(answer)
                    items.append({"id": qid, "question": question, "is_impossible": False,
                                  "answers": [{"text": answer, "answer_start": start}] * 2})
            paras.append({"context": context, "qas": items})
        data.append({"title": title, "paragraphs": paras})
    return {"version": "v2.0", "data": data}


@pytest.fixture
def squad_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-squad.json"
    path.write_text(json.dumps(squad_json()), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tiny_bert(tiny_models_dir: Path) -> Path:
    return tiny.build_tiny_models(tiny_models_dir, ["bert"])["bert"]


def settings(tiny_bert: Path, **changes) -> TrainSettings:
    base = dict(base_model=str(tiny_bert), max_length=64, stride=16, batch_size=4, epochs=3, lr=1e-3,
                unanswerable_fraction=1.0, heldout_articles=2, calibration_articles=1, checkpoint_every=2)
    return TrainSettings(**{**base, **changes})


# ---------------------------------------------------------------------------------------------- metrics


def test_squad_scores_on_hand_computed_cases():
    assert squad_scores(["Paris."], "paris") == (1.0, 1.0)  # case and punctuation
    assert squad_scores(["the cat sat"], "A cat sat") == (1.0, 1.0)  # articles
    em, f1 = squad_scores(["the cat sat"], "cat sat on mats")  # gold {cat, sat}, 2 of 4 predicted words
    assert em == 0.0 and f1 == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    assert squad_scores(["dog", "cat sat"], "cat") == (0.0, pytest.approx(2 / 3))  # best over golds
    assert squad_scores([], "") == (1.0, 1.0)  # unanswerable, left empty
    assert squad_scores([], "cat") == (0.0, 0.0)
    assert squad_scores(["cat"], "") == (0.0, 0.0)


def _ex(i: int, answers: tuple[str, ...]) -> SquadExample:
    return SquadExample(id=str(i), article="a", context="", question="q", answers=answers,
                        answer_starts=(0,) * len(answers))


def test_squad2_report_and_null_threshold_by_hand():
    examples = [_ex(0, ("cat sat",)), _ex(1, ("dog",)), _ex(2, ()), _ex(3, ())]
    preds = [
        Prediction("cat sat", 0.6, 0.2),   # margin +0.4: answered, F1 1
        Prediction("cat", 0.3, 0.2),       # margin +0.1: answered, F1 0 (best span wrong)
        Prediction("mouse", 0.5, 0.3),     # margin +0.2: unanswerable, wrongly answered at threshold 0
        Prediction("rat", 0.1, 0.6),       # margin -0.5: left empty, right
    ]
    report = squad2_report(examples, preds, null_threshold=0.3)
    assert report["answerable_f1"] == 0.5 and report["answerable_em"] == 0.5
    assert report["overall_f1_plain"] == pytest.approx((1 + 0 + 0 + 1) / 4)
    assert report["overall_f1_threshold"] == pytest.approx((1 + 0 + 1 + 1) / 4)  # only the +0.4 span survives
    assert report["unanswerable_empty_plain"] == 0.5 and report["unanswerable_empty_threshold"] == 1.0
    # The best threshold keeps the +0.4 span and drops the +0.2 and +0.1 ones: any t in [0.2, 0.4).
    t = best_null_threshold(examples, preds)
    assert 0.2 <= t < 0.4
    assert squad2_report(examples, preds, t)["overall_f1_threshold"] == 0.75


# ---------------------------------------------------------------------------------------------- data


def test_whole_articles_are_held_out_and_never_trained_on(squad_file):
    examples = load_examples(squad_file)
    assert len(examples) == 17 and sum(not e.answerable for e in examples) == 6
    split = split_articles(examples, heldout_articles=2, calibration_articles=1, unanswerable_fraction=1.0)
    assert split.heldout_articles == ["Kernels", "Trees"] and split.calibration_articles == ["Samples"]
    assert split.train_articles == ["Forests", "Networks"]
    assert {e.article for e in split.train} == {"Forests", "Networks"}
    assert {e.article for e in split.heldout} == {"Kernels", "Trees"} and len(split.heldout) == 5
    assert {e.article for e in split.calibration} == {"Samples"}
    assert not {e.id for e in split.train} & {e.id for e in split.heldout + split.calibration}
    # Every answerable training question is kept; unanswerable ones by a stable share.
    none = split_articles(examples, heldout_articles=2, calibration_articles=1, unanswerable_fraction=0.0)
    assert all(e.answerable for e in none.train) and len(none.train) == 6
    assert len(split.train) == 9
    # Without calibration articles the threshold is chosen on the training articles' questions.
    no_calib = split_articles(examples, heldout_articles=2, calibration_articles=0)
    assert {e.article for e in no_calib.calibration} == {"Forests", "Networks", "Samples"}
    with pytest.raises(InputError, match="too few to hold out"):
        split_articles(examples, heldout_articles=4, calibration_articles=1)


def test_features_label_the_answer_tokens_across_overflowing_windows(tiny_bert):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    context = " ".join(f"filler sentence number {i} says nothing." for i in range(30)) + " The answer is caret here."
    answerable = SquadExample("a", "t", context, "Which package?", ("caret",), (context.index("caret"),))
    unanswerable = SquadExample("u", "t", context, "Which package?")
    s = TrainSettings(base_model=str(tiny_bert), max_length=48, stride=12)
    feats = build_features(tokenizer, [answerable, unanswerable], s, labels=True)
    assert len(feats) > 4 and all(len(ids) <= 48 for ids in feats.input_ids)
    labelled = [i for i in range(len(feats)) if feats.start[i] > 0]
    assert labelled and all(feats.example[i] == 0 for i in labelled)  # only where the answer lies wholly inside
    for i in labelled:
        assert tokenizer.decode(feats.input_ids[i][feats.start[i] : feats.end[i] + 1]).replace(" ", "") == "caret"
    assert all(feats.start[i] == feats.end[i] == 0 for i in range(len(feats)) if feats.example[i] == 1)
    # Decoding features: char offsets point into the context, only context tokens are candidates.
    dec = build_features(tokenizer, [answerable], s, labels=False)
    for mask, offsets in zip(dec.context_mask, dec.offsets):
        assert not mask[0] and all(b <= len(context) for a, b in offsets)


def test_batches_cover_every_feature_once_and_are_reproducible():
    lengths = [5, 30, 12, 7, 40, 9, 22, 3, 18, 11]
    batches = length_grouped_batches(lengths, 3, seed=1, epoch=0)
    assert sorted(i for b in batches for i in b) == list(range(10))
    assert batches == length_grouped_batches(lengths, 3, seed=1, epoch=0)
    assert batches != length_grouped_batches(lengths, 3, seed=1, epoch=1)


# ---------------------------------------------------------------------------------------------- training


@pytest.mark.slow
def test_trains_a_folder_that_the_reader_loads_and_reads(squad_file, tiny_bert, tmp_path):
    out = tmp_path / "reader"
    result = train_reader(squad_file, out, settings(tiny_bert), checkpoint_root=tmp_path / "ckpt", progress=False)
    assert result.finished and result.step == result.steps_total and result.resumed_from == 0
    for name in ("model.safetensors", "config.json", "tokenizer.json", "mlpsych_reader.json"):
        assert (out / name).is_file(), name
    assert not list(out.glob("*.bin")) and not list(out.glob("*.pt"))
    assert latest_checkpoint(result.checkpoint_dir).parent.parent.parent == tmp_path / "ckpt" / "reader"
    meta = json.loads((out / "mlpsych_reader.json").read_text())
    assert meta["articles"]["heldout"] == ["Kernels", "Trees"] and meta["articles"]["train"] == ["Forests", "Networks"]
    assert meta["heldout"]["questions"] == 5 and meta["heldout"]["answerable"] == 3
    for key in ("answerable_f1", "answerable_em", "overall_f1_plain", "overall_f1_threshold"):
        assert 0.0 <= meta["heldout"][key] <= 1.0
    assert meta["null_threshold"] == result.null_threshold
    assert json.loads((out / "tokenizer_config.json").read_text())["model_max_length"] == 64
    assert meta["trained_on"] == str(reader_device())

    # mlpsych's own Reader loads it like a Hub reader and reads a paper with the saved threshold.
    text = ARTICLES["Trees"][0][0]
    reader = Reader(str(out), ReaderSettings(null_threshold=meta["null_threshold"], stride=16, batch_size=2))
    spans = reader.run(Document(id="p", text=text), [Query("q", "Which library fitted the trees?", 3, 8)])[0]
    assert len(spans) == 3 and all(s.text == text[s.start : s.end] for s in spans)
    assert reader.model.config.architectures == ["BertForQuestionAnswering"]


@pytest.mark.slow
def test_an_interrupted_run_resumes_from_its_checkpoint_and_ends_as_an_uninterrupted_one(squad_file, tiny_bert,
                                                                                         tmp_path):
    from safetensors.torch import load_file

    s = settings(tiny_bert)
    whole = train_reader(squad_file, tmp_path / "whole", s, checkpoint_root=tmp_path / "c1", progress=False)

    first = train_reader(squad_file, tmp_path / "split", s, checkpoint_root=tmp_path / "c2", max_steps=3,
                         progress=False)
    assert not first.finished and first.step == 3 and not (tmp_path / "split").exists()
    assert latest_checkpoint(first.checkpoint_dir).name == "step-0000003"
    second = train_reader(squad_file, tmp_path / "split", s, checkpoint_root=tmp_path / "c2", progress=False)
    assert second.resumed_from == 3 and second.finished and second.step == whole.steps_total

    a, b = load_file(tmp_path / "whole" / "model.safetensors"), load_file(tmp_path / "split" / "model.safetensors")
    assert a.keys() == b.keys()
    for key in a:  # same batches, same dropout, AdamW moments restored: the same weights
        assert (a[key] - b[key]).abs().max() < 1e-5, key
    assert second.heldout == pytest.approx(whole.heldout)

    # Other settings are another run: they never resume from these checkpoints.
    other = train_reader(squad_file, tmp_path / "other", settings(tiny_bert, lr=5e-4), checkpoint_root=tmp_path / "c2",
                         max_steps=1, progress=False)
    assert other.resumed_from == 0 and other.checkpoint_dir != first.checkpoint_dir


@pytest.mark.slow
def test_cli_trains_in_steps_and_refuses_the_repository(squad_file, tiny_bert, tmp_path, capsys):
    from mlpsych.cli import main

    args = ["dev", "train-reader", str(squad_file), str(tmp_path / "cli-reader"), "--base-model", str(tiny_bert),
            "--max-length", "64", "--stride", "16", "--batch-size", "4", "--epochs", "2", "--lr", "1e-3",
            "--checkpoint-root", str(tmp_path / "ckpt"), "--no-progress"]
    assert main([*args, "--max-steps", "1"]) == 0
    assert "stopped at step 1" in capsys.readouterr().out
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "held out (5 questions, 3 answerable): answerable-only best-span EM" in printed
    assert (tmp_path / "cli-reader" / "model.safetensors").is_file()

    repo = Path(__file__).resolve().parents[2]
    assert main(["dev", "train-reader", str(squad_file), str(repo / "readers" / "x"), "--base-model", str(tiny_bert),
                 "--no-progress"]) == 2
    assert not (repo / "readers").exists()
    assert main(["dev", "train-reader", str(squad_file), str(tmp_path / "x"), "--lr", "-1"]) == 2


def reader_device():
    """Where ``device="auto"`` trains here: the first CUDA GPU where there is one, else the CPU."""
    import torch

    return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")


def test_a_device_that_is_not_there_is_one_clear_error(squad_file, tiny_bert, tmp_path, capsys):
    from mlpsych.cli import main

    args = ["dev", "train-reader", str(squad_file), str(tmp_path / "r"), "--base-model", str(tiny_bert),
            "--no-progress", "--device"]
    assert main([*args, "tpu"]) == 2
    err = capsys.readouterr().err
    assert "mlpsych: error: unknown device 'tpu' (use auto, cpu, cuda, cuda:N or mps)" in err
    assert "Traceback" not in err and not (tmp_path / "r").exists()
    if reader_device().type == "cpu":
        assert main([*args, "cuda"]) == 2
        assert "no CUDA GPU is visible to torch" in capsys.readouterr().err


@pytest.mark.skipif(reader_device().type != "cuda", reason="needs a CUDA GPU (the device machine's check)")
def test_a_run_started_on_the_gpu_resumes_on_the_cpu_and_back(squad_file, tiny_bert, tmp_path):
    from safetensors.torch import load_file

    first = train_reader(squad_file, tmp_path / "r", settings(tiny_bert, device="cuda"), checkpoint_root=tmp_path,
                         max_steps=3, progress=False)
    assert first.step == 3 and not first.finished
    second = train_reader(squad_file, tmp_path / "r", settings(tiny_bert, device="cpu"), checkpoint_root=tmp_path,
                          max_steps=5, progress=False)
    assert second.resumed_from == 3 and second.step == 5
    third = train_reader(squad_file, tmp_path / "r", settings(tiny_bert, device="cuda"), checkpoint_root=tmp_path,
                         progress=False)
    assert third.resumed_from == 5 and third.finished
    meta = json.loads((tmp_path / "r" / "mlpsych_reader.json").read_text())
    assert meta["trained_on"] == "cuda:0" and 0.0 <= meta["heldout"]["answerable_f1"] <= 1.0
    assert all(t.device.type == "cpu" for t in load_file(tmp_path / "r" / "model.safetensors").values())


def test_micro_batches_add_up_to_the_whole_batch_gradient(squad_file, tiny_bert):
    import torch

    from mlpsych.dev import train_reader as tr
    from mlpsych.models import load_qa_model, load_tokenizer

    s = settings(tiny_bert)
    tokenizer = load_tokenizer(str(tiny_bert))
    feats = build_features(tokenizer, load_examples(squad_file), s, labels=True)
    rows = list(range(5))
    model = load_qa_model(str(tiny_bert), "cpu", torch.float32)
    model.eval()  # no dropout: the passes are then the same arithmetic as the whole batch

    def gradients(micro: int) -> tuple[float, dict]:
        model.zero_grad(set_to_none=True)
        loss = tr._backward(model, feats, rows, tokenizer.pad_token_id, "cpu", micro)
        return loss, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    whole_loss, whole = gradients(len(rows))
    for micro in (1, 2):
        loss, parts = gradients(micro)
        assert loss == pytest.approx(whole_loss, rel=1e-5) and parts.keys() == whole.keys()
        for name, grad in whole.items():
            assert torch.allclose(parts[name], grad, atol=1e-6, rtol=1e-4), name


def test_on_cuda_out_of_memory_a_step_is_retried_in_smaller_passes(squad_file, tiny_bert, monkeypatch, caplog):
    import torch

    from mlpsych.dev import train_reader as tr
    from mlpsych.models import load_qa_model, load_tokenizer

    real, sizes = tr._backward, []
    rows = [0, 1, 2, 3, 4]

    def tight_memory(model, feats, rows, pad_id, device, micro):  # a pass of more than one feature runs out of memory
        sizes.append(micro)
        if micro > 1:  # after its first pass: that pass's gradients are already accumulated
            real(model, feats, rows[:micro], pad_id, device, micro)
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return real(model, feats, rows, pad_id, device, micro)

    tokenizer = load_tokenizer(str(tiny_bert))
    feats = build_features(tokenizer, load_examples(squad_file), settings(tiny_bert), labels=True)
    model = load_qa_model(str(tiny_bert), "cpu", torch.float32)
    model.eval()  # no dropout, so the retried step can be compared with a clean one
    expected_loss = real(model, feats, rows, tokenizer.pad_token_id, "cpu", 1)
    expected = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    monkeypatch.setattr(tr, "_backward", tight_memory)
    loss, micro = tr._backward_or_halve(model, feats, rows, tokenizer.pad_token_id, "cpu", 5)
    assert sizes == [5, 2, 1] and micro == 1 and loss == pytest.approx(expected_loss, rel=1e-6)
    for name, param in model.named_parameters():  # the failed passes' gradients were dropped, not added
        assert torch.allclose(param.grad, expected[name], atol=1e-7), name
    assert "features a pass (--micro-batch-size) halved to 1 and retried" in caplog.text

    def no_memory(*args):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(tr, "_backward", no_memory)
    with pytest.raises(torch.cuda.OutOfMemoryError):  # at one feature a pass the error is the run's
        tr._backward_or_halve(model, feats, [0, 1], tokenizer.pad_token_id, "cpu", 1)


@needs_cuda
def test_on_a_gpu_too_small_for_the_passes_a_step_is_retried_in_smaller_ones(squad_file, tiny_bert, caplog):
    """The device machine's check: CUDA's allocator, capped, refuses passes of 1024 features mid-step; the step
    that fits gives the gradients of a clean step in passes of that size (no dropout)."""
    import torch

    from mlpsych.dev import train_reader as tr
    from mlpsych.models import load_qa_model, load_tokenizer

    tokenizer = load_tokenizer(str(tiny_bert))
    feats = build_features(tokenizer, load_examples(squad_file), settings(tiny_bert), labels=True)
    rows = list(range(len(feats.input_ids))) * (1024 // len(feats.input_ids) + 1)
    model = load_qa_model(str(tiny_bert), "cuda", torch.float32)
    model.eval()

    def step(micro: int) -> float:
        model.zero_grad(set_to_none=True)
        return tr._backward(model, feats, rows, tokenizer.pad_token_id, "cuda", micro)

    step(16)  # first, so what a process allocates once (cuBLAS's workspace) is held before the measure
    fits = peak_bytes(lambda: step(16))
    assert peak_bytes(lambda: step(1024)) > 8 * fits
    model.zero_grad(set_to_none=True)
    with memory_limit(2 * fits + 2**26), caplog.at_level(logging.WARNING, logger="mlpsych.models"):
        loss, micro = tr._backward_or_halve(model, feats, rows, tokenizer.pad_token_id, "cuda", 1024)
    assert 16 <= micro < 1024 and "features a pass (--micro-batch-size) halved to 512 and retried" in caplog.text
    halved = {n: p.grad.clone() for n, p in model.named_parameters()}
    assert loss == pytest.approx(step(micro), rel=1e-5)
    for name, param in model.named_parameters():  # no gradient of the refused passes was kept
        assert torch.allclose(halved[name], param.grad, rtol=1e-4, atol=1e-6), name


@pytest.mark.slow
def test_a_run_resumes_with_other_micro_batches(squad_file, tiny_bert, tmp_path):
    first = train_reader(squad_file, tmp_path / "r", settings(tiny_bert), checkpoint_root=tmp_path, max_steps=3,
                         progress=False)
    second = train_reader(squad_file, tmp_path / "r", settings(tiny_bert, micro_batch_size=1), checkpoint_root=tmp_path,
                          progress=False)
    assert second.resumed_from == 3 and second.finished and second.checkpoint_dir == first.checkpoint_dir
    meta = json.loads((tmp_path / "r" / "mlpsych_reader.json").read_text())
    assert meta["settings"]["micro_batch_size"] == 1


def test_two_trainings_saving_one_checkpoint_at_once_both_go_on(tmp_path: Path, monkeypatch) -> None:
    """One adapt started twice trains the same records with the same settings into one checkpoint folder: both
    wrote each step in `step-N.tmp`, each removed the other's mid-write, and one ended with "SafetensorError ...
    No such file or directory", reported as a bug. Each now writes its own work folder; the step is kept once."""
    import safetensors.torch
    import torch
    from safetensors.torch import load_file

    from mlpsych.dev import train_reader as tr

    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    folder = tmp_path / "checkpoints" / "step-0000020"
    save_model, other = safetensors.torch.save_model, [True]

    def the_other_training_saves_meanwhile(*args, **kwargs) -> None:
        while other:
            other.pop()
            tr._save_checkpoint(folder, model, optimizer, {"step": 20})
        save_model(*args, **kwargs)

    monkeypatch.setattr(safetensors.torch, "save_model", the_other_training_saves_meanwhile)
    tr._save_checkpoint(folder, model, optimizer, {"step": 20})
    monkeypatch.undo()
    assert tr.latest_checkpoint(folder.parent) == folder
    assert [p.name for p in folder.parent.iterdir()] == ["step-0000020"]  # no work folder left
    assert torch.equal(load_file(folder / tr.WEIGHTS_FILE)["weight"], model.weight.detach())


def test_a_reader_folder_written_into_a_shared_folder_is_readable_by_the_colleagues_sharing_it(tiny_bert: Path,
                                                                                             tmp_path: Path) -> None:
    """`mlpsych adapt --out /lab/readers/mine` (and `train-reader`) wrote the weights for their owner only
    (safetensors writes 0600): a colleague's `mlpsych run --adapted` stopped with "model.safetensors: No such file
    or directory" (safetensors' words for "Permission denied"). They now have the umask's permissions."""
    import os
    import stat

    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    from mlpsych.dev.train_reader import save_reader

    model = AutoModelForQuestionAnswering.from_pretrained(tiny_bert)
    umask = os.umask(0o002)  # a lab's group folder
    try:
        save_reader(tmp_path / "mine", model, AutoTokenizer.from_pretrained(tiny_bert), settings(tiny_bert), {})
    finally:
        os.umask(umask)
    assert {f.name: stat.S_IMODE(f.stat().st_mode) for f in (tmp_path / "mine").iterdir()} == {
        f.name: 0o664 for f in (tmp_path / "mine").iterdir()}


def test_an_out_dir_that_is_a_file_is_said_before_training(squad_file, tiny_bert, tmp_path, capsys):
    """A file named as the reader folder was found at the write after the training ("this is a bug in
    mlpsych"); so was a file named as the tiny models' folder."""
    from mlpsych.cli import main

    (tmp_path / "reader").write_text("notes")
    assert main(["dev", "train-reader", str(squad_file), str(tmp_path / "reader"), "--base-model", str(tiny_bert),
                 "--checkpoint-root", str(tmp_path / "ckpt"), "--no-progress"]) == 2
    assert capsys.readouterr().err.strip() == (f"mlpsych: error: out_dir {tmp_path / 'reader'} is a file: a reader is "
                                               "a folder; give the name of a new folder")
    assert not (tmp_path / "ckpt").exists()  # nothing was trained
    assert main(["dev", "tiny-models", str(tmp_path / "reader")]) == 2
    assert capsys.readouterr().err.strip() == (f"mlpsych: error: {tmp_path / 'reader'} is a file: give the name of a "
                                               "folder for the tiny models")


@pytest.mark.parametrize("content, said", [
    ('{"q1": {"paper": ["SVM"]}}', "not SQuAD-format JSON (no 'data' field; expected"),  # gold answers, say
    ('{"data": [{"title": "t", "paragraphs": [{"context": "c"}]}]}', "not SQuAD-format JSON (no 'qas' field"),
    ('{"data": {"a": 1}}', "not SQuAD-format JSON ('str' object has no attribute 'get'"),
    ("[1, 2", "not valid JSON (line 1: Expecting"),
])
def test_a_file_that_is_not_squad_json_is_one_line(tmp_path, capsys, content, said):
    """`dev train-reader` (and `adapt --replay`, which reads its file the same way) with a JSON file of another
    kind ended in "KeyError: 'data'" and "this is a bug in mlpsych"."""
    from mlpsych.cli import main

    data = tmp_path / "data.json"
    data.write_text(content, encoding="utf-8")
    assert main(["dev", "train-reader", str(data), str(tmp_path / "reader"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"mlpsych: error: {data}: {said}") and "\n" not in err
