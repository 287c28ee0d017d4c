"""The LLM runner of normalization: an instruction-tuned causal LM loaded once, run on batches of prompts with
greedy decoding, each output parsed into a list (``listparse``), then released.

The default LLM (Meta-Llama-3-8B-Instruct) is gated on the Hub and needs ~16 GB in half precision. When it
cannot be loaded, :class:`NormalizerUnavailable` says why and how to enable it; the pipeline then keeps the
extractive answers and the run completes.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mlpsych.errors import NormalizerUnavailable
from mlpsych.normalize.listparse import parse_list

log = logging.getLogger(__name__)

DEFAULT_LLM = "meta-llama/Meta-Llama-3-8B-Instruct"
QUANTIZATIONS = ("4bit", "8bit")
# Approximate bytes per parameter once loaded, used to refuse a model that cannot fit before loading it.
_BYTES_PER_PARAM = {"4bit": 0.6, "8bit": 1.1}
HOW_TO_ENABLE = (
    "To enable it: accept the model's licence on huggingface.co and log in (`hf auth login` or HF_TOKEN); "
    "or name a non-gated instruct model or a local folder with --llm MODEL; on a small GPU add "
    "--llm-quantization 4bit; on a CPU pick a small instruct model (e.g. --llm Qwen/Qwen2.5-0.5B-Instruct)."
)


@dataclass
class NormalizeResult:
    """What the LLM returned for one prompt: the parsed items, the raw text (kept for audit), any error."""

    items: list[str]
    raw_output: str
    error: str | None = None


class ListNormalizer(Protocol):
    """What the pipeline asks of a normalizer: the LLM itself (:class:`Normalizer`) or the LLM behind the result
    cache (:class:`~mlpsych.normalize.cache.CachedNormalizer`)."""

    generated: int  # prompts actually sent to a model

    def run(self, prompts: list[str], *, progress: bool = True) -> list[NormalizeResult]: ...

    def release(self) -> None: ...


class Normalizer:
    """A causal LM loaded once, run on batches of prompts with greedy decoding, then released."""

    def __init__(
        self,
        model: str = DEFAULT_LLM,
        *,
        device: str = "auto",
        dtype: str = "auto",
        quantization: str | None = None,
        max_new_tokens: int = 256,
        batch_size: int = 4,
        max_input_items: int = 60,
    ) -> None:
        if quantization not in (None, *QUANTIZATIONS):
            raise ValueError(f"unknown quantization {quantization!r} (use {' or '.join(QUANTIZATIONS)})")
        if max_new_tokens < 1 or batch_size < 1 or max_input_items < 1:
            raise ValueError("max_new_tokens, batch_size and max_input_items must be at least 1")
        self.model_name = model
        self.device = device
        self.dtype = dtype
        self.quantization = quantization
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.max_input_items = max_input_items
        self._model: Any = None
        self._tokenizer: Any = None
        self._device: str | None = None

    @property
    def loaded(self) -> bool:
        return self._model is not None

    # -- loading -------------------------------------------------------------------------------------------

    def warm_up(self) -> None:
        """Load tokenizer and model once; NormalizerUnavailable (with the how-to) when that cannot work here."""
        if self._model is not None:
            return
        from mlpsych.models import is_out_of_memory, load_failure_reason, untrained_head

        device, torch_dtype = self.resolve_device_and_dtype()
        kwargs: dict[str, Any] = {"dtype": torch_dtype}
        kwargs.update(self._weights_kwargs())
        if self.quantization:
            kwargs["quantization_config"] = self._quantization_config(torch_dtype)
        if device.startswith("cuda"):
            kwargs["device_map"] = "auto" if device == "cuda" else {"": device}
        try:
            tokenizer = self._load_tokenizer()
            self._check_fits(device, torch_dtype)
            from transformers import AutoModelForCausalLM

            model, info = AutoModelForCausalLM.from_pretrained(self.model_name, output_loading_info=True, **kwargs)
        except NormalizerUnavailable:
            raise
        except (OSError, ValueError, ImportError) as error:
            raise self._unavailable(load_failure_reason(self.model_name, error)) from None
        except Exception as error:  # out of GPU memory; huggingface_hub errors that are not OSErrors in this version
            if is_out_of_memory(error):
                raise self._unavailable(f"does not fit in GPU memory ({type(error).__name__})") from None
            if type(error).__module__.startswith("huggingface_hub"):
                raise self._unavailable(load_failure_reason(self.model_name, error)) from None
            raise
        untrained = untrained_head(model, info.get("missing_keys", ()))
        if untrained:  # an encoder (a reader folder) that transformers fits with a made-up language-model head
            raise self._unavailable(
                f"is not a text-generation model: its weights have no language-model head ({', '.join(untrained[:3])}"
                f"{', ...' if len(untrained) > 3 else ''}), so it would write noise (a reader folder is given to "
                "the question file's models, not to --llm)")
        if "device_map" not in kwargs:
            model.to(device)
        model.eval()
        self._model, self._tokenizer, self._device = model, tokenizer, device
        log.info("LLM %s loaded on %s (%s%s)", self.model_name, device, str(torch_dtype).replace("torch.", ""),
                 f", {self.quantization}" if self.quantization else "")

    def _unavailable(self, reason: str) -> NormalizerUnavailable:
        return NormalizerUnavailable(f"LLM normalization is off: model {self.model_name!r} {reason}. {HOW_TO_ENABLE}")

    def resolve_device_and_dtype(self) -> tuple[str, Any]:
        """Where and in which dtype the model would run here, without loading it (the cache key needs the dtype);
        NormalizerUnavailable when it cannot run as asked."""
        from mlpsych.models import ModelLoadError, pick_device, pick_dtype

        try:
            device = pick_device(self.device)
            torch_dtype = pick_dtype(self.dtype, device)
        except ModelLoadError as error:
            raise self._unavailable(f"cannot run as asked: {error}") from None
        if self.quantization and not device.startswith("cuda"):
            raise self._unavailable(f"cannot be loaded in {self.quantization}: 4-bit/8-bit loading needs a CUDA GPU")
        return device, torch_dtype

    def _weights_kwargs(self) -> dict[str, Any]:
        """The loading policy's safe-weights arguments (a folder without safetensors is refused) and its refusal to
        run a model's own code."""
        from mlpsych.models import NO_REMOTE_CODE, ModelLoadError, safetensors_kwargs

        try:
            return {**safetensors_kwargs(self.model_name), **NO_REMOTE_CODE}
        except ModelLoadError as error:
            raise NormalizerUnavailable(f"LLM normalization is off: {error}. {HOW_TO_ENABLE}") from None

    def _quantization_config(self, torch_dtype: Any) -> Any:
        import importlib.util

        if importlib.util.find_spec("bitsandbytes") is None:
            raise self._unavailable(
                f"needs bitsandbytes for {self.quantization} loading (pip install 'mlpsych[llm]')")
        from transformers import BitsAndBytesConfig

        if self.quantization == "4bit":
            return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch_dtype)
        return BitsAndBytesConfig(load_in_8bit=True)

    def _load_tokenizer(self) -> Any:
        from transformers import AutoTokenizer

        from mlpsych.hub import offline_unless_reachable
        from mlpsych.models import NO_REMOTE_CODE

        offline_unless_reachable(self.model_name)
        tokenizer = AutoTokenizer.from_pretrained(self.model_name, **NO_REMOTE_CODE)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"  # generation continues from the right edge of every row
        if not getattr(tokenizer, "chat_template", None):
            log.warning("%s has no chat template: prompts are sent as plain text", self.model_name)
        return tokenizer

    def _check_fits(self, device: str, torch_dtype: Any) -> None:
        """Refuse before loading when the weights cannot fit in GPU + CPU memory (device_map may offload)."""
        needed = self._estimated_bytes(torch_dtype)
        if needed is None:
            return
        available = _available_ram()
        if device.startswith("cuda"):
            import torch

            available += sum(torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count()))
        if available and needed > available:
            gib = 2**30
            raise self._unavailable(
                f"needs about {needed / gib:.1f} GiB in {str(torch_dtype).replace('torch.', '')}"
                f"{' ' + self.quantization if self.quantization else ''} but only {available / gib:.1f} GiB "
                f"of {'GPU and CPU ' if device.startswith('cuda') else 'CPU '}memory is free")

    def _estimated_bytes(self, torch_dtype: Any) -> float | None:
        """Parameter count from the config on the meta device (nothing is allocated), times bytes per parameter."""
        try:
            import torch
            from transformers import AutoConfig, AutoModelForCausalLM

            from mlpsych.models import NO_REMOTE_CODE

            config = AutoConfig.from_pretrained(self.model_name, **NO_REMOTE_CODE)
            with torch.device("meta"):
                skeleton = AutoModelForCausalLM.from_config(config)
            params = sum(p.numel() for p in skeleton.parameters())
        except (OSError, ValueError, ImportError, KeyError, TypeError, RuntimeError) as error:
            log.debug("size estimate skipped for %s: %s", self.model_name, error)
            return None
        per_param = _BYTES_PER_PARAM.get(self.quantization or "", None) or _itemsize(torch_dtype)
        return params * per_param * 1.1

    # -- generation ----------------------------------------------------------------------------------------

    def run(self, prompts: list[str], *, progress: bool = True) -> list[NormalizeResult]:
        """One result per prompt, in order: batched greedy generation, parsed; bad output never raises. ``progress``
        shows a bar over the batches (an LLM on a CPU takes a while), unless the caller shows its own progress."""
        if not prompts:
            return []
        self.warm_up()
        from tqdm.auto import tqdm

        texts = [self._chat_text(p) for p in prompts]
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # similar lengths share a batch
        results: list[NormalizeResult | None] = [None] * len(texts)
        batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        for batch in tqdm(batches, desc=f"LLM {Path(self.model_name).name}", unit="batch",
                          disable=not progress or len(batches) < 2, leave=False):
            for index, raw, error in zip(batch, *self._generate_safely([texts[i] for i in batch])):
                results[index] = NormalizeResult(items=parse_list(raw), raw_output=raw, error=error)
        return [r if r is not None else NormalizeResult([], "", "not generated") for r in results]

    def _chat_text(self, prompt: str) -> str:
        tokenizer = self._tokenizer
        if getattr(tokenizer, "chat_template", None):
            return tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
        return prompt

    def _generate_safely(self, texts: list[str]) -> tuple[list[str], list[str | None]]:
        """Generate a batch; on running out of GPU memory (either kind, :func:`mlpsych.models.is_out_of_memory`),
        retry one prompt at a time, then give up per prompt."""
        from mlpsych.models import is_out_of_memory

        try:
            return self._generate(texts), [None] * len(texts)
        except RuntimeError as error:
            if not is_out_of_memory(error):
                raise
            _empty_cuda_cache()
            if len(texts) == 1:
                return [""], ["out of GPU memory while generating"]
            log.warning("out of GPU memory with a batch of %d prompts: retrying one by one", len(texts))
        outputs: list[str] = []
        errors: list[str | None] = []
        for text in texts:
            out, err = self._generate_safely([text])
            outputs += out
            errors += err
        return outputs, errors

    def _generate(self, texts: list[str]) -> list[str]:
        import torch

        tokenizer, model = self._tokenizer, self._model
        # The chat template already wrote the BOS token; plain prompts get the tokenizer's own specials.
        has_template = bool(getattr(tokenizer, "chat_template", None))
        encoded = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=not has_template)
        encoded = encoded.to(model.device)
        width = encoded["input_ids"].shape[1]
        limit = getattr(model.config, "max_position_embeddings", None)
        if limit and width + self.max_new_tokens > limit:
            log.warning("prompt of %d tokens + %d new tokens exceeds %s's context of %d",
                        width, self.max_new_tokens, self.model_name, limit)
        with torch.inference_mode():
            output = model.generate(**encoded, **self._greedy_kwargs())
        return tokenizer.batch_decode(output[:, width:], skip_special_tokens=True)

    def _greedy_kwargs(self) -> dict[str, Any]:
        """Greedy and bounded: the checkpoint's sampling defaults (temperature, top-p) are switched off."""
        return {"do_sample": False, "num_beams": 1, "temperature": None, "top_p": None, "top_k": None,
                "max_new_tokens": self.max_new_tokens, "pad_token_id": self._tokenizer.pad_token_id}

    def release(self) -> None:
        """Drop the model and tokenizer and empty the CUDA cache, so the next stage's models fit."""
        import weakref

        from mlpsych.models import free_memory

        released = weakref.ref(self._model) if self._model is not None else None
        self._model = None
        self._tokenizer = None
        self._device = None
        free_memory(released)


def _itemsize(torch_dtype: Any) -> float:
    import torch

    return float(torch.empty((), dtype=torch_dtype).element_size())


def _available_ram() -> int:
    """Bytes of memory the process could still allocate (MemAvailable on Linux), 0 when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def _empty_cuda_cache() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
