"""mlpsych: zero-shot, multi-stage extraction of coded answers from long scientific papers."""

__version__ = "0.1.0"
