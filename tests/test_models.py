"""Device and dtype choice: half precision only where the hardware runs it natively; why a model did not load."""

from __future__ import annotations

import pytest
import torch

from mlpsych.models import ModelLoadError, cpu_runs_bf16_natively, load_failure_reason, pick_dtype

FLAGS = "processor\t: 0\nflags\t\t: fpu vme sse sse2 avx2 avx512f avx512bw {extra}\n"


@pytest.mark.parametrize(("extra", "native"), [("", False), ("avx512_bf16", True), ("amx_tile amx_bf16", True),
                                               ("avx512_bf16x", False)])
def test_native_bf16_is_read_from_the_cpu_flags(tmp_path, extra, native):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(FLAGS.format(extra=extra), encoding="utf-8")
    assert cpu_runs_bf16_natively(cpuinfo) is native
    assert cpu_runs_bf16_natively(tmp_path / "absent") is False  # not Linux: no cpuinfo, no claim


def test_auto_dtype_on_a_cpu_follows_its_bf16_support(tmp_path, monkeypatch):
    import mlpsych.models as models

    monkeypatch.delenv(models.DTYPE_ENV, raising=False)
    plain, native = tmp_path / "plain", tmp_path / "native"
    plain.write_text(FLAGS.format(extra=""), encoding="utf-8")
    native.write_text(FLAGS.format(extra="amx_bf16"), encoding="utf-8")
    monkeypatch.setattr(models, "CPUINFO", plain)
    assert pick_dtype("auto", "cpu") is torch.float32
    monkeypatch.setattr(models, "CPUINFO", native)
    assert pick_dtype("auto", "cpu") is torch.bfloat16
    assert pick_dtype("fp32", "cpu") is torch.float32  # asked for: kept
    with pytest.raises(ModelLoadError, match="fp16 is not supported"):
        pick_dtype("fp16", "cpu")


def test_the_environment_decides_what_auto_means(monkeypatch):
    from mlpsych.models import DTYPE_ENV, dtype_name

    monkeypatch.setenv(DTYPE_ENV, "bf16")
    assert pick_dtype("auto", "cpu") is torch.bfloat16 and dtype_name("auto", "cpu") == "bfloat16"
    assert pick_dtype("fp32", "cpu") is torch.float32  # an explicit choice wins
    monkeypatch.setenv(DTYPE_ENV, "fp32")
    assert pick_dtype("auto", "cpu") is torch.float32 and dtype_name("auto", "cpu") == "float32"
    monkeypatch.setenv(DTYPE_ENV, "fp8")
    with pytest.raises(ModelLoadError, match=r"'fp8' \(from \$MLPSYCH_DTYPE\)"):
        pick_dtype("auto", "cpu")


def test_bf16_asked_for_on_a_cpu_without_it_is_read_but_warned_about_once(tmp_path, monkeypatch, caplog):
    # Emulated bf16 read 4.5-7x slower than fp32 on an AVX2-only CPU (benchmarks/README.md): say so, once.
    import mlpsych.models as models

    plain, native = tmp_path / "plain", tmp_path / "native"
    plain.write_text(FLAGS.format(extra=""), encoding="utf-8")
    native.write_text(FLAGS.format(extra="avx512_bf16"), encoding="utf-8")
    models._warn_emulated_bf16.cache_clear()
    monkeypatch.setattr(models, "CPUINFO", native)
    with caplog.at_level("WARNING", logger="mlpsych.models"):
        assert pick_dtype("bf16", "cpu") is torch.bfloat16
        assert not caplog.records
        monkeypatch.setattr(models, "CPUINFO", plain)
        assert pick_dtype("bf16", "cpu") is torch.bfloat16 and pick_dtype("bf16", "cpu") is torch.bfloat16
        monkeypatch.setenv(models.DTYPE_ENV, "fp32")
        assert pick_dtype("auto", "cpu") is torch.float32
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "without bf16 instructions" in warnings[0] and "fp32" in warnings[0]


def test_int8_is_a_reader_dtype_on_the_cpu_with_its_own_cache_key():
    from mlpsych.models import dtype_name
    from mlpsych.settings import ReaderSettings

    assert pick_dtype("int8", "cpu", int8=True) is torch.qint8
    assert dtype_name("int8", "cpu", int8=True) == "qint8"
    keys = {d: ReaderSettings(dtype=d, device="cpu").cache_fields()["dtype"] for d in ("fp32", "bf16", "int8")}
    assert len(set(keys.values())) == 3  # int8 answers are never taken for fp32's or bf16's from the cache


@pytest.mark.parametrize(("device", "int8", "message"), [
    ("cuda", True, "int8 runs on the CPU only .*no cuda kernels.*--device cpu"),
    ("mps", True, "int8 runs on the CPU only"),
    ("cpu", False, "int8 is for the readers only"),  # the embedding model and the LLM are not quantized
])
def test_int8_is_refused_where_it_cannot_run(device, int8, message):
    with pytest.raises(ModelLoadError, match=message):
        pick_dtype("int8", device, int8=int8)


def test_int8_from_the_environment_quantizes_the_readers_and_leaves_other_models_auto(monkeypatch):
    """MLPSYCH_DTYPE=int8 is how a user asks for int8 readers; it used to turn the LLM off (int8 refused for it)."""
    import mlpsych.models as models

    monkeypatch.delenv(models.DTYPE_ENV, raising=False)  # CI forces bf16 or fp32 through it: auto as on this CPU
    automatic = pick_dtype("auto", "cpu")
    monkeypatch.setenv(models.DTYPE_ENV, "int8")
    assert pick_dtype("auto", "cpu", int8=True) is torch.qint8
    assert pick_dtype("auto", "cpu") is automatic
    with pytest.raises(ModelLoadError, match="int8 is for the readers only"):
        pick_dtype("int8", "cpu")  # asked for by name, it is still refused


def test_int8_is_refused_by_a_torch_without_dynamic_quantization(monkeypatch):
    import mlpsych.models as models

    monkeypatch.setattr(models, "_quantize_dynamic", lambda: None)
    with pytest.raises(ModelLoadError, match=r"int8 \(from \$MLPSYCH_DTYPE\): this torch .* no dynamic quantization"):
        monkeypatch.setenv(models.DTYPE_ENV, "int8")
        pick_dtype("auto", "cpu", int8=True)


# What transformers 4.57.1's fast tokenizer, built from the tiny ALBERT's spiece.model, gives for these texts
# (recorded in a transformers 4.57.1 venv): a word's first piece starts at the space before it, a run of spaces or a
# tab before a word counts as one space (the last), a bare "▁" piece covers that space. With the pieces they were
# recorded for: sentencepiece 0.2.3 trains the tiny vocabulary; another version (0.2.2 on the device machine) trains
# other pieces, whose 4.57.1 offsets were not recorded.
ALBERT_457 = {
    "a ( b ) c": (["▁a", "▁(", "▁b", "▁", ")", "▁", "c"],
                  [(0, 1), (1, 3), (3, 5), (5, 6), (6, 7), (7, 8), (8, 9)]),
    " lead space": (["▁", "le", "ad", "▁sp", "a", "c", "e"],
                    [(0, 1), (1, 3), (3, 5), (5, 8), (8, 9), (9, 10), (10, 11)]),
    "On Intimate  partner\nviolence (IPV) is\t a test": (
        ["▁", "on", "▁", "int", "i", "mat", "e", "▁part", "n", "er", "▁vi", "ol", "en", "c", "e", "▁(", "i", "p", "v",
         ")", "▁", "is", "▁a", "▁test"],
        [(0, 1), (0, 2), (2, 3), (3, 6), (6, 7), (7, 10), (10, 11), (12, 17), (17, 18), (18, 20), (20, 23), (23, 25),
         (25, 27), (27, 28), (28, 29), (29, 31), (31, 32), (32, 33), (33, 34), (34, 35), (35, 36), (36, 38), (39, 41),
         (41, 46)]),
}


@pytest.mark.parametrize("text", sorted(ALBERT_457))
def test_a_sentencepiece_tokenizer_from_its_model_file_has_transformers_4_offsets(tiny_models, text):
    from importlib.metadata import version

    from transformers import AutoTokenizer

    from mlpsych.models import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_models["albert"]))
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    plain = AutoTokenizer.from_pretrained(str(tiny_models["albert"]))(text, add_special_tokens=False)
    assert encoded["input_ids"] == plain["input_ids"]  # the same pieces
    pieces, offsets = ALBERT_457[text]
    if tokenizer.convert_ids_to_tokens(encoded["input_ids"]) != pieces:
        pytest.skip(f"sentencepiece {version('sentencepiece')} trained the tiny ALBERT other pieces than those whose "
                    "transformers 4.57.1 offsets were recorded (with sentencepiece 0.2.3)")
    assert [tuple(o) for o in encoded["offset_mapping"]] == offsets


@pytest.mark.parametrize("family", ["deberta-v2", "bert", "roberta", "electra"])
def test_other_tokenizers_are_loaded_as_they_are(tiny_models, family):
    from transformers import AutoTokenizer

    from mlpsych.models import load_tokenizer

    text = "On Intimate  partner\nviolence (IPV) is\t a test"
    ours = load_tokenizer(str(tiny_models[family]))(text, return_offsets_mapping=True)
    plain = AutoTokenizer.from_pretrained(str(tiny_models[family]))(text, return_offsets_mapping=True)
    assert ours["input_ids"] == plain["input_ids"] and ours["offset_mapping"] == plain["offset_mapping"]


@pytest.mark.parametrize("status", ["401", "403"])
def test_a_missing_folder_whose_path_holds_an_http_status_is_a_missing_folder(tmp_path, status):
    """Regression: CI's fp32 run failed when pytest's temporary folder was pytest-401: the path's "401" read as the
    Hub refusing a token, and a missing folder was reported as a gated model."""
    path = str(tmp_path / f"pytest-{status}" / "no-such-reader")
    error = OSError(f"Incorrect path_or_model_id: '{path}'. Please provide either the path to a local folder or the "
                    "repo_id of a model on the Hub.")
    assert load_failure_reason(path, error) == "is not an existing folder"
    assert "gated" not in load_failure_reason(f"org-{status}/reader", OSError(f"org-{status}/reader is not a repo"))


def test_a_reader_folder_whose_weights_this_user_may_not_read_says_so(tmp_path, monkeypatch):
    """A colleague's reader written for its owner only (0600 weights, as `mlpsych adapt` wrote them) stopped the run
    with "cannot be loaded from its folder: No such file or directory: .../model.safetensors": safetensors' words
    for a file it may not open. (Simulated: tests may run as root, who may read anything.)"""
    import os
    from pathlib import Path

    from mlpsych import models

    folder = tmp_path / "their-reader"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        (folder / name).write_text("{}", encoding="utf-8")
    access = os.access
    monkeypatch.setattr(models.os, "access", lambda path, mode: Path(path).suffix != ".safetensors"
                        and access(path, mode))
    error = FileNotFoundError(f"No such file or directory: {folder / 'model.safetensors'}")
    assert load_failure_reason(str(folder), error) == (
        "cannot be read by this user: model.safetensors in its folder may be read by its owner only (the owner can "
        "share it: chmod -R a+rX, or g+rX for a group)")


@pytest.mark.parametrize("text", ["401 Client Error: Unauthorized for url: https://huggingface.co/x/resolve/main/a",
                                  "Client error '403 Forbidden' for url 'https://huggingface.co/x'",
                                  "HTTP Error 401: Unauthorized"])
def test_the_hubs_refusals_are_read_as_gated(text):
    assert "gated" in load_failure_reason("meta-llama/x", OSError(text))


def test_out_of_memory_halves_the_size_until_it_fits(caplog):
    from mlpsych.models import halving_on_oom

    tried, undone = [], []

    def attempt(size: int) -> str:
        tried.append(size)
        if size > 3:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return f"read {size}"

    result = halving_on_oom(attempt, 13, "windows a batch", before_retry=lambda: undone.append(len(tried)))
    assert result == ("read 3", 3) and tried == [13, 6, 3] and undone == [1, 2]
    assert [r.getMessage() for r in caplog.records] == ["CUDA out of memory; windows a batch halved to 6 and retried",
                                                        "CUDA out of memory; windows a batch halved to 3 and retried"]
    with pytest.raises(torch.cuda.OutOfMemoryError):  # one item does not fit either: the caller's error
        halving_on_oom(lambda size: attempt(size + 8), 2, "x")
    assert tried[-2:] == [10, 9]

    def workspace(size: int) -> int:  # CUDA's own allocation failing (a library's workspace): an AcceleratorError
        tried.append(size)
        if size > 2:
            raise torch.AcceleratorError("CUDA error: out of memory")
        return size

    assert halving_on_oom(workspace, 8, "x") == (2, 2) and tried[-3:] == [8, 4, 2]

    for error in (ValueError("not a memory error"), torch.AcceleratorError("CUDA error: an illegal memory access")):
        def broken(size: int) -> None:
            raise error

        with pytest.raises(type(error)):  # other errors are not retried
            halving_on_oom(broken, 8, "x", before_retry=lambda: undone.append(-1))
    assert -1 not in undone


def test_a_gpu_without_room_for_a_reader_is_one_clear_error(tiny_models, monkeypatch):
    """CUDA's "out of memory" while a reader moves to the GPU (an AcceleratorError when other processes hold the
    card, as on the device machine) is a model that cannot load here, not a bug of mlpsych; other errors pass."""
    from mlpsych.models import load_qa_model

    def to(self, *args, **kwargs):
        raise torch.AcceleratorError("CUDA error: out of memory")

    monkeypatch.setattr(torch.nn.Module, "to", to)
    with pytest.raises(ModelLoadError, match=r"does not fit in the memory left on cuda \(AcceleratorError\): other "
                                             r"programs may hold it \(nvidia-smi lists them\)"):
        load_qa_model(str(tiny_models["bert"]), "cuda", torch.float32)

    def broken(self, *args, **kwargs):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torch.nn.Module, "to", broken)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        load_qa_model(str(tiny_models["bert"]), "cuda", torch.float32)


def test_a_model_without_a_trained_span_head_is_refused_as_a_reader(tiny_models, tmp_path):
    """A base encoder (``bert-base-uncased``) or a causal LM named as a reader got a random span head from
    transformers and wrote meaningless answers for every paper, with only a log line; it is now refused, while
    training (``train-reader``, ``adapt``) still starts from such an encoder, and every real reader family loads."""
    from mlpsych.models import load_qa_model

    bare = tmp_path / "bare-bert"
    reader = load_qa_model(str(tiny_models["bert"]), "cpu", torch.float32)
    reader.base_model.save_pretrained(bare)  # the encoder alone, as a base checkpoint on the Hub is saved
    for folder in (bare, tiny_models["llama"]):
        with pytest.raises(ModelLoadError, match=r"is not an extractive question-answering model: its weights have "
                                                 r"no answer-span head \(.*qa_outputs.weight.*\)"):
            load_qa_model(str(folder), "cpu", torch.float32)
    start = load_qa_model(str(bare), "cpu", torch.float32, trained_head=False)
    assert torch.equal(start.base_model.embeddings.word_embeddings.weight,
                       reader.base_model.embeddings.word_embeddings.weight)
    for family in ("deberta-v2", "albert", "electra", "roberta", "bert"):
        assert load_qa_model(str(tiny_models[family]), "cpu", torch.float32).training is False
