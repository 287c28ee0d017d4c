"""Render a paper's text into a journal-like PDF: the test bed for ingestion (tests and ``benchmarks/pdf_fidelity.py``).

Real journal PDFs cannot ship with the project, and a fidelity score needs the true text. So we typeset known text
the way journals do - two justified, hyphenated columns, a running header with the journal name, page numbers,
footnotes, figure captions, in-text citations and a references section - and measure what comes back.
Needs reportlab (dev extra); pyphen, when installed, adds real hyphenation at line ends.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

_SURNAMES = (
    "Smith Johnson Lee Brown Garcia Miller Davis Martinez Wilson Anderson Thomas Taylor Moore Jackson Martin "
    "Thompson White Harris Clark Lewis Walker Young Allen King Wright Scott Green Baker Adams Nelson"
).split()
_DEJAVU = Path("/usr/share/fonts/truetype/dejavu")
MATH_FONT = _DEJAVU / "DejaVuMathTeXGyre.ttf"  # the DejaVu font with the Mathematical Alphanumeric Symbols
_MATH_RUN = re.compile("[\U0001d400-\U0001d7ff]+")


@dataclass
class SynthPaper:
    """What to typeset: body paragraphs (plain text), optional headings before some of them, notes and references."""

    title: str
    paragraphs: list[str]
    journal: str = "Journal of Synthetic Behavioral Science"
    short_title: str = "Synthetic Paper"
    footnotes: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    captions: dict[int, str] = field(default_factory=dict)  # paragraph index -> caption placed after it
    headings: dict[int, str] = field(default_factory=dict)  # paragraph index -> heading placed before it
    margin_notes: list[str] = field(default_factory=list)  # printed up the left margin of every page (a notice)
    foot_stamp: str = ""  # printed at the foot of every page, under the page number (a repository stamp)


@dataclass
class RenderInfo:
    n_pages: int
    boilerplate: list[str]  # lines that must not survive cleaning: header, footer, footnotes, captions, references


def fake_reference(rng: random.Random, n: int) -> str:
    """A plausible APA reference entry (words drawn from a fixed list, so no real paper is named)."""
    words = "social cognition learning model prediction behavior network adolescent survey effect study".split()
    authors = ", ".join(f"{rng.choice(_SURNAMES)}, {chr(65 + rng.randrange(26))}." for _ in range(rng.randint(1, 3)))
    title = " ".join(rng.choice(words) for _ in range(rng.randint(5, 9))).capitalize()
    return f"{authors} ({rng.randint(1985, 2022)}). {title}. Journal of Studies, {rng.randint(1, 60)}, {n}-{n + 17}."


def fake_citation(rng: random.Random) -> str:
    """An in-text citation in one of the common styles."""
    a, b = rng.sample(_SURNAMES, 2)
    year = rng.randint(1990, 2022)
    return rng.choice(
        [
            f"({a} et al., {year})",
            f"({a} & {b}, {year})",
            f"({a}, {year}; {b} et al., {year - 3})",
            f"[{rng.randint(1, 60)}]",
            f"(e.g., {a}, {year})",
        ]
    )


def add_citations(text: str, rng: random.Random, rate: float = 0.3) -> str:
    """Put a citation before the full stop of about ``rate`` of the sentences (never inside a sentence's words)."""
    pieces = re.split(r"(?<=[a-z)])\.(?=\s+[A-Z])", text)
    out = []
    for k, piece in enumerate(pieces):
        out.append(piece)
        if k < len(pieces) - 1:
            out.append((" " + fake_citation(rng) if rng.random() < rate else "") + ".")
    return "".join(out)


def paragraphs_from_text(text: str, sentences_per_paragraph: int = 6) -> list[str]:
    """Split one long text (the MLPsych format) into paragraphs of a few sentences."""
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z])", " ".join(text.split()))
    return [
        " ".join(sentences[i : i + sentences_per_paragraph]) for i in range(0, len(sentences), sentences_per_paragraph)
    ]


def _fonts() -> tuple[str, str]:
    """DejaVu Serif where fonts-dejavu is installed, else the Bitstream Vera that reportlab ships: a TrueType font
    either way, so every machine draws ligatures, soft hyphens and ToUnicode claims (the built-in Type 1 fonts are
    Latin-1 only and narrower, and a test paper set in them had fewer pages than the tests need)."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    regular, bold = _DEJAVU / "DejaVuSerif.ttf", _DEJAVU / "DejaVuSerif-Bold.ttf"
    names = ("DejaVuSerif", "DejaVuSerif-Bold")
    if not (regular.is_file() and bold.is_file()):
        regular, bold = Path("Vera.ttf"), Path("VeraBd.ttf")  # found on reportlab's own font path
        names = ("Vera", "VeraBd")
    if names[0] not in pdfmetrics.getRegisteredFontNames():
        pdfmetrics.registerFont(TTFont(names[0], str(regular)))
        pdfmetrics.registerFont(TTFont(names[1], str(bold)))
    return names


def _math_font() -> str | None:
    """DejaVu Math TeX Gyre for inline math letters (𝐾, 𝜆), as a LaTeX preprint sets them; None if not installed."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    if not MATH_FONT.is_file():
        return None
    if "DejaVuMath" not in pdfmetrics.getRegisteredFontNames():
        pdfmetrics.registerFont(TTFont("DejaVuMath", str(MATH_FONT)))
    return "DejaVuMath"


def _markup(text: str, ligatures: bool) -> str:
    if ligatures:
        text = text.replace("fi", "\ufb01").replace("fl", "\ufb02")
    text = escape(text)
    math = _math_font() if _MATH_RUN.search(text) else None
    return _MATH_RUN.sub(lambda m: f'<font name="{math}">{m.group()}</font>', text) if math else text


@contextmanager
def _utf16_to_unicode_maps(overrides: dict[int, str] | None = None) -> Iterator[None]:
    """Make reportlab write ToUnicode entries in UTF-16BE, as the PDF standard (and TeX, and Word) does.

    reportlab writes ``<%04X>`` of the code point, which garbles a character beyond the BMP (U+1D43E becomes five
    hex digits and PDFium reads U+1D43). Written right - a surrogate pair - it is what PDFium hands back as two lone
    UTF-16 halves, the text of real preprints that broke ingest. BMP entries come out as before. ``overrides`` maps
    a drawn character to what its entry claims instead (a broken map: a lone surrogate, NUL, a non-character).
    """
    from reportlab.pdfbase import ttfonts

    original = ttfonts.makeToUnicodeCMap
    claims = overrides or {}

    def utf16_map(fontname: str, subset: list[int]) -> str:
        lines = original(fontname, subset).split("\n")
        first = lines.index(f"{len(subset)} beginbfchar") + 1
        lines[first : first + len(subset)] = [
            f"<{k:02X}> <{claims.get(code, chr(code)).encode('utf-16-be', 'surrogatepass').hex().upper()}>"
            for k, code in enumerate(subset)
        ]
        return "\n".join(lines)

    ttfonts.makeToUnicodeCMap = utf16_map
    try:
        yield
    finally:
        ttfonts.makeToUnicodeCMap = original


def render_pdf(
    paper: SynthPaper,
    path: Path,
    *,
    columns: int = 2,
    ligatures: bool = False,
    font_size: float = 9.5,
    encrypt_password: str | None = None,
    claims: dict[str, str] | None = None,
) -> RenderInfo:
    """Typeset ``paper`` into ``path`` and return the page count and the boilerplate lines it added.

    ``claims`` maps a drawn character to the text its ToUnicode entry claims instead (a preprint whose hyphen
    glyph reads back as "-" + U+00AD + U+2010, see :func:`soft_hyphen_paper`).
    """
    from reportlab.lib.enums import TA_CENTER, TA_JUSTIFY
    from reportlab.lib.pagesizes import letter
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.platypus import BaseDocTemplate, Frame, FrameBreak, NextPageTemplate, PageTemplate, Paragraph

    font, bold = _fonts()
    try:
        import pyphen  # noqa: F401

        hyphenation = {"hyphenationLang": "en_US", "embeddedHyphenation": 1}
    except ImportError:
        hyphenation = {}
    width, height = letter
    margin, gutter, foot_area = 54.0, 18.0, 60.0
    body = ParagraphStyle(
        "body", fontName=font, fontSize=font_size, leading=font_size * 1.2, alignment=TA_JUSTIFY,
        firstLineIndent=10, **hyphenation,
    )
    heading = ParagraphStyle("heading", fontName=bold, fontSize=font_size + 1, leading=font_size * 1.5, spaceBefore=6)
    caption = ParagraphStyle("caption", fontName=font, fontSize=font_size - 2, leading=font_size - 0.5, spaceBefore=4,
                             spaceAfter=6)
    title = ParagraphStyle("title", fontName=bold, fontSize=16, leading=20, alignment=TA_CENTER, spaceAfter=14)
    ref_style = ParagraphStyle("ref", parent=body, fontSize=font_size - 1, leading=font_size * 1.1, firstLineIndent=0,
                               leftIndent=10, alignment=0)

    column_width = (width - 2 * margin - gutter * (columns - 1)) / columns
    bottom = margin + foot_area
    top_title = 70.0

    def column_frames(page_top: float) -> list[Frame]:
        return [
            Frame(margin + k * (column_width + gutter), bottom, column_width, page_top - bottom, id=f"c{k}",
                  leftPadding=0, rightPadding=0, topPadding=0, bottomPadding=0)
            for k in range(columns)
        ]

    content_top = height - margin - 14
    first_frames = [Frame(margin, content_top - top_title, width - 2 * margin, top_title, id="title")]
    first_frames += column_frames(content_top - top_title - 6)

    notes = list(paper.footnotes)

    def decorate(canvas, doc) -> None:  # noqa: ANN001 - reportlab callback signature
        canvas.saveState()
        canvas.setFont(font, 8)
        canvas.drawString(margin, height - margin + 4, f"{paper.journal} 2024, Vol. 12(3)")
        canvas.drawRightString(width - margin, height - margin + 4, paper.short_title)
        canvas.drawCentredString(width / 2, margin - 24, str(doc.page))
        if doc.page - 1 < len(notes):
            canvas.setFont(font, 7)
            canvas.line(margin, margin + foot_area - 12, margin + 120, margin + foot_area - 12)
            canvas.drawString(margin, margin + foot_area - 24, notes[doc.page - 1])
        canvas.restoreState()

    doc = BaseDocTemplate(
        str(path), pagesize=letter, leftMargin=margin, rightMargin=margin, topMargin=margin, bottomMargin=margin,
        title=paper.title, author="mlpsych synth", encrypt=encrypt_password,
    )
    def stamp(canvas, doc) -> None:  # noqa: ANN001 - drawn after the page's text, as a publisher's overlay is
        canvas.saveState()
        canvas.setFont(font, 7)
        if paper.foot_stamp:
            canvas.drawCentredString(width / 2, margin - 36, paper.foot_stamp)
        canvas.rotate(90)
        for k, note in enumerate(paper.margin_notes):
            canvas.drawString(margin + 40, -(margin / 2 - 12 + 9 * k), note)
        canvas.restoreState()

    doc.addPageTemplates(
        [
            PageTemplate(id="first", frames=first_frames, onPage=decorate, onPageEnd=stamp),
            PageTemplate(id="later", frames=column_frames(content_top), onPage=decorate, onPageEnd=stamp),
        ]
    )
    story = [Paragraph(_markup(paper.title, False), title), NextPageTemplate("later"), FrameBreak()]
    for k, text in enumerate(paper.paragraphs):
        if k in paper.headings:
            story.append(Paragraph(_markup(paper.headings[k], False), heading))
        story.append(Paragraph(_markup(text, ligatures), body))
        if k in paper.captions:
            story.append(Paragraph(_markup(paper.captions[k], False), caption))
    if paper.references:
        story.append(Paragraph("References", heading))
        story.extend(Paragraph(_markup(ref, False), ref_style) for ref in paper.references)
    with _utf16_to_unicode_maps({ord(char): claim for char, claim in (claims or {}).items()}):
        doc.build(story)
    boilerplate = [f"{paper.journal} 2024, Vol. 12(3)", paper.short_title, *notes[: doc.page], *paper.margin_notes]
    boilerplate += [paper.foot_stamp] if paper.foot_stamp else []
    boilerplate += list(paper.captions.values()) + list(paper.references)
    return RenderInfo(n_pages=doc.page, boilerplate=boilerplate)


def math_italic_paper() -> SynthPaper:
    """A short methods section with its parameters in Mathematical Italic letters (𝐾, 𝜆, 𝑁), as LaTeX and Word's
    equation editor set them: render it with :func:`render_pdf` (needs :data:`MATH_FONT`) to test ingestion of
    characters beyond the BMP."""
    return SynthPaper(
        title="Predicting Burnout from Nurses' Essays",
        short_title="Burnout Essays",
        paragraphs=[
            ("Nurses (𝑁 = 312) wrote short essays about their work. We trained random forests with the number of "
             "trees 𝐾 = 500 and compared them with lasso regression, where the penalty 𝜆 was chosen by ten-fold "
             "cross-validation."),
            ("The learning rate 𝜂 = 0.1 and the depth 𝑑 = 8 of the gradient boosting machine were tuned on a "
             "held-out set; the random forests predicted burnout best (𝑅² = .41, 𝑝 < .001), and the lasso kept "
             "𝑘 = 37 words."),
        ] * 3,
        headings={0: "Method", 2: "Results"},
    )


# What the hyphen glyph of a real preprint reads back as: a hyphen, a soft hyphen and a Unicode hyphen.
SOFT_HYPHEN_CLAIM = "-\u00ad\u2010"


def soft_hyphen_paper() -> SynthPaper:
    """A results section full of hyphenated words and negative coefficients, for :func:`render_pdf` with
    ``claims={"-": SOFT_HYPHEN_CLAIM}``: every hyphen (typed, or added at a line end) then reads back with three
    hyphen characters, as in a preprint whose text came out as "cross--fostered" and "B = -- 0.059"."""
    return SynthPaper(
        title="Cross-Fostered Pups and Self-Referential Memory",
        short_title="Cross-Fostering",
        paragraphs=[
            ("Cross-fostered pups were compared with non-fostered litter-mates in a well-known open-field test; "
             "the self-referential encoding task followed the long-term follow-up of every pup-mother dyad. "
             "Maternal licking predicted later exploration (B = -0.059, SE = 0.021) and the self-reported "
             "stress of the experimenters did not (B = -0.004, SE = 0.018), in line with the pre-registered "
             "hypotheses of the cross-fostering literature."),
        ] * 6,
        headings={0: "Results"},
    )


def text_layer_pdf(path: Path, paragraphs: list[str]) -> None:
    """A plain PDF whose text layer reads ``paragraphs`` (wrapped into lines), even characters no font draws.

    Controls, surrogates, non-characters and characters DejaVu Serif lacks are each drawn as a stand-in glyph (a
    Cyrillic or Greek letter the text does not use) whose ToUnicode entry claims the character, as a broken
    ToUnicode map in a real PDF does. Needs the DejaVu fonts (``FileNotFoundError`` without them).
    """
    import textwrap

    from reportlab.lib.pagesizes import letter
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfgen import canvas

    font = _fonts()[0]
    if not font.startswith("DejaVu"):
        raise FileNotFoundError(f"DejaVu fonts not found in {_DEJAVU}")
    drawable = pdfmetrics.getFont(font).face.charToGlyph
    text = "\n".join(paragraphs)
    free = (chr(c) for c in [*range(0x0410, 0x0450), *range(0x03B1, 0x03CA)] if chr(c) not in text)
    stand_in: dict[str, str] = {}
    for char in dict.fromkeys(text):
        if char != "\n" and (ord(char) not in drawable or not char.isprintable()):
            stand_in[char] = next(free)
    pdf = canvas.Canvas(str(path), pagesize=letter)
    y = 740.0
    for paragraph in paragraphs:
        drawn = "".join(stand_in.get(char, char) for char in paragraph)
        for line in textwrap.wrap(drawn, 90) + [""]:
            if y < 60:
                pdf.showPage()
                y = 740.0
            pdf.setFont(font, 9)
            pdf.drawString(54, y, line)
            y -= 12
    pdf.showPage()
    with _utf16_to_unicode_maps({ord(glyph): char for char, glyph in stand_in.items()}):
        pdf.save()


def image_only_pdf(path: Path) -> None:
    """A 'scanned' page: a picture of text with no text layer (for tests of the no-text-layer status)."""
    import io

    from PIL import Image, ImageDraw
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    image = Image.new("RGB", (600, 200), "white")
    ImageDraw.Draw(image).text((20, 80), "This page is only a picture of words.", fill="black")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    buffer.seek(0)
    pdf = canvas.Canvas(str(path))
    pdf.drawImage(ImageReader(buffer), 50, 500, width=500, height=160)
    pdf.showPage()
    pdf.save()


def pdf_with_a_page_without_text(path: Path) -> None:
    """Page 1 a sentence, page 2 a drawing and no text, as a scanned table would be (for tests of the note that
    such pages were not read)."""
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path))
    pdf.drawString(72, 700, "We trained a random forest on the survey answers of 212 nurses.")
    pdf.showPage()
    pdf.rect(72, 300, 400, 300, fill=1)
    pdf.showPage()
    pdf.save()
