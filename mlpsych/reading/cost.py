"""What reading costs in floating-point operations: 2 x (parameters applied per token) x tokens read.

Windows are no common currency between readers of different sizes: a MiniLM window costs a fourteenth of a
DeBERTa-v3-large window. A cascade that lets a small reader read everything must be charged for it, so reading
is counted in FLOPs: the transformer layers' weights applied to each input token (attention projections and
feed-forward: ``layers x (4 h^2 + 2 h i)``), twice for multiply and add. Embedding lookups are not
multiplications and the attention scores' own term (a few percent at 384 to 512 tokens) is left out. ALBERT
shares one layer's weights across its layers, so it is charged per layer applied, not per weight stored: its
xxlarge model applies 2.4 billion weights per token from 223 million stored.

The architectures of the readers mlpsych names by Hub id are written here (their config.json values), so a cost
can be told without downloading a model; any other model's is read from its config.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Architecture:
    """The sizes that set a transformer encoder's cost per token."""

    layers: int
    hidden: int
    intermediate: int

    @property
    def applied_parameters(self) -> int:
        """Weights multiplied with each token: four attention projections and the two feed-forward matrices."""
        return self.layers * (4 * self.hidden * self.hidden + 2 * self.hidden * self.intermediate)


LARGE = Architecture(24, 1024, 4096)
BASE = Architecture(12, 768, 3072)
KNOWN: dict[str, Architecture] = {
    "deepset/deberta-v3-large-squad2": LARGE,
    "deepset/roberta-large-squad2": LARGE,
    "ahotrod/electra_large_discriminator_squad2_512": LARGE,
    "ahotrod/albert_xxlargev1_squad2_512": Architecture(12, 4096, 16384),
    "deepset/deberta-v3-base-squad2": BASE,
    "deepset/roberta-base-squad2": BASE,
    "deepset/electra-base-squad2": BASE,
    "deepset/minilm-uncased-squad2": Architecture(12, 384, 1536),
    "deepset/tinyroberta-squad2": Architecture(6, 768, 3072),
}


@lru_cache(maxsize=None)
def architecture(model: str) -> Architecture:
    """The model's architecture: from the table above, else from its config (a folder or the Hub cache)."""
    if model in KNOWN:
        return KNOWN[model]
    from transformers import AutoConfig

    from mlpsych.models import NO_REMOTE_CODE

    config = AutoConfig.from_pretrained(model, **NO_REMOTE_CODE)
    return Architecture(int(config.num_hidden_layers), int(config.hidden_size), int(config.intermediate_size))


def flops(model: str, tokens: int) -> float:
    """FLOPs of reading ``tokens`` input tokens (questions, special tokens and padding-free contexts) with ``model``."""
    return 2.0 * architecture(model).applied_parameters * tokens
