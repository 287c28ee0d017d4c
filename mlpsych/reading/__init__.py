"""Reading: windows over a paper (``windows``), the extractive reader (``reader``), span decoding (``decode``), and
merging of spans into answers, within one model and across a question's models (``merge``)."""

from mlpsych.reading.reader import Query, Reader

__all__ = ["Query", "Reader"]
