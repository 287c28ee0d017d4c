"""The normalizer behind the result cache: the LLM is loaded only when some prompt's output is not cached."""

from __future__ import annotations

from mlpsych.cache import NORMALIZE_STAGE, ResultCache, library_versions, make_key, model_fingerprint
from mlpsych.settings import LLMSettings


class CachedNormalizer:
    """A :class:`~mlpsych.normalize.llm.ListNormalizer`: the LLM behind the result cache. Outputs are cached per
    prompt and everything else that shapes them: the model and its revision (its chat template included), the
    dtype it runs in here, quantization and max_new_tokens (generation is greedy; batch size changes nothing
    beyond float noise)."""

    def __init__(self, model: str, settings: LLMSettings, cache: ResultCache) -> None:
        from mlpsych.normalize.llm import Normalizer

        self.model = model
        self.settings = settings
        self.cache = cache
        # Loaded only when some prompt's output is not cached; made now because the cache key needs its dtype.
        self._normalizer = Normalizer(model, device=settings.device, dtype=settings.dtype,
                                      quantization=settings.quantization, max_new_tokens=settings.max_new_tokens,
                                      batch_size=settings.batch_size, max_input_items=settings.max_input_items)
        self._unavailable: Exception | None = None
        self.generated = 0  # prompts actually sent to the model

    def _key(self, prompt: str) -> str:
        _, dtype = self._normalizer.resolve_device_and_dtype()
        return make_key(stage=NORMALIZE_STAGE, model=model_fingerprint(self.model), prompt=prompt,
                        dtype=str(dtype).removeprefix("torch."), max_new_tokens=self.settings.max_new_tokens,
                        quantization=self.settings.quantization, libraries=library_versions())

    def _loaded(self):
        if self._unavailable is not None:
            raise self._unavailable
        try:
            self._normalizer.warm_up()  # once: a loaded model returns at once
        except Exception as error:
            self._unavailable = error
            raise
        return self._normalizer

    def run(self, prompts: list[str], *, progress: bool = True):
        from mlpsych.normalize.listparse import parse_list
        from mlpsych.normalize.llm import NormalizeResult

        results: list = [None] * len(prompts)
        missing = []
        for i, prompt in enumerate(prompts):
            cached = self.cache.get(self._key(prompt))
            if cached is None:
                missing.append(i)
            else:  # parsed again, so a better parser improves cached outputs too
                results[i] = NormalizeResult(parse_list(cached["raw_output"]), cached["raw_output"])
        if missing:
            fresh = self._loaded().run([prompts[i] for i in missing], progress=progress)
            self.generated += len(missing)
            for i, out in zip(missing, fresh):
                results[i] = out
                if out.error is None:
                    self.cache.put(self._key(prompts[i]), {"raw_output": out.raw_output}, stage=NORMALIZE_STAGE)
        return results

    def release(self) -> None:
        if self._normalizer.loaded:
            self._normalizer.release()
