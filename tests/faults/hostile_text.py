"""A hostile-text corpus, generated in code: a paper carrying every kind of troublesome character, written in every
format ingest reads, with a 1 MB line without spaces and a paper made only of symbols.

Each format carries the troubles the way real files do: a .txt as CESU-8 bytes (surrogates encoded one by one, as
Java writes them), a .jsonl and a text.json with ``\\ud835`` escapes (``json.loads`` makes lone surrogates of them),
HTML for Tika, and a PDF whose ToUnicode map claims controls, surrogates and non-characters.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from mlpsych.dev.synth import math_italic_paper, render_pdf, text_layer_pdf

BODY = ("Nurses (N = 312) wrote short essays about their work. We trained random forests in R with the caret "
        "package to predict burnout, and compared them with logistic regression fitted in scikit-learn.")

# kind of trouble -> the characters (what a broken text layer, a Java export or a hand edit leaves)
TROUBLES: dict[str, str] = {
    "surrogate pair, as pdfium returns math italic K": "\ud835\udc3e = 500",
    "lone high surrogate": "x\ud835y",
    "lone low surrogate": "x\udc3ey",
    "astral math letters": "\U0001d43e \U0001d706 \U0001d441 \U0001d7d3",
    "NUL": "a\x00b",
    "C0 controls": "\x01\x07\x1b[0m\x08",
    "C1 controls": "\x85\x9b\x80",
    "DEL": "\x7f",
    "line separators": "one\rtwo\x0bthree\x0cfour",
    "BOM": "\ufeffword",
    "RTL and bidi marks": "\u200f\u202eevil\u202c\u2067x\u2069",
    "zero-width": "ze\u200bro\u200cwi\u200ddth\u2060",
    "combining sequences": "e\u0301 a\u0308 n\u0303 Z\u0336\u0335\u0334\u0489",
    "private use": "\ue000\uf8ff\U000f0000",
    "replacement character": "\ufffd",
    "non-characters": "\ufffe\uffff\ufdd0\U0001fffe",
    "emoji, a real astral character": "\U0001f600",
}

# characters ingest must never let through: surrogates, non-characters, controls but newline and tab
FORBIDDEN = re.compile("[\ud800-\udfff\ufdd0-\ufdef\x00-\x08\x0b-\x1f\x7f-\x9f"
                       + "".join(chr(plane + 0xFFFE) + chr(plane + 0xFFFF) for plane in range(0, 0x110000, 0x10000))
                       + "]")
SYMBOLS = "∑ ∫ ≈ ≠ ± × ÷ → ← ∞ ∂ ∇ √ ∝ ∈ ∉ ⊂ ⊃ ∩ ∪ ⟨ ⟩ ‖ † ‡ § ¶ © ® ° ‰ ′ ″ ※ ★ ☆ ♠ ♣ ♥ ♦ ■ □ ▲ △ ● ○ ◆ ◇"


def hostile_paragraphs() -> list[str]:
    """One paragraph per kind of trouble, named (so no two look like a running header), with the characters inside
    the body sentence."""
    first, second = BODY.split(". ", 1)
    return [f"Case {name}. {first} {chars}. {second}" for name, chars in TROUBLES.items()]


def hostile_text() -> str:
    """The paragraphs as one text, a blank line between them."""
    return "\n\n".join(hostile_paragraphs())


def long_line_text(size: int = 2**20) -> str:
    """A 1 MB line without spaces (an unwrapped table or a base64 blob in an export), troubles sprinkled in."""
    unit = "burnout\ud835\udc3eforests\x00caret" + "e\u0301"
    return BODY + "\n" + (unit * (size // len(unit) + 1))[:size] + "\n" + BODY


def symbols_text() -> str:
    """A paper made only of symbols: no letter, no digit."""
    return "\n\n".join([SYMBOLS] * 20)


def jsonl_record() -> dict:
    """The paper as a line of ``mlpsych ingest`` output, edited by hand: two pages, page 2 from paragraph 3."""
    paragraphs = json.loads(json.dumps(hostile_paragraphs()))  # as read back: JSON joins the surrogate pairs
    text = "\n\n".join(paragraphs)
    half = len("\n\n".join(paragraphs[:2])) + 2
    return {"id": "hostile-jsonl\ud835", "text": text, "pages": [[0, half], [half, len(text)]],
            "source_path": "export\udce9.pdf", "meta": {"note\x00": "hand-edited \ud835"}, "status": "ok"}


def write_corpus(folder: Path, *, html_file: bool = True, pdfs: bool = True) -> dict[str, Path]:
    """Write the corpus into ``folder``; file name -> path. The HTML needs Tika to be read, the PDFs need the DejaVu
    fonts to be written. Paper ids: ``hostile-txt``, ``hostile-html``, ``hostile-pdf``, ``hostile-jsonl\ufffd``,
    ``hostile-textjson``, ``symbols-textjson``, ``long-line``, ``symbols``, ``math-italic``."""
    folder.mkdir(parents=True, exist_ok=True)
    text = hostile_text()
    names = ["hostile-txt.txt", "hostile.jsonl", "text.json", "long-line.txt", "symbols.txt"]
    names += ["hostile-html.html"] if html_file else []
    names += ["hostile-pdf.pdf", "math-italic.pdf"] if pdfs else []
    files = {name: folder / name for name in names}
    # CESU-8 after a BOM; a form feed ends page 1 (and the line-separator case makes a third page)
    cesu8 = b"\xef\xbb\xbf" + text.replace("\n\n", "\f", 1).encode("utf-8", "surrogatepass")
    files["hostile-txt.txt"].write_bytes(cesu8)
    files["hostile.jsonl"].write_text(json.dumps(jsonl_record()) + "\n", encoding="ascii")  # escaped surrogates
    texts = {"hostile-textjson": text, "symbols-textjson": symbols_text()}
    files["text.json"].write_text(json.dumps(json.dumps(texts)), encoding="ascii")  # the MLPsych double encoding
    files["long-line.txt"].write_bytes(long_line_text().encode("utf-8", "surrogatepass"))
    files["symbols.txt"].write_text(symbols_text(), encoding="utf-8")
    if html_file:
        body = "".join(f"<p>{html.escape(p)}</p>" for p in hostile_paragraphs())
        page = f"<html><head><meta charset='utf-8'><title>Hostile</title></head><body>{body}</body></html>"
        files["hostile-html.html"].write_bytes(page.encode("utf-8", "surrogatepass"))
    if pdfs:
        text_layer_pdf(files["hostile-pdf.pdf"], hostile_paragraphs())
        render_pdf(math_italic_paper(), files["math-italic.pdf"])
    return files
