"""Loading and releasing models: one place for devices, dtypes, safe weights and clear errors."""

from __future__ import annotations

import functools
import gc
import json
import logging
import os
import re
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from mlpsych.errors import ModelLoadError
from mlpsych.hub import OFFLINE_HELP, offline_unless_reachable

log = logging.getLogger(__name__)
T = TypeVar("T")

# Passed to every from_pretrained (configs, tokenizers, weights). Not told, transformers asks on the terminal "Do you
# wish to run the custom code? [y/N]" for a folder or Hub repo whose config names its own Python code (auto_map),
# and runs that code on a "y": mlpsych never runs a model's code, so it answers no for the researcher.
NO_REMOTE_CODE = {"trust_remote_code": False}


# Written by mlpsych.dev.tiny into every random-weight model it builds (the demo models of the app and the tests).
RANDOM_WEIGHTS_MARKER = "mlpsych_tiny.json"
DEMO_NOTE = ("demo answers: read by random-weight models built by mlpsych (the tiny demo models), so they are "
             "meaningless; they only show how the tool works")


def is_random_weights(model: str) -> bool:
    """A model built with random weights by ``mlpsych dev tiny-models``: what it reads is no answer."""
    return (Path(model) / RANDOM_WEIGHTS_MARKER).is_file()


def pick_device(requested: str = "auto") -> str:
    """``auto`` takes CUDA, then Apple's MPS, then the CPU; an explicit device must exist."""
    import torch

    if requested == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError(f"device {requested!r} asked for, but no CUDA GPU is visible to torch")
    if requested == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ModelLoadError("device 'mps' asked for, but Apple's MPS backend is not available")
    if requested not in ("cpu", "mps") and not requested.startswith("cuda"):
        raise ModelLoadError(f"unknown device {requested!r} (use auto, cpu, cuda, cuda:N or mps)")
    return requested


CPUINFO = Path("/proc/cpuinfo")
# Forces what "auto" means for every model of the library (readers, LLM, embeddings): e.g. to run the whole test
# suite once in bf16 and once in fp32 on any machine.
DTYPE_ENV = "MLPSYCH_DTYPE"


@functools.cache
def cpu_runs_bf16_natively(cpuinfo: Path = CPUINFO) -> bool:
    """Whether the CPU has bf16 matrix instructions (AMX-BF16 or AVX512-BF16; read once from Linux's cpuinfo,
    which is slow to read on large machines and asked for at every cache key).

    Without them torch emulates bf16, which was slower than fp32: 0.3x-0.9x its speed on a CPU with AVX512 but
    without bf16 instructions, 0.14x-0.18x on one with AVX2 only (benchmarks/README.md, reader_speed and "A CPU
    without bf16").
    """
    try:
        flags = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return bool(re.search(r"\b(?:amx_bf16|avx512_bf16)\b", flags))


_INT8_NAMES = ("int8", "qint8")


def pick_dtype(requested: str, device: str, *, int8: bool = False):
    """The torch dtype for ``requested`` on ``device``. ``auto`` is ``$MLPSYCH_DTYPE`` when set, else half
    precision where the device runs it faster: bf16 on GPUs that support it, else fp16; on a CPU bf16 with native
    bf16 instructions, else fp32. On a CPU with AVX512-BF16 bf16 read windows faster at every model size measured,
    MiniLM-L6 1.5x, base 2.7x-4.2x, large 1.3x-2.4x (benchmarks/README.md, reader_speed: figures per size and
    machine), so there is no rule per size. With a small real reader on the 34 MLPsych development papers it changed
    16 of 88 answer sets and left the scores within noise (benchmarks/README.md, dtype_answers); ``fp32`` reproduces
    answers exactly across machines.

    ``int8`` (``torch.qint8``) is for callers that load through :func:`load_qa_model` (the readers, which pass
    ``int8=True``): fp32 weights whose linear layers are quantized after loading (:func:`quantize_linear_layers`).
    ``$MLPSYCH_DTYPE=int8`` is therefore what ``auto`` means for the readers only; other models keep ``auto``."""
    import torch

    names = {"fp32": torch.float32, "float32": torch.float32, "fp16": torch.float16, "float16": torch.float16,
             "bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "int8": torch.qint8, "qint8": torch.qint8}
    source = ""
    if requested == "auto" and os.environ.get(DTYPE_ENV) and (int8 or os.environ[DTYPE_ENV] not in _INT8_NAMES):
        # int8 from the environment means the readers: the LLM and the embedding model keep auto's choice
        requested, source = os.environ[DTYPE_ENV], f" (from ${DTYPE_ENV})"
    if requested != "auto":
        if requested not in names:
            raise ModelLoadError(f"unknown dtype {requested!r}{source} (use auto, fp32, fp16, bf16 or, for the "
                                 "readers on a CPU, int8)")
        if names[requested] is torch.float16 and device == "cpu":
            raise ModelLoadError(f"fp16{source} is not supported for these models on the CPU; use bf16 or fp32")
        if names[requested] is torch.qint8:
            _check_int8(device, source, int8)
        if names[requested] is torch.bfloat16 and device == "cpu" and not cpu_runs_bf16_natively(CPUINFO):
            _warn_emulated_bf16(source)
        return names[requested]
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device == "mps":
        return torch.float16
    return torch.bfloat16 if cpu_runs_bf16_natively(CPUINFO) else torch.float32


@functools.cache
def _warn_emulated_bf16(source: str) -> None:
    """Say once per process that bf16 asked for on a CPU without bf16 instructions is emulated: the models read
    several times slower than in fp32, which ``auto`` would have picked there."""
    log.warning("bf16%s on a CPU without bf16 instructions: torch emulates it, several times slower than fp32 "
                "(use dtype auto, which reads fp32 on this CPU)", source)


def _check_int8(device: str, source: str, allowed: bool) -> None:
    """Refuse int8 where it cannot run: models other than the readers, devices other than the CPU (torch's
    dynamically quantized Linear has CPU kernels only), a torch without dynamic quantization or a quantized engine."""
    import torch

    if not allowed:
        raise ModelLoadError(f"int8{source} is for the readers only; use auto, fp32, fp16 or bf16 for this model")
    if device != "cpu":
        raise ModelLoadError(f"int8{source} runs on the CPU only (torch's dynamic quantization has no {device} "
                             "kernels); use --device cpu, or bf16 / fp16 on a GPU")
    engines = [name for name in torch.backends.quantized.supported_engines if name != "none"]
    if _quantize_dynamic() is None or not engines:
        raise ModelLoadError(f"int8{source}: this torch ({torch.__version__}) has no dynamic quantization for the "
                             "CPU (torch.ao.quantization.quantize_dynamic and a quantized engine); use fp32 or bf16")


def _quantize_dynamic():
    """torch's dynamic quantization, or None where this torch no longer has it (torch marks it deprecated in
    favour of the separate torchao package, which mlpsych does not depend on)."""
    try:
        from torch.ao.quantization import quantize_dynamic
    except ImportError:
        return None
    return quantize_dynamic


def quantize_linear_layers(module) -> None:
    """Quantize ``module``'s linear layers to int8 in place (weights per tensor, activations per batch at run
    time): in a reader's encoder they carry nearly all its FLOPs (mlpsych.reading.cost). Done after loading
    safetensors, so nothing pickled is read or stored."""
    import warnings

    import torch

    with warnings.catch_warnings():  # torch's notice that this API moves to torchao, on every call
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*", category=UserWarning)
        _quantize_dynamic()(module, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)


def dtype_name(requested: str, device: str = "auto", *, int8: bool = False) -> str:
    """The dtype a model asked to run in ``requested`` on ``device`` gets here ("float32", ...), without loading
    it: for cache keys, where "auto" must not stand for different dtypes on different machines."""
    return str(pick_dtype(requested, pick_device(device), int8=int8)).removeprefix("torch.")


_AUTO_KINDS = {"CausalLM": "text-generation", "QuestionAnswering": "question-answering"}


def load_failure_reason(model_id: str, error: BaseException) -> str:
    """Why loading ``model_id`` failed, in words a researcher can act on, to follow "model 'X' ...": gated,
    missing, offline (with how to bring models here), no safetensors, a missing package, too big."""
    text = str(error)
    name = type(error).__name__
    first_line = text.strip().splitlines()[0] if text.strip() else name
    folder = Path(model_id).expanduser()
    if not folder.exists() and (model_id.startswith((".", "/", "~")) or model_id.count("/") > 1):
        return "is not an existing folder"  # a path is never a Hub repo, whatever the Hub answered for it
    # the HTTP status as the Hub's clients word it: a bare 401 or 403 also occurs in paths ("/tmp/pytest-401/...")
    unauthorized = re.search(r"\b40[13]\b'?:? *(Client Error|Unauthorized|Forbidden)", text, re.IGNORECASE)
    if name == "GatedRepoError" or "gated" in text.lower() or unauthorized:
        return ("is gated on the Hugging Face Hub and no accepted licence / token was found: accept its licence "
                "and log in (`hf auth login` or HF_TOKEN), or name another model")
    if "offload" in text.lower():
        return "does not fit in GPU and CPU memory (it would have to be offloaded to disk)"
    if "custom code" in text or names_own_code(folder):
        return ("holds Python code of its own (auto_map in its config), which mlpsych never runs: a model's code "
                "could do anything on this machine. Name a model of an architecture transformers has itself "
                "(BERT, RoBERTa, DeBERTa-v2, Llama, ...)")
    unfit = re.search(r"Unrecognized configuration class .*?(\w+Config)'?>? for this kind of AutoModel: "
                      r"AutoModelFor(\w+)", text)
    if unfit:  # a folder or repo of another kind of model: a reader given as the LLM, or the reverse
        kind = _AUTO_KINDS.get(unfit.group(2), unfit.group(2))
        return f"is not a {kind} model (its configuration is {unfit.group(1)}, which has no {kind} form)"
    if isinstance(error, ImportError):
        return f"needs a package that is not installed ({first_line})"
    if folder.exists():
        unreadable = _unreadable_files(folder)
        if unreadable:  # safetensors says "No such file or directory" for a weight file it may not open
            return (f"cannot be read by this user: {', '.join(unreadable)} in its folder may be read by its owner "
                    "only (the owner can share it: chmod -R a+rX, or g+rX for a group)")
        return f"cannot be loaded from its folder: {first_line}"
    if name == "RepositoryNotFoundError":
        return "does not exist on the Hugging Face Hub"
    return ("could not be loaded: not in the local Hugging Face cache and not downloadable (no such Hub repo, or "
            f"no internet). Check the id. {OFFLINE_HELP}")


def _unreadable_files(folder: Path) -> list[str]:
    """The files of a model folder this user may not read (a colleague's reader, written for its owner only)."""
    try:
        return sorted(f.name for f in folder.iterdir() if f.is_file() and not os.access(f, os.R_OK))
    except OSError:
        return []


def names_own_code(folder: Path) -> bool:
    """Whether a model folder's config or tokenizer config names Python code of its own (``auto_map``): the reason
    it cannot be loaded, since that code is never run (transformers' own words ask to allow it)."""
    for name in ("config.json", "tokenizer_config.json"):
        try:
            if "auto_map" in json.loads((folder / name).read_text(encoding="utf-8")):
                return True
        except (OSError, ValueError, TypeError):
            continue
    return False


def explain_load_error(model_id: str, error: BaseException) -> str:
    """The one-line message of a model that cannot be loaded (readers, LLM and embedding models alike)."""
    return f"model {model_id!r} {load_failure_reason(model_id, error)}"


def load_tokenizer(model_id: str):
    """A model's fast tokenizer (answers need character offsets): enough to window a paper and retrieve."""
    from transformers import AutoTokenizer

    offline_unless_reachable(model_id)
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_id, **NO_REMOTE_CODE)
    except (OSError, ValueError) as error:
        raise ModelLoadError(explain_load_error(model_id, error)) from error
    if not getattr(tokenizer, "is_fast", False):
        raise ModelLoadError(f"model {model_id!r} has no fast tokenizer; answers need character offsets")
    _space_marker_alone(tokenizer)
    return tokenizer


def _steps(sequence) -> list:
    """The steps of a tokenizers ``Sequence`` (normalizers or pre-tokenizers), which can be indexed, not iterated."""
    steps = []
    while True:
        try:
            steps.append(sequence[len(steps)])
        except IndexError:
            return steps


def _space_marker_alone(tokenizer) -> None:
    """A SentencePiece tokenizer that transformers 5 built from its model file (``spiece.model``, no
    ``tokenizer.json``: ALBERT's) made as transformers 4.57 made it: runs of spaces collapsed by the normalizer, then
    split by the space marker alone. transformers 5 instead splits on white space first, which gives the same pieces
    but moves a word's first piece off the space before it (and puts a bare "▁" piece on the next character);
    transformers 4's question-answering pipeline, which the reference reproduces, and DeBERTa-v2's tokenizer in both
    versions start that piece at the space, so the answers keep the leading space."""
    from tokenizers import Regex, normalizers, pre_tokenizers

    backend = getattr(tokenizer, "backend_tokenizer", None)
    steps = getattr(backend, "pre_tokenizer", None)
    if not isinstance(steps, pre_tokenizers.Sequence):
        return
    parts = _steps(steps)
    if len(parts) != 2 or not isinstance(parts[0], pre_tokenizers.WhitespaceSplit) \
            or not isinstance(parts[1], pre_tokenizers.Metaspace):
        return
    before = backend.normalizer
    kept = _steps(before) if isinstance(before, normalizers.Sequence) else [before] if before is not None else []
    backend.normalizer = normalizers.Sequence([*kept, normalizers.Replace(Regex(" {2,}"), " ")])
    backend.pre_tokenizer = parts[1]


def load_qa_model(model_id: str, device: str, dtype, *, trained_head: bool = True):
    """An extractive QA model from a Hub id or a local folder, on ``device`` in ``dtype``, in eval mode
    (``torch.qint8``: loaded in fp32, then its linear layers quantized).

    ``trained_head``: refuse a model whose answer-span head is not in its weights (a base encoder such as
    ``bert-base-uncased``, or a causal LM): transformers would give it a random head that reads every paper and
    writes meaningless answers with only a log line. Training (``train-reader``, ``adapt``) starts from such models.
    """
    import torch
    from transformers import AutoModelForQuestionAnswering

    offline_unless_reachable(model_id)
    int8 = dtype is torch.qint8
    try:
        model, info = AutoModelForQuestionAnswering.from_pretrained(
            model_id, dtype=torch.float32 if int8 else dtype, output_loading_info=True, **safetensors_kwargs(model_id),
            **NO_REMOTE_CODE)
    except (OSError, ValueError) as error:
        raise ModelLoadError(explain_load_error(model_id, error)) from error
    untrained = untrained_head(model, info.get("missing_keys", ()))
    if trained_head and untrained:
        raise ModelLoadError(
            f"model {model_id!r} is not an extractive question-answering model: its weights have no answer-span head "
            f"({', '.join(untrained)}), so its answers would be random. Name a reader fine-tuned on SQuAD 2.0 "
            "(e.g. deepset/deberta-v3-large-squad2), or make one with `mlpsych dev train-reader`")
    try:
        model.to(device)
    except RuntimeError as error:
        if not is_out_of_memory(error):
            raise
        raise ModelLoadError(f"model {model_id!r} does not fit in the memory left on {device} "
                             f"({type(error).__name__}): other programs may hold it (nvidia-smi lists them); close "
                             "them, or read with --device cpu") from None
    model.eval()
    if int8:  # the encoder only: the span head (hidden size x 2) costs nothing and sets every score, so stays fp32
        quantize_linear_layers(model.base_model)
    log.info("loaded %s on %s (%s)", model_id, device, str(dtype).replace("torch.", ""))
    return model


def untrained_head(model, missing_keys) -> list[str]:
    """The weights outside the encoder that the checkpoint did not hold (the span head transformers made up)."""
    encoder = f"{model.base_model_prefix}."
    return sorted(k for k in missing_keys if not k.startswith(encoder))


def safetensors_kwargs(model_id: str) -> dict:
    """Prefer safetensors; fall back to a PyTorch checkpoint only for Hub repos that ship nothing else.

    A local folder must hold ``*.safetensors``: the fallback would unpickle a file, which we do not do for
    folders of unknown origin. Hub repos without safetensors get transformers' own safe loading path.
    """
    local = Path(model_id).expanduser()
    if local.is_dir():
        if not any(local.glob("*.safetensors")):
            raise ModelLoadError(
                f"model folder {model_id!r} has no .safetensors weights (pickled checkpoints are not loaded); "
                "convert it with `model.save_pretrained(folder)` in a trusted environment"
            )
        return {"use_safetensors": True}
    return {}


def free_memory(released: weakref.ref | None = None) -> None:
    """Collect released models (and empty the CUDA cache), so encoders and the LLM are not resident together.

    Call it after dropping the last reference to a model. ``released``, a weak reference to that model: when
    reference counting has already freed it, the full collection is skipped (0.3 s a call with a run's records in
    memory, a tenth of a GPU run of the fast preset).
    """
    if released is None or released() is not None:
        gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:  # pragma: no cover - torch is a dependency
        pass


def is_out_of_memory(error: BaseException) -> bool:
    """CUDA ran out of memory: torch's OutOfMemoryError from its allocator, or a plain "CUDA error: out of memory"
    (an AcceleratorError) where CUDA's own context or a library's workspace did not fit, as when other processes
    held the GPU on the device machine."""
    import torch

    return isinstance(error, torch.cuda.OutOfMemoryError) or (
        isinstance(error, RuntimeError) and "out of memory" in str(error).lower())


def halving_on_oom(attempt: Callable[[int], T], size: int, what: str,
                   before_retry: Callable[[], None] | None = None) -> tuple[T, int]:
    """``attempt(size)``; on CUDA out-of-memory (either kind, :func:`is_out_of_memory`), ``size`` is halved and the
    attempt made again, until one item does not fit either (then the error is the caller's). The one policy for a
    GPU too small for the batch asked for: the Reader's windows a forward, training's features a pass. Returns the
    result and the size that fitted.

    ``before_retry`` undoes a failed attempt's partial work (e.g. half-accumulated gradients). The cache is emptied
    after the ``except`` block, once the error's traceback no longer holds the failed attempt's tensors: what it
    frees is also what CUDA's own allocations (a library's workspace) failed for.
    """
    import torch

    while True:
        try:
            return attempt(size), size
        except RuntimeError as error:
            if size <= 1 or not is_out_of_memory(error):
                raise
        if before_retry is not None:
            before_retry()
        torch.cuda.empty_cache()
        size = max(1, size // 2)
        log.warning("CUDA out of memory; %s halved to %d and retried", what, size)
