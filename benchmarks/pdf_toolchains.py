"""Typeset a :class:`~mlpsych.dev.synth.SynthPaper` with real toolchains: pdfLaTeX and Word-format via LibreOffice.

The reportlab renderer in ``mlpsych.dev.synth`` is ours, so its PDFs may share our blind spots. Journals and
authors produce PDFs with TeX (ligatures, Knuth-Liang hyphenation, ``\\thanks`` footnotes, floats, a numbered
bibliography) and with Word/LibreOffice (fields for page numbers, a first-page footer, section columns). These
renderers write the same paper through those tools so ``pdf_fidelity.py`` can score them against the same truth.
Benchmark-only: they need ``pdflatex`` (texlive-latex-base, lmodern) or ``soffice`` (libreoffice-writer-nogui)
plus python-docx; :func:`missing_tool` says why a toolchain cannot run.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlpsych.dev.synth import RenderInfo, SynthPaper, render_pdf  # noqa: E402
from mlpsych.ingest.pdf import page_count  # noqa: E402

log = logging.getLogger(__name__)

HEADER_SUFFIX = " 2024, Vol. 12(3)"  # printed after the journal name in every renderer's running header
BODY_NOTE = "All materials and the analysis code are available from the authors on request."
Renderer = Callable[[dict[str, SynthPaper], Path, dict[str, bool]], dict[str, RenderInfo]]


# ------------------------------------------------------------------------------------------------------- reportlab


def render_reportlab(papers: dict[str, SynthPaper], out_dir: Path, ligatures: dict[str, bool]) -> dict[str, RenderInfo]:
    """The project's own journal-like renderer (``mlpsych.dev.synth.render_pdf``)."""
    return {pid: render_pdf(p, out_dir / f"{pid}.pdf", ligatures=ligatures.get(pid, False)) for pid, p in papers.items()}


# ----------------------------------------------------------------------------------------------------------- LaTeX

_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "$": r"\$",
    "&": r"\&",
    "#": r"\#",
    "_": r"\_",
    "%": r"\%",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "-": "-{}",  # so "--" and "---" stay hyphens instead of becoming en/em dashes
    "`": r"\textasciigrave{}",
}


def latex_escape(text: str) -> str:
    """Plain text as LaTeX source that typesets to the same characters (no dashes, quotes or specials reinterpreted).

    Quotes are left as an author types them, so ``'`` prints as a typographic apostrophe, as in real LaTeX papers;
    the hyphen keeps its line-breaking behaviour because ``-{}`` is still a hyphen character.
    """
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def latex_source(paper: SynthPaper) -> tuple[str, list[str]]:
    """A two-column ``article`` with fancyhdr header/footer, a ``\\thanks`` note, a body footnote, figure floats and
    a ``thebibliography``; returns the source and the caption lines as they will be printed."""
    header = latex_escape(paper.journal + HEADER_SUFFIX)
    lines = [
        r"\documentclass[twocolumn,10pt,letterpaper]{article}",
        r"\usepackage[T1]{fontenc}",
        r"\usepackage{lmodern}",
        r"\usepackage{textcomp}",
        r"\usepackage[margin=0.8in]{geometry}",
        r"\usepackage{fancyhdr}",
        r"\pagestyle{fancy}",
        r"\fancyhf{}",
        rf"\fancyhead[L]{{\small {header}}}",
        rf"\fancyhead[R]{{\small {latex_escape(paper.short_title)}}}",
        r"\fancyfoot[C]{\thepage}",
        r"\renewcommand{\headrulewidth}{0.4pt}",
        rf"\title{{{latex_escape(paper.title)}}}",
        rf"\author{{A. Author and B. Author\thanks{{{latex_escape(' '.join(paper.footnotes))}}}}}",
        r"\date{}",
        r"\begin{document}",
        r"\maketitle",
        r"\thispagestyle{fancy}",
        "",
    ]
    captions: list[str] = []
    for k, text in enumerate(paper.paragraphs):
        if k in paper.headings:
            lines.append(rf"\section*{{{latex_escape(paper.headings[k])}}}")
        body = latex_escape(text)
        if k == 1:
            body += rf"\footnote{{{latex_escape(BODY_NOTE)}}}"
        lines += [body, ""]
        if k in paper.captions:
            caption = paper.captions[k].split(". ", 1)[-1]  # LaTeX numbers the figure itself
            captions.append(f"Figure {len(captions) + 1}: {caption}")
            lines += [
                r"\begin{figure}[tb]\centering",
                r"\fbox{\rule{0pt}{1.1in}\rule{0.85\columnwidth}{0pt}}",
                rf"\caption{{{latex_escape(caption)}}}",
                r"\end{figure}",
                "",
            ]
    lines.append(r"\begin{thebibliography}{99}")
    lines += [rf"\bibitem{{r{n}}} {latex_escape(ref)}" for n, ref in enumerate(paper.references)]
    lines += [r"\end{thebibliography}", r"\end{document}", ""]
    return "\n".join(lines), captions


def render_latex(papers: dict[str, SynthPaper], out_dir: Path, ligatures: dict[str, bool]) -> dict[str, RenderInfo]:
    """Compile each paper with pdflatex (twice, for floats and marks); ligatures are TeX's own, always on."""
    infos: dict[str, RenderInfo] = {}
    with tempfile.TemporaryDirectory(prefix="latex-") as tmp:
        for pid, paper in papers.items():
            source, captions = latex_source(paper)
            tex = Path(tmp) / f"{pid}.tex"
            tex.write_text(source, encoding="utf-8")
            for _ in range(2):
                done = subprocess.run(
                    ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", tex.name],
                    cwd=tmp, capture_output=True, text=True, errors="replace",
                )
            pdf = tex.with_suffix(".pdf")
            if done.returncode != 0 or not pdf.is_file():
                log.warning("pdflatex failed on %s: %s", pid, done.stdout[-500:])
                continue
            shutil.copy(pdf, out_dir / pdf.name)
            infos[pid] = RenderInfo(page_count(pdf), _boilerplate(paper, captions, [BODY_NOTE]))
    return infos


def _boilerplate(paper: SynthPaper, captions: list[str], extra_notes: list[str]) -> list[str]:
    """Lines that must not survive, in the order ``score_synthetic`` expects: two per-page lines, then the rest."""
    return [paper.journal + HEADER_SUFFIX, paper.short_title, *paper.footnotes, *extra_notes, *captions,
            *paper.references]


# ------------------------------------------------------------------------------------------ DOCX through LibreOffice


def write_docx(paper: SynthPaper, path: Path) -> list[str]:
    """A Word document like a journal template: title block, two-column body (section columns), running header,
    PAGE field in the footer, a small-font correspondence note in the first-page footer, captions, references."""
    from docx import Document as Docx
    from docx.enum.section import WD_SECTION
    from docx.enum.text import WD_ALIGN_PARAGRAPH
    from docx.shared import Inches, Pt

    doc = Docx()
    normal = doc.styles["Normal"]
    normal.font.name = "Liberation Serif"
    normal.font.size = Pt(10)
    first = doc.sections[0]
    for section_margin in ("left_margin", "right_margin", "top_margin", "bottom_margin"):
        setattr(first, section_margin, Inches(0.8))
    first.different_first_page_header_footer = True
    header_text = f"{paper.journal}{HEADER_SUFFIX}\t\t{paper.short_title}"
    for header in (first.header, first.first_page_header):
        _small(header.paragraphs[0], header_text, 8)
    for footer in (first.footer, first.first_page_footer):
        paragraph = footer.paragraphs[0]
        paragraph.alignment = WD_ALIGN_PARAGRAPH.CENTER
        _page_field(paragraph)
    for note in paper.footnotes:
        _small(first.first_page_footer.add_paragraph(), note, 7)

    title = doc.add_paragraph()
    title.alignment = WD_ALIGN_PARAGRAPH.CENTER
    run = title.add_run(paper.title)
    run.bold, run.font.size = True, Pt(16)
    _small(doc.add_paragraph(), "A. Author and B. Author", 10).alignment = WD_ALIGN_PARAGRAPH.CENTER

    body = doc.add_section(WD_SECTION.CONTINUOUS)
    _columns(body, 2)
    captions: list[str] = []
    for k, text in enumerate(paper.paragraphs):
        if k in paper.headings:
            doc.add_heading(paper.headings[k], level=2)
        paragraph = doc.add_paragraph(text)
        paragraph.alignment = WD_ALIGN_PARAGRAPH.JUSTIFY
        paragraph.paragraph_format.first_line_indent = Pt(10)
        paragraph.paragraph_format.space_after = Pt(0)
        if k in paper.captions:
            captions.append(paper.captions[k])
            _small(doc.add_paragraph(), paper.captions[k], 8).paragraph_format.space_before = Pt(4)
    doc.add_heading("References", level=2)
    for ref in paper.references:
        paragraph = _small(doc.add_paragraph(), ref, 9)
        paragraph.paragraph_format.left_indent = Pt(14)
        paragraph.paragraph_format.first_line_indent = Pt(-14)
        paragraph.paragraph_format.space_after = Pt(2)
    doc.save(str(path))
    return captions


def _small(paragraph, text: str, size: float):  # noqa: ANN001, ANN202 - python-docx objects
    from docx.shared import Pt

    paragraph.add_run(text).font.size = Pt(size)
    return paragraph


def _page_field(paragraph) -> None:  # noqa: ANN001 - python-docx paragraph
    """A PAGE field (python-docx has no API for fields), as Word's "Insert page number" writes it."""
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    field = OxmlElement("w:fldSimple")
    field.set(qn("w:instr"), "PAGE")
    run = OxmlElement("w:r")
    text = OxmlElement("w:t")
    text.text = "1"
    run.append(text)
    field.append(run)
    paragraph._p.append(field)


def _columns(section, number: int) -> None:  # noqa: ANN001 - python-docx section
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    sect = section._sectPr
    cols = sect.find(qn("w:cols"))
    if cols is None:
        cols = OxmlElement("w:cols")
        sect.append(cols)
    cols.set(qn("w:num"), str(number))
    cols.set(qn("w:space"), "360")


def render_docx(papers: dict[str, SynthPaper], out_dir: Path, ligatures: dict[str, bool]) -> dict[str, RenderInfo]:
    """Write each paper as DOCX with python-docx and convert them all with one ``soffice --headless`` call."""
    infos: dict[str, RenderInfo] = {}
    with tempfile.TemporaryDirectory(prefix="docx-") as tmp:
        captions = {pid: write_docx(paper, Path(tmp) / f"{pid}.docx") for pid, paper in papers.items()}
        profile = Path(tmp) / "profile"
        done = subprocess.run(
            ["soffice", f"-env:UserInstallation=file://{profile}", "--headless", "--convert-to", "pdf",
             "--outdir", str(out_dir), *sorted(str(p) for p in Path(tmp).glob("*.docx"))],
            capture_output=True, text=True, errors="replace", timeout=1800,
        )
        if done.returncode != 0:
            log.warning("soffice failed: %s", done.stderr[-500:])
    for pid, paper in papers.items():
        pdf = out_dir / f"{pid}.pdf"
        if pdf.is_file():
            infos[pid] = RenderInfo(page_count(pdf), _boilerplate(paper, captions[pid], []))
    return infos


# ------------------------------------------------------------------------------------------------------- registry

TOOLCHAINS: dict[str, tuple[Renderer, tuple[str, ...]]] = {
    "reportlab": (render_reportlab, ()),
    "latex": (render_latex, ("pdflatex",)),
    "docx": (render_docx, ("soffice",)),
}


def missing_tool(name: str) -> str | None:
    """Why toolchain ``name`` cannot run here (a one-line reason), or None when it can."""
    _, commands = TOOLCHAINS[name]
    for command in commands:
        if shutil.which(command) is None:
            package = {"pdflatex": "texlive-latex-base and lmodern", "soffice": "libreoffice-writer-nogui"}[command]
            return f"`{command}` not found (Debian: apt-get install {package})"
    if name == "latex":
        probe = subprocess.run(["kpsewhich", "fancyhdr.sty", "lmodern.sty", "geometry.sty"], capture_output=True,
                               text=True)
        found = probe.stdout.split()
        if len(found) < 3:
            return "LaTeX packages fancyhdr, lmodern and geometry needed (Debian: lmodern, texlive-latex-base)"
    if name == "docx":
        try:
            import docx  # noqa: F401
        except ImportError:
            return "python-docx not installed (pip install python-docx)"
    return None
