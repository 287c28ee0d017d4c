"""Render the example papers (examples/papers/*.txt) as journal-style PDFs in examples/pdf/.

Why: the PDFs exercise the PDF ingest path the way real articles do -- running headers with page numbers,
a larger title, and (for some papers) two columns -- while the .txt files stay the exact source of truth
for gold offsets. Standard PDF fonts only (not embedded), so the files stay a few kB and carry a real text layer.

Usage:  python examples/make_pdfs.py [--check]
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from reportlab.lib.enums import TA_CENTER, TA_JUSTIFY
from reportlab.lib.pagesizes import letter
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import inch
from reportlab.platypus import BaseDocTemplate, Flowable, Frame, FrameBreak, NextPageTemplate, PageTemplate, Paragraph, Spacer

log = logging.getLogger("make_pdfs")

HERE = Path(__file__).resolve().parent
PAPERS = HERE / "papers"
PDF_DIR = HERE / "pdf"

# Made-up venues; the layout flag picks one or two text columns.
JOURNALS = {
    "burnout-survey-text": ("Journal of Workplace Behaviour and Health", "Vol. 14, No. 2 (2023)", 1),
    "social-media-wellbeing": ("Computational Psychology Letters", "Vol. 7 (2024)", 2),
    "online-course-dropout": ("Review of Learning and Motivation Research", "Vol. 31, No. 4 (2022)", 1),
    "moral-language-speeches": ("Political Psychology Quarterly Reports", "Vol. 9, No. 1 (2024)", 2),
}
DEFAULT_JOURNAL = ("Occasional Papers in Applied Psychology", "Vol. 1 (2024)", 1)

HEADING = re.compile(r"^(Abstract|References|\d+(\.\d+)*\s+[A-Z][^.]{0,70})$")
MARGIN = 0.9 * inch
GUTTER = 0.3 * inch
HEADER_GAP = 0.35 * inch


@dataclass
class Paper:
    """A paper split into its parts: title, byline lines, and body blocks (paragraphs and headings)."""
    stem: str
    title: str
    byline: list[str]
    blocks: list[str]


def parse_paper(path: Path) -> Paper:
    """Blank-line separated blocks: title, then authors/affiliation, then the body."""
    blocks = [b.strip() for b in path.read_text(encoding="utf-8").split("\n\n") if b.strip()]
    if len(blocks) < 3:
        raise ValueError(f"{path.name}: expected a title, a byline and a body separated by blank lines")
    return Paper(path.stem, blocks[0], blocks[1].splitlines(), blocks[2:])


def styles(columns: int) -> dict[str, ParagraphStyle]:
    """Times for the body (smaller in two columns), Helvetica for title and headings."""
    size = 9.5 if columns == 2 else 11
    body = ParagraphStyle("body", fontName="Times-Roman", fontSize=size, leading=size * 1.3,
                          alignment=TA_JUSTIFY, spaceAfter=size * 0.5)
    return {
        "title": ParagraphStyle("title", fontName="Helvetica-Bold", fontSize=17, leading=21, alignment=TA_CENTER,
                                spaceAfter=10),
        "byline": ParagraphStyle("byline", fontName="Times-Italic", fontSize=11, leading=14, alignment=TA_CENTER),
        "abstract": ParagraphStyle("abstract", parent=body, fontSize=9.5, leading=12.5, leftIndent=0.3 * inch,
                                   rightIndent=0.3 * inch),
        "heading": ParagraphStyle("heading", fontName="Helvetica-Bold", fontSize=size + 1, leading=size * 1.6,
                                  spaceBefore=size * 0.6, spaceAfter=size * 0.3, keepWithNext=1),
        "body": body,
        "rq": ParagraphStyle("rq", parent=body, fontName="Times-Italic", leftIndent=12),
        "ref": ParagraphStyle("ref", parent=body, fontSize=size - 1, leading=(size - 1) * 1.25, leftIndent=14,
                              firstLineIndent=-14, alignment=0),
    }


def front_matter(paper: Paper, st: dict[str, ParagraphStyle]) -> tuple[list[Flowable], list[str]]:
    """Title, byline and abstract (full width); returns them and the remaining body blocks."""
    flow: list[Flowable] = [Paragraph(escape(paper.title), st["title"])]
    flow += [Paragraph(escape(line), st["byline"]) for line in paper.byline]
    flow.append(Spacer(1, 12))
    rest = list(paper.blocks)
    if rest and rest[0] == "Abstract":
        flow.append(Paragraph("Abstract", ParagraphStyle("ah", parent=st["heading"], alignment=TA_CENTER)))
        flow.append(Paragraph(escape(rest[1]), st["abstract"]))
        flow.append(Spacer(1, 8))
        rest = rest[2:]
    return flow, rest


def body_flowables(blocks: list[str], st: dict[str, ParagraphStyle]) -> list[Flowable]:
    """Headings, research questions in italics, references with hanging indents, other paragraphs as body."""
    flow: list[Flowable] = []
    in_refs = False
    for block in blocks:
        text = escape(" ".join(block.split()))
        if HEADING.match(block):
            in_refs = block == "References"
            flow.append(Paragraph(text, st["heading"]))
        elif in_refs:
            flow.append(Paragraph(text, st["ref"]))
        elif re.match(r"^(Research question\. )?RQ\d", block):
            flow.append(Paragraph(text, st["rq"]))
        else:
            flow.append(Paragraph(text, st["body"]))
    return flow


def header_painter(journal: str, volume: str, short_title: str):
    """Running header (journal, volume, short title, page number) and a thin rule on every page."""
    def paint(canvas, doc) -> None:
        width, height = doc.pagesize
        y = height - MARGIN + HEADER_GAP * 0.55
        canvas.saveState()
        canvas.setFont("Helvetica", 8)
        canvas.drawString(MARGIN, y, f"{journal}, {volume}")
        canvas.drawRightString(width - MARGIN, y, f"{short_title}    {doc.page}")
        canvas.setLineWidth(0.4)
        canvas.line(MARGIN, y - 4, width - MARGIN, y - 4)
        canvas.restoreState()
    return paint


def frame_height(flow: list[Flowable], width: float) -> float:
    """Height the front matter needs at this width (so the two columns start right below it)."""
    total = 0.0
    for f in flow:
        _, h = f.wrap(width, 10_000)
        total += h + f.getSpaceBefore() + f.getSpaceAfter()
    return total + 12


def build_pdf(paper: Paper, out: Path) -> Path:
    """Lay out one paper: one column, or a full-width front matter over two columns on page 1 then two columns."""
    journal, volume, columns = JOURNALS.get(paper.stem, DEFAULT_JOURNAL)
    st = styles(columns)
    width, height = letter
    text_w = width - 2 * MARGIN
    top = height - MARGIN - HEADER_GAP  # body starts below the running header
    body_h = top - MARGIN
    short_title = paper.title.split(":")[0]
    paint = header_painter(journal, volume, short_title[:60])
    front, rest = front_matter(paper, st)
    doc = BaseDocTemplate(str(out), pagesize=letter, title=paper.title, author="; ".join(paper.byline[:1]),
                          subject=journal, leftMargin=MARGIN, rightMargin=MARGIN, topMargin=MARGIN,
                          bottomMargin=MARGIN, invariant=1)
    if columns == 1:
        doc.addPageTemplates([PageTemplate("one", [Frame(MARGIN, MARGIN, text_w, body_h, id="main")], onPage=paint)])
        story = front + body_flowables(rest, st)
    else:
        col_w = (text_w - GUTTER) / 2
        head_h = frame_height(front, text_w)
        col_h = body_h - head_h

        def columns_at(h: float) -> list[Frame]:
            return [Frame(MARGIN, MARGIN, col_w, h, id="left"), Frame(MARGIN + col_w + GUTTER, MARGIN, col_w, h, id="right")]

        first = PageTemplate("first", [Frame(MARGIN, top - head_h, text_w, head_h, id="head")] + columns_at(col_h),
                             onPage=paint)
        later = PageTemplate("two", columns_at(body_h), onPage=paint)
        doc.addPageTemplates([first, later])
        story = front + [NextPageTemplate("two"), FrameBreak()] + body_flowables(rest, st)
    doc.build(story)
    return out


def page_texts(pdf: Path) -> list[str]:
    """Text layer of each page, read back with pypdfium2 (the same library the embedded ingest backend uses)."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(pdf))
    try:
        return [doc[i].get_textpage().get_text_range() for i in range(len(doc))]
    finally:
        doc.close()


def check_pdf(pdf: Path, must_contain: list[str]) -> list[str]:
    """Problems with one PDF: fewer than two pages, or method names missing from its text layer."""
    pages = page_texts(pdf)
    flat = " ".join(" ".join(pages).split())
    problems = [f"{pdf.name}: only {len(pages)} page(s)"] if len(pages) < 2 else []
    problems += [f"{pdf.name}: text layer lacks {term!r}" for term in must_contain if term not in flat]
    return problems


# Method names each PDF's text layer must carry (a check that the text is real, extractable text).
EXPECTED_TERMS = {
    "burnout-survey-text": ["latent Dirichlet allocation", "random forests", "LASSO", "MALLET", "glmnet"],
    "social-media-wellbeing": ["BERT", "support vector machine", "scikit-learn", "Hugging Face transformers"],
    "online-course-dropout": ["XGBoost", "logistic regression", "SHAP", "scikit-learn"],
    "moral-language-speeches": ["naive Bayes", "k-means clustering", "Word2vec"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="also read the PDFs back and check their text layer")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    PDF_DIR.mkdir(exist_ok=True)
    problems: list[str] = []
    for txt in sorted(PAPERS.glob("*.txt")):
        pdf = build_pdf(parse_paper(txt), PDF_DIR / f"{txt.stem}.pdf")
        log.info("%s  %d pages  %.1f kB", pdf.relative_to(HERE.parent), len(page_texts(pdf)), pdf.stat().st_size / 1024)
        if args.check:
            problems += check_pdf(pdf, EXPECTED_TERMS.get(txt.stem, []))
    for p in problems:
        log.error(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
