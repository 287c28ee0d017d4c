"""benchmarks/deberta_attention.py: the forward's time grouped by kind of operation, and the gather at DeBERTa's
shape, on a tiny DeBERTa-v3 loaded as the readers load it."""

from __future__ import annotations

from pathlib import Path

from tests.benchmarks.scripts import load_script

deberta_attention = load_script("deberta_attention")


def test_operations_fall_into_their_groups() -> None:
    assert deberta_attention.group("aten::addmm") == "matrix products"
    assert deberta_attention.group("aten::bmm") == "matrix products"
    assert deberta_attention.group("aten::gather") == "gather"
    assert deberta_attention.group("aten::copy_") == "copies"
    assert deberta_attention.group("aten::softmax") == "other"


def test_the_breakdown_of_a_tiny_deberta_covers_every_dtype_and_the_products(tmp_path: Path) -> None:
    from transformers import AutoModelForQuestionAnswering

    model = AutoModelForQuestionAnswering.from_pretrained(
        deberta_attention.tiny_model("deberta-v2", "tiny", tmp_path)).eval()
    rows = deberta_attention.forward_breakdown(model, windows=1, repeat=1)
    assert set(rows) == {"fp32", "bf16"}
    for row in rows.values():
        assert row["seconds"] > 0 and row["matrix products"] > 0 and row["gather"] > 0
    gathers = deberta_attention.gather_seconds(batch_heads=2, repeat=1)
    assert set(gathers) == {"fp32", "bf16"}
    assert all(v > 0 for row in gathers.values() for v in row.values())
