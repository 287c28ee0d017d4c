"""Run settings with named presets: one typed object the CLI, the app and notebooks fill in the same way."""

from __future__ import annotations

from dataclasses import asdict
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mlpsych.reader import ReaderSettings


class LLMSettings(BaseModel):
    """The normalization model: the template's model unless ``model`` overrides it."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    model: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    quantization: Literal["8bit", "4bit"] | None = None
    max_new_tokens: int = Field(default=256, ge=8, le=4096)
    batch_size: int = Field(default=4, ge=1)
    max_input_items: int = Field(default=60, ge=1)  # extractive answers shown to the LLM per prompt


class RunSettings(BaseModel):
    """Everything that shapes a run besides the papers and the questions."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    reader: ReaderSettings = Field(default_factory=ReaderSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    max_sub_questions: int | None = Field(default=None, ge=1)

    def describe(self) -> dict:
        """Flat settings for the run sheet."""
        out = {f"reader.{k}": v for k, v in asdict(self.reader).items()}
        out.update({f"llm.{k}": v for k, v in self.llm.model_dump().items()})
        out["max_sub_questions"] = self.max_sub_questions
        return out
