"""The always-on text normalization of ingest (:mod:`mlpsych.ingest.textnorm`) and the readers that apply it."""

from __future__ import annotations

import hashlib
import json
import random
import re
import unicodedata
from pathlib import Path

import pytest

from mlpsych.documents import Document
from mlpsych.ingest.base import Line
from mlpsych.ingest.clean import normalize_unicode
from mlpsych.ingest.formats import read_jsonl, read_text_file, read_text_json
from mlpsych.ingest.textnorm import (
    TextReport,
    normalization_edits,
    normalize_json,
    normalize_lines,
    normalize_text,
    normalize_with_pages,
)


def normalized(text: str) -> tuple[str, dict]:
    report = TextReport()
    return normalize_text(text, report), report.as_dict()


# -- the rules -----------------------------------------------------------------------------------------------


def test_surrogate_pair_from_pdfium_becomes_a_plain_letter() -> None:
    assert normalized("trees \ud835\udc3e = 500") == (
        "trees K = 500", {"surrogate_pairs": 1, "math_letters": 1, "math_mapped": {"U+1D43E": "K"}})
    assert normalized("\ud83d\ude00") == ("\U0001f600", {"surrogate_pairs": 1})  # a real astral character stays


def test_math_alphanumerics_become_letters_and_digits() -> None:
    text, report = normalized("\U0001d43e \U0001d706 \U0001d7d3 \U0001d400\U0001d400 \U0001d455")  # 1D455: unassigned
    assert text == "K λ 5 AA \U0001d455"
    assert report == {"math_letters": 5, "math_mapped": {"U+1D43E": "K", "U+1D706": "λ", "U+1D7D3": "5",
                                                         "U+1D400": "A"}}


def test_lone_surrogates_and_noncharacters_become_visible_replacements() -> None:
    text, report = normalized("a\ud835b\udc3ec \ufffe\uffff\ufdd0\ufdef\U0001fffe\U0010ffff \ufffd")
    assert text == "a\ufffdb\ufffdc \ufffd\ufffd\ufffd\ufffd\ufffd\ufffd \ufffd"
    assert report == {"lone_surrogates": 2, "noncharacters": 6}  # the U+FFFD already there is not counted


def test_controls_are_removed_and_line_separators_become_newlines() -> None:
    text, report = normalized("a\x00b\x07c\x1b[0m\x7f\x80\x9f\td\r\ne\rf\x0bg\x0ch\x85i")
    assert text == "abc[0m\td\ne\nf\ng\nh\ni"
    assert report == {"controls": 10}  # CRLF is an ordinary line end, not counted


def test_result_is_nfc() -> None:
    assert normalized("e\u0301 \u212b \u1100\u1161") == ("é Å 가", {"nfc_regions": 3})
    assert normalized("e\x00\u0301") == ("é", {"controls": 1, "nfc_regions": 1})  # a removed NUL glued them


def test_text_that_needs_nothing_gives_no_edits() -> None:
    text = "Plain ASCII and accented café text, with ligature \ufb01, BOM \ufeff, RTL \u202e, private \ue000.\n\tEnd"
    assert normalization_edits(text) == []
    assert normalize_text(text) == text


def reference(text: str) -> str:
    """The rules applied to the whole string at once, the obvious way (slow; what the regions must reproduce)."""
    text = text.replace("\r\n", "\n")
    text = re.sub("[\ud800-\udbff][\udc00-\udfff]",
                  lambda m: m.group().encode("utf-16-le", "surrogatepass").decode("utf-16-le"), text)
    out = []
    for char in text:
        code = ord(char)
        if 0xD800 <= code <= 0xDFFF or 0xFDD0 <= code <= 0xFDEF or code & 0xFFFE == 0xFFFE:
            out.append("\ufffd")
        elif 0x1D400 <= code <= 0x1D7FF:
            out.append(unicodedata.normalize("NFKC", char))
        elif char in "\r\x0b\x0c\x85":
            out.append("\n")
        elif unicodedata.category(char) == "Cc" and char not in "\n\t":
            out.append("")
        else:
            out.append(char)
    return unicodedata.normalize("NFC", "".join(out))


PIECES = [  # plain text, controls, line ends, accents to compose, surrogates, math letters, non-characters, Hangul
    "a", "e", "P", " ", ".", "\n", "\t", "\r", "\r\n", "\x00", "\x1b", "\x7f", "\x85", "\x9f", "\x0c", "é", "\u0301",
    "\u0308", "\u0316", "\ud835", "\udc3e", "\ud83d", "\ude00", "\U0001d43e", "\U0001d7d3", "\U0001d455", "\ufffe",
    "\uffff", "\ufdd0", "\U0001fffe", "\U0010ffff", "\ufffd", "\u1100", "\u1161", "\u11a8", "\u212b", "\u0b47",
    "\u0b3e", "\ufeff", "\u200b", "\ue000", "\U0001f600", "ﬁ", "λ",
]


def random_texts(n: int, length: int = 30, seed: int = 13) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, length))) for _ in range(n)]


def test_regions_give_what_the_whole_string_rules_give() -> None:
    for text in random_texts(3000):
        out = normalize_text(text)
        assert out == reference(text), ascii(text)
        out.encode("utf-8")  # never raises
        assert normalize_text(out) == out  # idempotent: a re-read JSONL is not changed again


def test_page_ranges_move_with_the_text() -> None:
    rng = random.Random(7)
    for body in random_texts(500, length=12):
        pages = ["P" + "".join(rng.sample(PIECES, 6)) + body for _ in range(rng.randint(1, 4))]
        text = "".join(pages)
        ranges, start = [], 0
        for page in pages:
            ranges.append((start, start + len(page)))
            start += len(page)
        new_text, new_ranges = normalize_with_pages(text, ranges)
        assert new_text == normalize_text(text)
        assert [new_text[s:e] for s, e in new_ranges] == [normalize_text(page) for page in pages], ascii(text)


def test_a_range_edge_inside_a_changed_region_is_clamped_into_it() -> None:
    text, ranges = normalize_with_pages("ab\ud835\udc3ecd", [(0, 3), (3, 6)])  # a page break between the halves
    assert text == "abKcd" and ranges == [(0, 3), (3, 5)]


def test_lines_keep_their_geometry_and_blank_ones_go() -> None:
    report = TextReport()
    lines = [Line("A \ud835\udc3e line", 0, y=0.1, size=9.5, x0=0.1, x1=0.9, para_break=True), Line("\x00\x07", 0),
             Line("plain", 0, y=0.2)]
    (page,) = normalize_lines([lines], report)
    assert page == [Line("A K line", 0, y=0.1, size=9.5, x0=0.1, x1=0.9, para_break=True), lines[2]]
    assert report.controls == 2 and report.surrogate_pairs == 1


def test_normalize_json_reaches_keys_and_nested_values() -> None:
    value = {"note\x00": ["a\ud835", {"k": "\U0001d43e", "n": 3, "f": None}]}
    assert normalize_json(value) == {"note": ["a\ufffd", {"k": "K", "n": 3, "f": None}]}


# -- what the readers and the Document do with it ------------------------------------------------------------


def test_optional_unicode_step_keeps_replacement_characters() -> None:
    assert normalize_unicode("lost \ufffd here \ufb01") == "lost \ufffd here fi"


def test_sha256_never_raises_and_keeps_existing_keys() -> None:
    assert Document(id="a", text="caf\u00e9 \U0001f600").sha256 == hashlib.sha256("café 😀".encode()).hexdigest()
    assert len(Document(id="a", text="lone \ud835").sha256) == 64


def test_text_file_in_cesu8_is_joined_and_a_stray_nul_is_not_binary(tmp_path: Path) -> None:
    path = tmp_path / "paper.txt"
    path.write_bytes("We used \ud835\udc3e trees\x00 here.".encode("utf-8", "surrogatepass"))
    text, warnings = read_text_file(path)
    assert text == "We used \ud835\udc3e trees\x00 here." and warnings == []  # textnorm joins and removes next
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(Exception, match="not a text file"):
        read_text_file(path)
    path.write_bytes(b"\x00" * 4096)
    with pytest.raises(Exception, match="not a text file"):
        read_text_file(path)


def test_jsonl_text_pages_and_labels_are_normalized(tmp_path: Path) -> None:
    text = "Page one \U0001d43e\x00.\nPage two \ud835 here."  # JSON writes 𝐾 as a pair of escapes
    split = text.index("Page two")
    record = {"id": "p\ud835", "text": text, "pages": [[0, split], [split, len(text)]], "meta": {"n\x00": "\ud835"}}
    path = tmp_path / "texts.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(record).encode("ascii") + b"\n")  # a BOM, as Notepad saves
    (document,) = read_jsonl(path)
    assert document.id == "p\ufffd" and document.meta["n"] == "\ufffd"
    assert document.text == "Page one K.\nPage two \ufffd here."
    assert [document.text[s:e] for s, e in document.pages] == ["Page one K.\n", "Page two \ufffd here."]
    assert document.meta["cleaning"]["textnorm"] == {"lone_surrogates": 1, "controls": 1, "math_letters": 1,
                                                     "math_mapped": {"U+1D43E": "K"}}


def test_text_json_ids_and_texts_are_normalized_with_reports(tmp_path: Path) -> None:
    path = tmp_path / "text.json"
    path.write_text(json.dumps(json.dumps({"id\ud835": "We used \ud835\udc3e trees."})), encoding="ascii")
    reports: dict[str, TextReport] = {}
    assert read_text_json(path, reports) == {"id\ufffd": "We used K trees."}
    assert reports["id\ufffd"].math_letters == 1


def test_gold_is_normalized_like_the_papers() -> None:
    from mlpsych.evaluation.evaluate import gold_from_dict

    gold = gold_from_dict({"q1": {"p\ud835": [{"start": 0, "end": 1, "text": "\U0001d43e-means"}, "e\u0301"]}})
    assert gold == {"q1": {"p\ufffd": ["K-means", "é"]}}
