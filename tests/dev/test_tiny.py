"""The tiny models load through the same calls as Hub ids, mirror the real file layouts, and are reproducible."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForQuestionAnswering, AutoTokenizer

from mlpsych.dev.tiny import FAMILIES, QA_FAMILIES, build_tiny_model, build_tiny_models, corpus
from mlpsych.questions import load_question_set

QUESTION = "What software was used?"
CONTEXT = "We trained a random forest in scikit-learn (Python 3.11) on N = 312 participants; \u03b7\u00b2 = .12."

# The tokenizer files of each real Hub repo, and the files it must not have (no tokenizer.json for the encoders:
# transformers has to convert the slow files, as it does for the real checkpoints).
EXPECTED_FILES = {
    "deberta-v2": {"spm.model", "tokenizer_config.json", "added_tokens.json", "special_tokens_map.json"},
    "albert": {"spiece.model", "tokenizer_config.json", "special_tokens_map.json"},
    "electra": {"vocab.txt", "tokenizer_config.json", "special_tokens_map.json"},
    "roberta": {"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"},
    "bert": {"vocab.txt", "tokenizer_config.json", "special_tokens_map.json"},
    "llama": {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"},
}
TOKENIZER_CLASS = {
    "deberta-v2": "DebertaV2Tokenizer", "albert": "AlbertTokenizer", "electra": "ElectraTokenizer",
    "roberta": "RobertaTokenizer", "bert": "BertTokenizer", "llama": "PreTrainedTokenizerFast",
}
SPECIALS = {  # (cls, sep, pad) of the real tokenizers
    "deberta-v2": ("[CLS]", "[SEP]", "[PAD]"), "albert": ("[CLS]", "[SEP]", "<pad>"),
    "electra": ("[CLS]", "[SEP]", "[PAD]"), "roberta": ("<s>", "</s>", "<pad>"), "bert": ("[CLS]", "[SEP]", "[PAD]"),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_file_layout_mirrors_the_hub_repo(tiny_models: dict[str, Path], family: str) -> None:
    names = {p.name for p in tiny_models[family].iterdir()}
    assert EXPECTED_FILES[family] | {"config.json", "model.safetensors"} <= names
    if family != "llama":
        assert "tokenizer.json" not in names
    assert not [n for n in names if n.endswith((".bin", ".pkl", ".pickle", ".pt", ".pth", ".ckpt"))]
    config = json.loads((tiny_models[family] / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == TOKENIZER_CLASS[family]


@pytest.mark.parametrize("family", QA_FAMILIES)
def test_qa_family_loads_fast_with_offsets_and_answers(tiny_models: dict[str, Path], family: str) -> None:
    path = str(tiny_models[family])
    tok = AutoTokenizer.from_pretrained(path)
    assert tok.is_fast
    assert tok.model_max_length == 512
    cls, sep, pad = SPECIALS[family]
    assert (tok.cls_token, tok.sep_token, tok.pad_token) == (cls, sep, pad)
    enc = tok(QUESTION, CONTEXT, return_offsets_mapping=True, truncation="only_second", max_length=64)
    tokens = tok.convert_ids_to_tokens(enc["input_ids"])
    assert tokens[0] == cls and tokens[-1] == sep
    assert tok.unk_token_id not in enc["input_ids"]  # the corpus covers every character of the context
    # Offsets of context tokens point back into the context: the covered text, stripped, is non-empty and
    # the offsets are monotone.
    context_offsets = [o for o, s in zip(enc["offset_mapping"], enc.sequence_ids()) if s == 1]
    assert context_offsets[-1][1] == len(CONTEXT)
    assert all(a[0] <= b[0] for a, b in zip(context_offsets, context_offsets[1:]))
    covered = "".join(CONTEXT[s:e] for s, e in context_offsets if e > s)
    assert "scikit-learn" in covered and "312" in covered

    model = AutoModelForQuestionAnswering.from_pretrained(path, use_safetensors=True)
    # every token id has an embedding row (DeBERTa-v3 has spare rows: 128100 for 128001 tokens)
    spare = family == "deberta-v2" and len(tok) % 100 != 0
    assert model.config.vocab_size == ((len(tok) // 100 + 1) * 100 if spare else len(tok))
    assert model.config.max_position_embeddings >= 512
    batch = tok([QUESTION, QUESTION], [CONTEXT, "Too short."], padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch)
    assert out.start_logits.shape == out.end_logits.shape == batch["input_ids"].shape
    assert torch.isfinite(out.start_logits).all()
    # A full-length window fits: the position embeddings cover model_max_length.
    long = tok(QUESTION, CONTEXT * 40, truncation="only_second", max_length=512, return_tensors="pt")
    assert long["input_ids"].shape[1] == 512
    with torch.no_grad():
        assert model(**long).start_logits.shape == (1, 512)


@pytest.mark.parametrize("family", QA_FAMILIES)
def test_long_context_splits_into_overlapping_windows(tiny_models: dict[str, Path], family: str) -> None:
    """The reader's windowing call: question kept whole, context split with stride, offsets per window."""
    tok = AutoTokenizer.from_pretrained(str(tiny_models[family]))
    context = " ".join(f"Study {i} used a random forest." for i in range(60))
    enc = tok(QUESTION, context, truncation="only_second", max_length=64, stride=16,
              return_overflowing_tokens=True, return_offsets_mapping=True, padding="max_length")
    n_context = len(tok(context, add_special_tokens=False)["input_ids"])
    n_question = len(tok(QUESTION, add_special_tokens=False)["input_ids"])
    specials = tok.num_special_tokens_to_add(pair=True)
    per_window = 64 - n_question - specials
    # hand count: the first window takes per_window tokens, each later one adds per_window - stride new ones
    expected = 1 + -(-(n_context - per_window) // (per_window - 16))
    assert len(enc["input_ids"]) == expected
    assert all(len(ids) == 64 for ids in enc["input_ids"])
    assert list(enc["overflow_to_sample_mapping"]) == [0] * expected
    last = [o for o, s in zip(enc["offset_mapping"][-1], enc.sequence_ids(expected - 1)) if s == 1]
    assert last[-1][1] == len(context)


def test_llama_chat_template_and_generation(tiny_models: dict[str, Path]) -> None:
    path = str(tiny_models["llama"])
    tok = AutoTokenizer.from_pretrained(path)
    assert tok.is_fast
    assert tok.bos_token == "<|begin_of_text|>" and tok.eos_token == "<|eot_id|>"
    specials = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    assert all(len(tok.encode(s, add_special_tokens=False)) == 1 for s in specials)
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "List the software: scikit-learn, R."}], add_generation_prompt=True, tokenize=False
    )
    assert prompt == (
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nList the software: scikit-learn, R.<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    ids = tok(prompt, add_special_tokens=False, return_tensors="pt")
    assert ids["input_ids"][0, 0].item() == tok.bos_token_id
    assert tok.decode(ids["input_ids"][0]) == prompt  # byte-level BPE round-trips

    model = AutoModelForCausalLM.from_pretrained(path, use_safetensors=True)
    assert model.config.num_key_value_heads == 2
    eot = tok.convert_tokens_to_ids("<|eot_id|>")
    assert eot in model.generation_config.eos_token_id
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=4, min_new_tokens=4, do_sample=False, pad_token_id=eot)
    assert out.shape == (1, ids["input_ids"].shape[1] + 4)


def test_same_seed_gives_identical_files_and_other_seed_other_weights(tmp_path: Path) -> None:
    def digests(folder: Path) -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}

    for family in ("deberta-v2", "bert", "roberta", "llama"):
        first = digests(build_tiny_model(family, tmp_path / f"{family}-a", seed=3))
        second = digests(build_tiny_model(family, tmp_path / f"{family}-b", seed=3))
        other = digests(build_tiny_model(family, tmp_path / f"{family}-c", seed=4))
        assert first == second, family
        assert other["model.safetensors"] != first["model.safetensors"]
        assert {k: v for k, v in other.items() if k not in ("model.safetensors", "mlpsych_tiny.json")} == {
            k: v for k, v in first.items() if k not in ("model.safetensors", "mlpsych_tiny.json")
        }  # tokenizers do not depend on the weight seed


def test_build_tiny_models_reuses_complete_dirs_and_repairs_broken_ones(tmp_path: Path) -> None:
    paths = build_tiny_models(tmp_path, ["bert"])
    weights = paths["bert"] / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    assert build_tiny_models(tmp_path, ["bert"]) == {"bert": tmp_path / "bert"}
    assert weights.stat().st_mtime_ns == stamp  # reused, not rebuilt
    (paths["bert"] / "vocab.txt").unlink()  # an interrupted or damaged build is rebuilt
    build_tiny_models(tmp_path, ["bert"])
    assert (paths["bert"] / "vocab.txt").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no scratch dirs left behind


def test_tiny_models_built_into_a_shared_folder_are_readable_by_the_colleagues_sharing_it(tmp_path: Path) -> None:
    """`mlpsych dev tiny-models /lab/tiny` made each model folder its builder's only (`tempfile.mkdtemp`, 0700) and
    its weights too (safetensors writes 0600): a colleague's run on the lab's demo models could not load them. They
    now have the permissions the umask gives anything new."""
    import os
    import stat

    umask = os.umask(0o002)  # a lab's group folder
    try:
        folder = build_tiny_models(tmp_path, ["bert"])["bert"]
    finally:
        os.umask(umask)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o775
    assert {f.name: stat.S_IMODE(f.stat().st_mode) for f in folder.iterdir()} == {
        f.name: 0o664 for f in folder.iterdir()}


def test_unknown_family_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown model family 'gpt2'"):
        build_tiny_model("gpt2", tmp_path)


def test_question_file_points_at_tiny_models(tiny_questions: Path, tiny_models: dict[str, Path]) -> None:
    questions = load_question_set(tiny_questions)
    by_id = {q.id: q for q in questions.questions}
    assert by_id["q1"].models == [str(tiny_models["deberta-v2"]), str(tiny_models["albert"])]
    assert by_id["q2"].models == [str(tiny_models["electra"]), str(tiny_models["roberta"])]
    assert by_id["q4"].models == [str(tiny_models["deberta-v2"])]
    assert by_id["q1"].normalize is not None and by_id["q1"].normalize.model == str(tiny_models["llama"])
    assert by_id["q3"].normalize is None
    assert by_id["q4"].bridge_from == "q1"
    # everything else is kept from questions/mlpsych.yaml
    assert by_id["q1"].top_k == 30 and by_id["q3"].top_k == 30 and by_id["q4"].top_k == 5
    assert by_id["q1"].normalize.reference_prompt.startswith("Extract the detailed machine learning")


def test_corpus_reads_like_the_papers() -> None:
    sentences = corpus()
    assert 300 <= len(sentences) <= 2000
    assert len(set(sentences)) > 0.9 * len(sentences)
    text = " ".join(sentences)
    for term in ("random forest", "support vector machines (SVM)", "XGBoost", "scikit-learn", "caret", "N = 312"):
        assert term in text


def test_examples_dir_fixture(examples_dir: Path) -> None:
    assert examples_dir.name == "examples" and examples_dir.is_dir()
