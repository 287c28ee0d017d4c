"""How much of a paper survives PDF ingestion, and how much boilerplate leaks in: per backend, measured.

Part 1 (synthetic, with ground truth): the MLPsych texts are typeset into journal-like two-column PDFs (running
header with the journal name, page numbers, a footnote, figure captions, in-text citations, a references section;
see ``mlpsych.dev.synth``), read back with each backend and cleaned, and compared with the source. The same
papers are also produced by real toolchains (``pdf_toolchains.py``): pdfLaTeX (two-column ``article``, fancyhdr,
``\\thanks`` and body footnotes, figure floats, ``thebibliography``) and a python-docx DOCX converted by LibreOffice
(section columns, PAGE field, first-page footer note); ``--toolchains`` picks them, missing tools are skipped.

- gold answers: share of answers_dev.json answer strings found verbatim (whitespace-normalized) in the output,
  out of those found in the source text;
- leaked boilerplate: share of header/footer/footnote/caption/reference lines still in the output
  (header lines counted once per page, compared on letters and digits only);
- char similarity: normalized Indel similarity of output and source (whitespace-normalized);
- seconds per page: wall time of ``load_documents`` over the folder divided by pages (Tika: one JVM for all).

Part 2 (real PDFs): each published PDF is extracted once per backend and cleaned each configured way; per paper:

- body recall: share of the word 8-grams of GROBID's TEI body paragraphs found in the output (8-grams within a
  paragraph: a heading, a float or a page break lies between two TEI paragraphs in the PDF; the paragraphs
  without their in-text citations when the cleaning removes citations, whole when it keeps them; a dash between
  two letters does not part words on either side, as GROBID joins line-end compounds and writes dashes as "-");
- reference leak: share of cited-work titles (4+ words, from the TEI's reference list, leaving out titles that
  the TEI body itself contains, e.g. a data set's name) still in the output;
- statistics kept: distinct operator-decimal forms of the raw extraction ("p < .001", "β = −0.15") that are in the
  output in some shape and are there as printed (``mlpsych.ingest.statforms.check_statistics``);
- stamps: download/copyright notices left, plus lines of the raw extraction repeated on 40% of the pages or more
  (running heads, article stamps) still on their page as printed;
- doubled hyphens: runs of two or more hyphen characters (U+00AD, U+2010, U+2011, "-").

    python benchmarks/pdf_fidelity.py --mlpsych ../shared/mlpsych --realpdfs ../shared/realpdfs [--limit 10]
        [--toolchains reportlab,latex,docx] [--keep DIR]

Prints a table; exit code is always 0 (a benchmark reports, it does not judge).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pdf_toolchains import TOOLCHAINS, missing_tool  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

from mlpsych.dev.synth import SynthPaper, add_citations, fake_reference, paragraphs_from_text  # noqa: E402
from mlpsych.ingest import CleaningOptions, load_documents  # noqa: E402
from mlpsych.ingest.base import Line  # noqa: E402
from mlpsych.ingest.clean import CleanResult, clean_pages  # noqa: E402
from mlpsych.ingest.margins import find_notices  # noqa: E402
from mlpsych.ingest.pdf import extract_pdf, page_count  # noqa: E402
from mlpsych.ingest.statforms import check_statistics  # noqa: E402
from mlpsych.ingest.textnorm import TextReport, normalize_lines  # noqa: E402
from mlpsych.ingest.tika import extract_many as tika_extract_many  # noqa: E402
from mlpsych.ingest.tika import find_tika_jar  # noqa: E402

TEI = "{http://www.tei-c.org/ns/1.0}"


def squash(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", "", text.lower())


def spaces(text: str) -> str:
    return " ".join(text.split())


def similarity() -> Callable[[str, str], float]:
    """rapidfuzz's C++ Indel similarity when installed (fast on 50k-character texts), else difflib on words."""
    try:
        from rapidfuzz.distance import Indel

        return Indel.normalized_similarity
    except ImportError:
        import difflib

        return lambda a, b: difflib.SequenceMatcher(None, a.split(), b.split()).ratio()


# --------------------------------------------------------------------------------------------- synthetic papers


def build_papers(mlpsych: Path, limit: int | None, seed: int) -> tuple[dict, dict, dict, dict]:
    """The dev-split papers as journal material: {id: source text}, {id: SynthPaper}, {id: ligatures?} and gold."""
    texts = json.loads(json.loads((mlpsych / "text.json").read_text(encoding="utf-8")))
    gold = json.loads((mlpsych / "answers_dev.json").read_text(encoding="utf-8"))
    ids = sorted(gold["q1"])[:limit] if limit else sorted(gold["q1"])
    rng = random.Random(seed)
    sources, papers, ligatures = {}, {}, {}
    for paper_id in ids:
        source = spaces(texts[paper_id])
        paragraphs = [add_citations(p, rng) for p in paragraphs_from_text(source)]
        captions = {k: f"Figure {n + 1}. Mean scores of the groups in condition {n + 1}, with 95% confidence "
                       f"intervals around each mean." for n, k in enumerate(range(4, len(paragraphs), 9))}
        papers[paper_id] = SynthPaper(
            title=f"Paper {paper_id}",
            paragraphs=paragraphs,
            journal="Journal of Personality and Social Inquiry",
            short_title=f"Running title of {paper_id}",
            footnotes=[f"Correspondence concerning this article should be addressed to author {paper_id}, "
                       "Department of Psychology."],
            references=[fake_reference(rng, n) for n in range(25)],
            captions=captions,
        )
        ligatures[paper_id] = rng.random() < 0.5  # drawn in this order so the reportlab corpus stays the same
        sources[paper_id] = source
    return sources, papers, ligatures, gold


def gold_answers(gold: dict, paper_id: str) -> list[str]:
    return [spaces(a["text"]) for q in gold.values() for a in q.get(paper_id, []) if a["text"].strip()]


def score_synthetic(documents, sources, extra, seconds: float) -> dict[str, float]:
    sim = similarity()
    found = total = leaked = boiler = 0
    sims, pages = [], 0
    for document in documents:
        source = sources[document.id]
        info = extra["infos"][document.id]
        pages += info.n_pages
        out = spaces(document.text)
        for answer in gold_answers(extra["gold"], document.id):
            if answer in source:
                total += 1
                found += answer in out
        flat = squash(document.text)
        header, title, *rest = info.boilerplate
        for line in (header, title):  # printed on every page
            boiler += info.n_pages
            leaked += min(flat.count(squash(line)), info.n_pages)
        boiler += info.n_pages  # page numbers: a line holding only a number
        leaked += min(len(re.findall(r"^\s*\d{1,3}\s*$", document.text, re.MULTILINE)), info.n_pages)
        for line in rest:
            boiler += 1
            leaked += squash(line)[:40] in flat
        sims.append(sim(out, source))
    return {
        "gold_survival": found / total if total else float("nan"),
        "leaked_boilerplate": leaked / boiler if boiler else float("nan"),
        "char_similarity": sum(sims) / len(sims) if sims else float("nan"),
        "sec_per_page": seconds / pages if pages else float("nan"),
        "papers": len(documents),
        "pages": pages,
        "answers": total,
    }


# ------------------------------------------------------------------------------------------------------ real PDFs


def tei_reference(path: Path, citations: bool = True) -> tuple[list[str], list[str]]:
    """Body paragraphs and cited-work titles (4+ words) from a GROBID TEI file; ``citations=False`` leaves the
    in-text citations (``<ref type="bibr">``) out of the paragraphs, as the cleaner's citation step does."""
    root = ET.parse(path).getroot()
    body = root.find(f".//{TEI}text/{TEI}body")
    paragraphs = [_text(p, citations) for p in body.iter(f"{TEI}p")] if body is not None else []
    titles = []
    bibls = [bibl for listing in root.iter(f"{TEI}listBibl") for bibl in listing.iter(f"{TEI}biblStruct")]
    for bibl in bibls:  # the references; the header's biblStruct is the paper itself
        title = bibl.find(f".//{TEI}title[@level='a']")  # an Element without children is falsy: no `or` here
        if title is None:
            title = bibl.find(f".//{TEI}title[@level='m']")
        if title is not None and title.text and len(title.text.split()) >= 4:
            titles.append(title.text)
    return paragraphs, titles


def _text(element: ET.Element, citations: bool) -> str:
    """The text of a TEI element, without its bibliographic references when ``citations`` is False."""
    if citations:
        return "".join(element.itertext())
    parts = [element.text or ""]
    for child in element:
        if not (child.tag == f"{TEI}ref" and child.get("type") == "bibr"):
            parts.append(_text(child, citations))
        parts.append(child.tail or "")
    return "".join(parts)


# A dash between two letters joins them into one word for the comparison. GROBID drops the hyphen of a compound
# broken at a line end ("selfreport" where the PDF prints "self-" / "report" and elsewhere "self-report") and
# writes en and em dashes as hyphens ("found-are" for "found—are"): whether a dash parts two words is GROBID's
# guess, not text kept or lost, so counting "self report" and "selfreport" as different words measured that guess.
_DASH_IN_WORD = re.compile(r"(?<=[^\W\d_])[-\u00ad\u2010\u2011\u2013\u2014](?=[^\W\d_])")


def ngrams(text: str, n: int = 8) -> set[tuple[str, ...]]:
    """Word n-grams (letters and digits), a dash between two letters not parting words."""
    words = re.findall(r"[0-9a-z]+", _DASH_IN_WORD.sub("", text.lower()))
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


@dataclass
class RealScore:
    """One real PDF read by one backend and cleaned one way (None: no TEI for that paper)."""

    paper: str
    body_recall: float | None
    reference_leak: float | None
    stats_expected: int  # distinct statistic forms of the raw text whose operator and number survive
    stats_kept: int  # of those, found as printed
    stats_missing: list[str]
    stamps: int  # download/copyright notices and lines repeated on many pages still in the text
    doubled_hyphens: int  # runs of two or more hyphen characters ("cross--fostered", "B = -- 0.059")


_HYPHEN_RUN = re.compile("[-\u00ad\u2010\u2011]{2,}")
_WORDS = re.compile(r"[A-Za-z]{2,}")


def _running_stamps(raw_pages: list[list[Line]]) -> list[tuple[int, str]]:
    """(page, line) of every line whose text (digits aside) recurs on at least 40% of the pages (3 or more) and
    has two words or more: running heads, article stamps, footer notices."""
    keys: list[set[str]] = [{re.sub(r"\d+", "#", spaces(ln.text)) for ln in page} for page in raw_pages]
    counts: dict[str, int] = {}
    for page_keys in keys:
        for key in page_keys:
            counts[key] = counts.get(key, 0) + 1
    limit = max(3, 0.4 * len(raw_pages))
    stamps = {key for key, n in counts.items() if n >= limit and len(_WORDS.findall(key)) >= 2}
    return [(p, spaces(ln.text)) for p, page in enumerate(raw_pages) for ln in page
            if re.sub(r"\d+", "#", spaces(ln.text)) in stamps]


def count_stamps(raw_pages: list[list[Line]], cleaned: CleanResult) -> int:
    """Notices (download, copyright, personal use) anywhere in the cleaned text, and running stamps of the raw
    extraction still on their page of the cleaned text as printed (spacing aside)."""
    notices = len(find_notices(cleaned.text))
    left = 0
    for page, line in _running_stamps(raw_pages):
        start, end = cleaned.pages[page]
        left += line in spaces(cleaned.text[start:end])
    return notices + left


def score_real(name: str, raw_pages: list[list[Line]], cleaned: CleanResult, raw_text: str,
               realpdfs: Path) -> RealScore:
    """Body recall and reference leak against GROBID's TEI (when there is one), statistics, stamps and hyphens.

    Cleaning that removes citations is compared with the TEI body without its citations, cleaning that keeps
    them with the whole TEI body.
    """
    recall = leak = None
    tei = realpdfs / f"{name}.tei.xml"
    if tei.is_file():
        paragraphs, titles = tei_reference(tei, citations=not cleaned.report.get("citations"))
        want = set().union(*(ngrams(p) for p in paragraphs))  # within paragraphs: what lies between them in
        recall = len(want & ngrams(cleaned.text)) / len(want) if want else 0.0  # the PDF (headings, floats) differs
        flat, body = squash(cleaned.text), squash(" ".join(paragraphs))
        titles = [t for t in titles if squash(t) not in body]  # a data set named in the body is no leak
        leak = sum(squash(t) in flat for t in titles) / len(titles) if titles else 0.0
    check = check_statistics(raw_text, cleaned.text)
    return RealScore(name, recall, leak, len(check.expected), check.kept, check.missing,
                     count_stamps(raw_pages, cleaned), len(_HYPHEN_RUN.findall(cleaned.text)))


def extract_real(pdfs: list[Path], backend: str) -> tuple[dict[str, list[list[Line]]], float]:
    """Each PDF's normalized lines from one backend (pdfium, or Tika in one batch), and the seconds it took."""
    start = time.perf_counter()
    if backend == "tika":
        results = {path: result for path, result in tika_extract_many(pdfs, progress=False).items()
                   if not isinstance(result, Exception)}
    else:
        results = {path: extract_pdf(path) for path in pdfs}
    pages = {path.stem: normalize_lines(result.pages, TextReport()) for path, result in results.items()}
    return pages, time.perf_counter() - start


def run_real(realpdfs: Path, backends: list[str], configs: list[tuple[str, str, CleaningOptions]]) -> None:
    """Per backend: each real PDF extracted once, cleaned each configured way, scored per paper and on average."""
    pdfs = sorted(realpdfs.glob("*.pdf"))
    n_pages = sum(page_count(p) for p in pdfs)
    for backend in backends:
        lines, extract_seconds = extract_real(pdfs, backend)
        raw_text = {name: clean_pages(pages, CleaningOptions.off()).text for name, pages in lines.items()}
        print(f"\nreal PDFs, {backend} ({len(lines)} of {len(pdfs)} PDFs, {n_pages} pages; extraction "
              f"{extract_seconds / max(n_pages, 1):.3f} s/page)")
        print(f"{'config':<18} {'paper':<24} {'body rec':>8} {'ref leak':>8} {'stats kept':>11} {'stamps':>6} "
              f"{'--':>4}")
        for config, config_backend, cleaning in configs:
            if config_backend != backend:
                continue
            start = time.perf_counter()
            scores = [score_real(name, pages, clean_pages(pages, cleaning), raw_text[name], realpdfs)
                      for name, pages in sorted(lines.items())]
            seconds = time.perf_counter() - start
            for s in scores:
                recall = "-" if s.body_recall is None else f"{s.body_recall:.3f}"
                leak = "-" if s.reference_leak is None else f"{s.reference_leak:.3f}"
                print(f"{config:<18} {s.paper:<24} {recall:>8} {leak:>8} {s.stats_kept:>5}/{s.stats_expected:<5} "
                      f"{s.stamps:>6} {s.doubled_hyphens:>4}" + (f"   missing: {s.stats_missing[:4]}"
                                                                 if s.stats_missing else ""))
            with_tei = [s for s in scores if s.body_recall is not None]
            mean = lambda values: sum(values) / len(values) if values else float("nan")  # noqa: E731
            print(f"{config:<18} {'MEAN / TOTAL':<24} {mean([s.body_recall for s in with_tei]):>8.3f} "
                  f"{mean([s.reference_leak for s in with_tei]):>8.3f} "
                  f"{sum(s.stats_kept for s in scores):>5}/{sum(s.stats_expected for s in scores):<5} "
                  f"{sum(s.stamps for s in scores):>6} {sum(s.doubled_hyphens for s in scores):>4}   "
                  f"({len(with_tei)} with TEI; cleaning {seconds / max(n_pages, 1):.3f} s/page)")


# ----------------------------------------------------------------------------------------------------------- main


def run_backend(folder_or_files, backend: str, cleaning: CleaningOptions) -> tuple[list, float]:
    start = time.perf_counter()
    documents = load_documents(folder_or_files, pdf_backend=backend, cleaning=cleaning, progress=False)
    return documents, time.perf_counter() - start


def run_toolchain(name: str, sources: dict, papers: dict, ligatures: dict, gold: dict, configs: list,
                  keep: Path | None) -> None:
    """Render the papers with one toolchain, read them back with every configuration and print one table."""
    if name not in TOOLCHAINS:
        print(f"\n{name}: unknown toolchain (choose from {', '.join(TOOLCHAINS)})")
        return
    reason = missing_tool(name)
    if reason:
        print(f"\n{name}: skipped - {reason}")
        return
    render, _ = TOOLCHAINS[name]
    with tempfile.TemporaryDirectory(prefix=f"pdf-fidelity-{name}-") as tmp:
        folder = keep / name if keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        infos = render(papers, folder, ligatures)
        print(f"\n{name}: rendered {len(infos)} of {len(papers)} papers in {time.perf_counter() - t0:.1f}s")
        extra = {"infos": infos, "gold": gold}
        files = sorted(folder / f"{pid}.pdf" for pid in infos)
        print(f"{name:<16} {'gold kept':>9} {'leaked':>8} {'char sim':>9} {'s/page':>8} {'pages':>6}")
        for config, backend, cleaning in configs:
            documents, seconds = run_backend(files, backend, cleaning)
            m = score_synthetic(documents, sources, extra, seconds)
            print(f"{config:<16} {m['gold_survival']:>9.3f} {m['leaked_boilerplate']:>8.3f} "
                  f"{m['char_similarity']:>9.3f} {m['sec_per_page']:>8.3f} {m['pages']:>6}"
                  f"   ({m['answers']} gold answers, {m['papers']} papers)")


def configurations(requested: list[str]) -> list[tuple[str, str, CleaningOptions]]:
    out = []
    for name in requested:
        if name == "pdfium-raw":
            out.append((name, "pdfium", CleaningOptions.off()))
        elif name == "tika-raw":
            out.append((name, "tika", CleaningOptions.off()))
        elif name.endswith("-keepcites"):  # all cleaning but citations: GROBID's TEI body keeps citations
            out.append((name, name.split("-")[0], CleaningOptions.disable("citations")))
        else:
            out.append((name, name, CleaningOptions()))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mlpsych", type=Path, help="folder with text.json and answers_dev.json")
    parser.add_argument("--realpdfs", type=Path, help="folder of real PDFs with GROBID .tei.xml next to them")
    parser.add_argument("--backends", default=None,
                        help="comma list of pdfium, tika, pdfium-raw, tika-raw, pdfium-keepcites, tika-keepcites "
                        "(default: all available)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N dev papers")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--toolchains", default="reportlab,latex,docx",
                        help="comma list of PDF producers for the synthetic papers: reportlab, latex (pdflatex), "
                        "docx (python-docx + LibreOffice); those whose tools are missing are skipped with a reason")
    parser.add_argument("--keep", type=Path, default=None,
                        help="write the synthetic PDFs here, one subfolder per toolchain (else a temp dir)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    jar = find_tika_jar()
    if jar is not None and jar.is_file():
        os.environ.setdefault("TIKA_APP_JAR", str(jar))
    default = ["pdfium", "pdfium-keepcites", "pdfium-raw"]
    if jar is not None and jar.is_file():
        default += ["tika", "tika-keepcites", "tika-raw"]
    configs = configurations(args.backends.split(",") if args.backends else default)

    if args.mlpsych:
        sources, papers, ligatures, gold = build_papers(args.mlpsych, args.limit, args.seed)
        for toolchain in args.toolchains.split(","):
            run_toolchain(toolchain.strip(), sources, papers, ligatures, gold, configs, args.keep)
    if args.realpdfs:
        backends = [b for b in ("pdfium", "tika") if any(c[1] == b for c in configs)]
        run_real(args.realpdfs, backends, configs)
    if not args.mlpsych and not args.realpdfs:
        parser.error("give --mlpsych and/or --realpdfs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
