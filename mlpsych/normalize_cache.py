"""The normalizer behind the result cache: the LLM is loaded only when some prompt's output is not cached."""

from __future__ import annotations

from mlpsych.cache import ResultCache, make_key, model_fingerprint
from mlpsych.settings import LLMSettings


class CachedNormalizer:
    """Same ``run``/``release`` interface as ``Normalizer``; outputs cached per (model, prompt, generation settings)."""

    def __init__(self, model: str, settings: LLMSettings, cache: ResultCache) -> None:
        self.model = model
        self.model_name = model
        self.max_input_items = settings.max_input_items
        self.settings = settings
        self.cache = cache
        self._normalizer = None
        self._unavailable: Exception | None = None
        self.generated = 0  # prompts actually sent to the model

    def _key(self, prompt: str) -> str:
        return make_key(stage="normalize", model=model_fingerprint(self.model), prompt=prompt,
                        max_new_tokens=self.settings.max_new_tokens, quantization=self.settings.quantization)

    def _loaded(self):
        from mlpsych.normalize import Normalizer

        if self._unavailable is not None:
            raise self._unavailable
        if self._normalizer is None:
            normalizer = Normalizer(self.model, device=self.settings.device, dtype=self.settings.dtype,
                                    quantization=self.settings.quantization,
                                    max_new_tokens=self.settings.max_new_tokens, batch_size=self.settings.batch_size,
                                    max_input_items=self.settings.max_input_items)
            try:
                normalizer.warm_up()
            except Exception as error:
                self._unavailable = error
                raise
            self._normalizer = normalizer
        return self._normalizer

    def run(self, prompts: list[str]):
        from mlpsych.listparse import parse_list
        from mlpsych.normalize import NormalizeResult

        results: list = [None] * len(prompts)
        missing = []
        for i, prompt in enumerate(prompts):
            cached = self.cache.get(self._key(prompt))
            if cached is None:
                missing.append(i)
            else:  # parsed again, so a better parser improves cached outputs too
                results[i] = NormalizeResult(parse_list(cached["raw_output"]), cached["raw_output"])
        if missing:
            fresh = self._loaded().run([prompts[i] for i in missing])
            self.generated += len(missing)
            for i, out in zip(missing, fresh):
                results[i] = out
                if out.error is None:
                    self.cache.put(self._key(prompts[i]), {"raw_output": out.raw_output}, stage="normalize")
        return results

    def release(self) -> None:
        if self._normalizer is not None:
            self._normalizer.release()
            self._normalizer = None
