"""Tiny random-weight models of the real model families, built offline in seconds.

Nothing in this project may download weights, yet the code that breaks in real runs is the *loading* code:
tokenizer conversion from sentencepiece / vocab files, special tokens, chat templates, safetensors. So the
tiny models here mirror the file layout of the Hub repos they stand in for, and are loaded through exactly the
same calls as a Hub id (``AutoTokenizer.from_pretrained(path)``, ``AutoModelForQuestionAnswering`` /
``AutoModelForCausalLM.from_pretrained(path, use_safetensors=True)``):

==============  =====================================  ============================================
family          stands in for                          tokenizer files (as in the real repo)
==============  =====================================  ============================================
deberta-v2      deepset/deberta-v3-large-squad2        spm.model (sentencepiece unigram) + added [MASK]
albert          ahotrod/albert_xxlargev1_squad2_512    spiece.model (sentencepiece unigram, lowercased)
electra         ahotrod/electra_large_...squad2_512    vocab.txt (WordPiece, lowercased)
roberta         deepset/roberta-large-squad2           vocab.json + merges.txt (byte-level BPE)
bert            a BERT SQuAD2 checkpoint               vocab.txt (WordPiece, lowercased)
llama           meta-llama/Meta-Llama-3-8B-Instruct    tokenizer.json (byte-level BPE, Llama-3 specials,
                                                       chat template), generation_config.json
==============  =====================================  ============================================

The encoder families ship no ``tokenizer.json``: transformers must convert the slow files into a fast
tokenizer (offsets are needed by the reader), which is what happens with the real repos. Tokenizers are
trained on the spot on a small in-module corpus written in the style of social-science papers that use
machine learning, so tokenizing real papers gives sensible pieces. Weights are random but deterministic
(``torch.manual_seed(seed)``): same seed, byte-identical files.
"""

from __future__ import annotations

import io
import json
import logging
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from mlpsych.files import readable_as_new, work_folder
from mlpsych.models import RANDOM_WEIGHTS_MARKER

if TYPE_CHECKING:
    from transformers import PretrainedConfig

logger = logging.getLogger(__name__)

FAMILIES: tuple[str, ...] = ("deberta-v2", "albert", "electra", "roberta", "bert", "llama")
QA_FAMILIES: tuple[str, ...] = tuple(f for f in FAMILIES if f != "llama")

# Bumped whenever the builder output changes, so a cached directory from an older builder is rebuilt.
BUILD_VERSION = 1
MARKER_FILE = RANDOM_WEIGHTS_MARKER
WEIGHTS_FILE = "model.safetensors"
MODEL_MAX_LENGTH = 512
VOCAB_SIZE = 1000

# The tokenizer files each family's Hub repo ships (a directory without them is incomplete).
TOKENIZER_FILES: dict[str, tuple[str, ...]] = {
    "deberta-v2": ("spm.model", "tokenizer_config.json"),
    "albert": ("spiece.model", "tokenizer_config.json"),
    "electra": ("vocab.txt", "tokenizer_config.json"),
    "roberta": ("vocab.json", "merges.txt", "tokenizer_config.json"),
    "bert": ("vocab.txt", "tokenizer_config.json"),
    "llama": ("tokenizer.json", "tokenizer_config.json"),
}

# Hub ids of the real defaults in questions/mlpsych.yaml -> tiny family standing in for them.
HUB_TO_FAMILY: dict[str, str] = {
    "deepset/deberta-v3-large-squad2": "deberta-v2",
    "ahotrod/albert_xxlargev1_squad2_512": "albert",
    "ahotrod/electra_large_discriminator_squad2_512": "electra",
    "deepset/roberta-large-squad2": "roberta",
    "meta-llama/Meta-Llama-3-8B-Instruct": "llama",
}

# ----------------------------------------------------------------------------------------------------------
# Corpus: a few hundred sentences in the style of the papers the project reads.
# ----------------------------------------------------------------------------------------------------------

_METHODS = [
    "random forest", "random forests", "support vector machines (SVM)", "a support vector machine", "XGBoost",
    "extreme gradient boosting (XGB)", "gradient boosted trees", "LASSO regression", "elastic net",
    "ridge regression", "logistic regression", "k-nearest neighbors (k-NN)", "naive Bayes",
    "latent Dirichlet allocation (LDA)", "topic modeling", "BERT", "RoBERTa", "word embeddings", "word2vec",
    "GloVe vectors", "a convolutional neural network", "a recurrent neural network (LSTM)",
    "deep neural networks", "k-means clustering", "hierarchical clustering", "principal component analysis",
    "sentiment analysis", "LIWC dictionaries", "decision trees", "classification and regression trees (CART)",
    "structural topic models (STM)", "a multilayer perceptron", "transformer language models",
]
_SOFTWARE = [
    "scikit-learn", "sklearn", "R", "Python", "caret", "the caret package", "glmnet", "randomForest",
    "xgboost", "TensorFlow", "Keras", "PyTorch", "the transformers library", "NLTK", "spaCy", "gensim",
    "the stm package", "quanteda", "tidytext", "MATLAB", "SPSS", "Stata", "lme4", "Mplus", "LIWC-22",
]
_TOPICS = [
    "depression", "anxiety", "well-being", "prejudice", "personality traits", "political attitudes",
    "moral judgments", "loneliness", "suicidal ideation", "life satisfaction", "social media use",
    "self-esteem", "job satisfaction", "emotion regulation", "trust in science", "stereotypes",
    "burnout", "empathy", "racial bias", "vaccine hesitancy", "conspiracy beliefs", "narcissism",
    "academic performance", "relationship satisfaction", "mindfulness", "impulsivity", "hate speech",
]
_POPULATIONS = [
    "participants", "undergraduate students", "adolescents", "adults recruited via Prolific",
    "MTurk workers", "patients", "employees", "respondents", "children and their parents", "older adults",
]
_TEMPLATES = [
    "We trained {method} on data from N = {n} {pop} to predict {topic}.",
    "Analyses were conducted in {soft} (version {v}) using {method}.",
    "To examine whether {topic} could be predicted from text, we applied {method} with {k}-fold cross-validation.",
    "A model based on {method} was implemented with {soft} and tuned by grid search over {k} folds.",
    "Participants ({n} women, {m} men; mean age = {age}, SD = {sd}) completed measures of {topic}.",
    "Our research question was whether {topic} is associated with {topic2} among {pop}.",
    "Study {s} (N = {n}) tested if {method} outperforms {method2} in predicting {topic}.",
    "Model performance was evaluated with the area under the curve (AUC = .{auc}) and accuracy of {acc}%.",
    "We used {soft} and {soft2} for preprocessing, tokenization, and feature extraction.",
    "Open-ended responses were coded with {method}, and agreement with human coders was high (kappa = .{auc}).",
    "Compared with {method2}, {method} explained {acc}% of the variance in {topic} (R2 = .{r2}).",
    "Hyperparameters of {method} were selected by nested cross-validation in {soft}.",
    "The sample size of {n} {pop} was determined by an a priori power analysis (alpha = .05, power = .80).",
    "Feature importance from {method} showed that {topic} was the strongest predictor, t({df}) = {t}, p < .001.",
    "Texts were lemmatized in {soft}; stop words were removed before fitting {method}.",
    "Machine learning can help psychologists answer questions about {topic} in large samples.",
    "In line with preregistration, we compared {method} and {method2} on a held-out test set of {m} {pop}.",
    "A total of {n} {pop} took part; {m} were excluded for failing attention checks.",
    "We used {method} to classify {pop} with high versus low {topic} [{cite}].",
    "The code and data are available on the Open Science Framework (https://osf.io/{osf}/).",
    "Abstract. Recent advances in natural language processing (NLP) allow researchers to study {topic} at scale.",
    "Table {s} reports precision, recall, and F1 scores of {method} for each category of {topic}.",
    "Posts from Reddit and Twitter (n = {n}) were collected between 2015 and 2021 and analyzed with {method}.",
    "Correlations between predicted and self-reported {topic} were moderate (r = .{r2}, 95% CI [.{m}, .{auc}]).",
    "We address the following research question: can {method} detect {topic} from short essays written by {pop}?",
    "Limitations. Our sample of {pop} was not representative, and {method} may overfit small samples.",
    "Discussion: these findings suggest that {topic} and {topic2} share linguistic markers.",
    "Items were rated on a 7-point Likert scale (1 = strongly disagree, 7 = strongly agree); Cronbach's alpha was .{auc}.",
    "Figure {s} shows the confusion matrix of {method} on the validation data.",
    "Data were split into training (80%) and test (20%) sets, stratified by {topic}.",
    "The {soft} implementation of {method} was run with default settings unless noted otherwise.",
    "Method. Participants read vignettes describing {topic} and answered open questions about their feelings.",
    "Results of the multilevel model (estimated in {soft}) are displayed in Table {s}; effects were small (d = 0.{r2}).",
    "Keywords: machine learning, {topic}, {method}, text analysis, psychology",
]
# Every printable ASCII character plus symbols common in papers, so no character of a real paper is unknown.
_CHARSET_LINES = [
    "".join(chr(c) for c in range(33, 127)),
    "Statistics: \u03b1 = .05, \u03b2 = 0.31, \u03b7\u00b2 = .12, \u03c7\u00b2(2) = 8.4, \u2264 \u2265 \u00b1 \u00d7 \u2212 \u2013 \u2014",
    "Quotes \u201cquoted\u201d and \u2018single\u2019 \u2026 na\u00efve caf\u00e9 M\u00fcller \u00e9t\u00e9 \u00c5 \u00f8 \u00df \u00b0 \u00a7",
]


def corpus(n_sentences: int = 1200) -> list[str]:
    """The training corpus for the tiny tokenizers (fixed: it does not depend on the weight seed)."""
    rng = random.Random(1234)
    sentences: list[str] = []
    for i in range(n_sentences):
        template = _TEMPLATES[i % len(_TEMPLATES)]
        sentences.append(
            template.format(
                method=rng.choice(_METHODS), method2=rng.choice(_METHODS), soft=rng.choice(_SOFTWARE),
                soft2=rng.choice(_SOFTWARE), topic=rng.choice(_TOPICS), topic2=rng.choice(_TOPICS),
                pop=rng.choice(_POPULATIONS), n=rng.choice([312, 1024, 87, 450, 2150, 198, 640, rng.randint(50, 3000)]),
                m=rng.randint(10, 400), age=f"{rng.uniform(18, 60):.2f}", sd=f"{rng.uniform(1, 15):.2f}",
                k=rng.choice([5, 10]), v=f"{rng.randint(1, 4)}.{rng.randint(0, 9)}.{rng.randint(0, 3)}",
                s=rng.randint(1, 4), auc=rng.randint(60, 95), acc=rng.randint(55, 92), r2=rng.randint(10, 60),
                df=rng.randint(80, 900), t=f"{rng.uniform(2, 9):.2f}", osf="".join(rng.choices("abcdefghjk2345", k=5)),
                cite=rng.randint(1, 60),
            )
        )
    return sentences + _CHARSET_LINES


# ----------------------------------------------------------------------------------------------------------
# Tokenizers, written in the layout of the real repos.
# ----------------------------------------------------------------------------------------------------------


def _write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")


def _write_tokenizer_files(out: Path, specials: dict[str, object], **config: object) -> None:
    """``special_tokens_map.json`` and ``tokenizer_config.json`` (the specials plus ``config``), as Hub repos have."""
    _write_json(out / "special_tokens_map.json", specials)
    _write_json(out / "tokenizer_config.json", {**specials, **config})


def _mask_token(content: str) -> dict[str, object]:
    """A mask token that swallows the space before it, as ALBERT's and RoBERTa's are saved."""
    return {"content": content, "lstrip": True, "normalized": False, "rstrip": False, "single_word": False}


def _deberta_v3_files(out: Path, model: bytes) -> int:
    """DeBERTa-v3's files around a trained ``spm.model`` ([MASK] added after its pieces); the tokenizer's size."""
    (out / "spm.model").write_bytes(model)
    size = _spm_size(model)
    specials = {"bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "[UNK]", "sep_token": "[SEP]",
                "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]"}
    _write_json(out / "added_tokens.json", {"[MASK]": size})
    _write_tokenizer_files(out, specials, tokenizer_class="DebertaV2Tokenizer", do_lower_case=False,
                           split_by_punct=False, vocab_type="spm", model_max_length=MODEL_MAX_LENGTH, sp_model_kwargs={})
    return size + 1


def _wordpiece_files(out: Path, tokenizer_class: str) -> None:
    """BERT/ELECTRA's files beside a ``vocab.txt`` (lowercased WordPiece)."""
    specials = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
                "mask_token": "[MASK]"}
    _write_tokenizer_files(out, specials, tokenizer_class=tokenizer_class, do_lower_case=True, strip_accents=None,
                           tokenize_chinese_chars=True, model_max_length=MODEL_MAX_LENGTH)


def _train_sentencepiece(sentences: list[str], vocab_size: int = VOCAB_SIZE, **options: object) -> bytes:
    """A unigram sentencepiece model trained in memory (single thread, so the bytes are reproducible)."""
    import sentencepiece as spm

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=buffer, vocab_size=vocab_size, model_type="unigram",
        character_coverage=1.0, num_threads=1, minloglevel=2, hard_vocab_limit=False, **options,
    )
    return buffer.getvalue()


def _deberta_tokenizer(out: Path, sentences: list[str] | None = None, vocab_size: int = VOCAB_SIZE) -> int:
    """DeBERTa-v3: spm.model with [PAD]=0 [CLS]=1 [SEP]=2 [UNK]=3; [MASK] is an added token after the vocab (trained
    on the tiny corpus, or on ``sentences`` with a larger vocabulary for speed benchmarks)."""
    # transformers 5 converts spm.model with an NFC normalizer only, so train on the raw (identity) text:
    # with sentencepiece's default NFKC, characters such as "²" would be folded away and come out as [UNK].
    model = _train_sentencepiece(
        sentences or corpus(), vocab_size, pad_id=0, bos_id=1, eos_id=2, unk_id=3, normalization_rule_name="identity",
        pad_piece="[PAD]", bos_piece="[CLS]", eos_piece="[SEP]", unk_piece="[UNK]",
    )
    size = _deberta_v3_files(out, model)
    # Like the real checkpoint (128100 embedding rows for 128001 tokens) the embedding matrix is larger than
    # the tokenizer, so code that assumes len(tokenizer) == vocab_size fails here as it would in a real run.
    return -(-size // 100) * 100


def _albert_tokenizer(out: Path, sentences: list[str] | None = None, vocab_size: int = VOCAB_SIZE) -> int:
    """ALBERT: lowercased spiece.model with <pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4 (trained on the tiny corpus, or
    on ``sentences`` with a real-size vocabulary for speed benchmarks)."""
    model = _train_sentencepiece(
        [s.lower() for s in sentences or corpus()], vocab_size, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
        pad_piece="<pad>", unk_piece="<unk>", control_symbols=["[CLS]", "[SEP]", "[MASK]"],
    )
    (out / "spiece.model").write_bytes(model)
    specials = {"bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "<unk>", "sep_token": "[SEP]",
                "pad_token": "<pad>", "cls_token": "[CLS]", "mask_token": _mask_token("[MASK]")}
    _write_tokenizer_files(out, specials, tokenizer_class="AlbertTokenizer", do_lower_case=True, keep_accents=False,
                           remove_space=True, model_max_length=MODEL_MAX_LENGTH)
    return _spm_size(model)


def _spm_size(model: bytes) -> int:
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_proto=model).get_piece_size()


def _wordpiece_tokenizer(out: Path, tokenizer_class: str) -> int:
    """BERT / ELECTRA (uncased): vocab.txt of whole-word pieces and ``##`` continuations, trained with ``tokenizers``.

    ``tokenizers``' WordPiece trainer is not reproducible across processes (it numbers the ``##`` symbols in
    hash-map order, so ties between equally frequent merges fall differently), and a vocabulary that changes
    from run to run would make tiny-model outputs flaky. So the merges are learned by its BPE trainer
    (deterministic: the alphabet is sorted) with an explicit word-start marker, then written as WordPiece:
    ``▁word`` -> ``word``, ``piece`` -> ``##piece``.
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    marker = "\u2581"
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=None, clean_text=True)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.BertPreTokenizer(),
        pre_tokenizers.Metaspace(replacement=marker, prepend_scheme="always", split=True),
    ])
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    learned = [piece for piece, _ in sorted(tok.get_vocab().items(), key=lambda item: item[1])]
    pieces: dict[str, None] = dict.fromkeys(specials)
    alphabet = [p for p in learned if len(p) == 1 and p != marker]
    pieces.update(dict.fromkeys(alphabet))  # every character may start a word ...
    pieces.update(dict.fromkeys(f"##{c}" for c in alphabet))  # ... or continue one
    for piece in learned:
        if piece in specials or piece == marker or len(piece) == 1:
            continue
        pieces[piece[1:] if piece.startswith(marker) else f"##{piece}"] = None
    vocab = list(pieces)[:VOCAB_SIZE]
    (out / "vocab.txt").write_text("".join(f"{piece}\n" for piece in vocab), encoding="utf-8")
    _wordpiece_files(out, tokenizer_class)
    return len(vocab)


def _roberta_tokenizer(out: Path, sentences: list[str] | None = None, vocab_size: int = VOCAB_SIZE) -> int:
    """RoBERTa: byte-level BPE in vocab.json + merges.txt; <s>=0 <pad>=1 </s>=2 <unk>=3, <mask> last (trained on the
    tiny corpus, or on ``sentences`` with a real-size vocabulary for speed benchmarks)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - 1, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(sentences or corpus(), trainer=trainer)
    with tempfile.TemporaryDirectory() as tmp:
        tok.model.save(tmp)
        vocab = json.loads((Path(tmp) / "vocab.json").read_text(encoding="utf-8"))
        shutil.copyfile(Path(tmp) / "merges.txt", out / "merges.txt")
    vocab["<mask>"] = len(vocab)
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    specials = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "sep_token": "</s>",
                "pad_token": "<pad>", "cls_token": "<s>", "mask_token": _mask_token("<mask>")}
    _write_tokenizer_files(out, specials, tokenizer_class="RobertaTokenizer", add_prefix_space=False, errors="replace",
                           trim_offsets=True, model_max_length=MODEL_MAX_LENGTH)
    return len(vocab)


# Llama 3's pre-tokenization pattern (contractions, letter runs, 1-3 digit groups, punctuation, whitespace).
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Same relative order as ids 128000-128009 of Meta-Llama-3-8B-Instruct.
LLAMA_SPECIALS = (
    "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
    "<|reserved_special_token_2|>", "<|reserved_special_token_3|>", "<|start_header_id|>", "<|end_header_id|>",
    "<|reserved_special_token_4|>", "<|eot_id|>",
)
LLAMA_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)


def _llama_tokenizer(out: Path) -> int:
    """Llama 3: a single tokenizer.json (byte-level BPE), special tokens after the vocab, chat template."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(_LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False, trim_offsets=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in LLAMA_SPECIALS])
    bos = "<|begin_of_text|>"
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(
            single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1",
            special_tokens=[(bos, tok.token_to_id(bos))],
        ),
    ])
    tok.save(str(out / "tokenizer.json"))
    _write_tokenizer_files(out, {"bos_token": bos, "eos_token": "<|eot_id|>"}, tokenizer_class="PreTrainedTokenizerFast",
                           clean_up_tokenization_spaces=False, model_input_names=["input_ids", "attention_mask"],
                           model_max_length=8192, chat_template=LLAMA_CHAT_TEMPLATE)
    return tok.get_vocab_size(with_added_tokens=True)


# ----------------------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------------------

_ENCODER = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                max_position_embeddings=MODEL_MAX_LENGTH)


def _qa_config(family: str, vocab_size: int) -> PretrainedConfig:
    """A tiny config with the architectural switches of the real checkpoint (they choose the code paths)."""
    import transformers as tf

    if family == "deberta-v2":
        return tf.DebertaV2Config(
            vocab_size=vocab_size, **_ENCODER, relative_attention=True, pos_att_type=["p2c", "c2p"],
            position_buckets=256, max_relative_positions=-1, norm_rel_ebd="layer_norm", share_att_key=True,
            position_biased_input=False, type_vocab_size=0, pad_token_id=0, hidden_act="gelu",
        )
    if family == "albert":
        return tf.AlbertConfig(
            vocab_size=vocab_size, embedding_size=16, **_ENCODER, num_hidden_groups=1, inner_group_num=1,
            pad_token_id=0, bos_token_id=2, eos_token_id=3, hidden_act="gelu_new",
        )
    if family == "electra":
        return tf.ElectraConfig(vocab_size=vocab_size, embedding_size=32, **_ENCODER, pad_token_id=0)
    if family == "roberta":
        # RoBERTa offsets positions by padding_idx + 1, hence 514 position embeddings for 512 tokens.
        encoder = {**_ENCODER, "max_position_embeddings": MODEL_MAX_LENGTH + 2}
        return tf.RobertaConfig(
            vocab_size=vocab_size, **encoder, type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        )
    if family == "bert":
        return tf.BertConfig(vocab_size=vocab_size, **_ENCODER, pad_token_id=0)
    raise ValueError(f"unknown QA family {family!r}")


def _llama_config(vocab_size: int, out: Path) -> PretrainedConfig:
    import transformers as tf

    tok = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    ids = {t["content"]: t["id"] for t in tok["added_tokens"]}
    return tf.LlamaConfig(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
        tie_word_embeddings=False, bos_token_id=ids["<|begin_of_text|>"], eos_token_id=ids["<|eot_id|>"],
    )


def _save_model(family: str, config: PretrainedConfig, out: Path, seed: int) -> None:
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    auto = tf.AutoModelForCausalLM if family == "llama" else tf.AutoModelForQuestionAnswering
    model = auto.from_config(config, dtype=torch.float32)
    bars_on = tf.utils.logging.is_progress_bar_enabled()
    tf.utils.logging.disable_progress_bar()  # a "writing shards" bar per tiny model is noise
    try:
        model.save_pretrained(out, safe_serialization=True)
    finally:
        if bars_on:
            tf.utils.logging.enable_progress_bar()
    readable_as_new(out.glob("*.safetensors"))  # a lab's demo folder is shared
    if family == "llama":
        gen = tf.GenerationConfig(
            bos_token_id=config.bos_token_id,
            eos_token_id=[_added_id(out, "<|end_of_text|>"), _added_id(out, "<|eot_id|>")],
            do_sample=True, temperature=0.6, top_p=0.9,
        )
        gen.save_pretrained(out)


def _added_id(out: Path, content: str) -> int:
    tok = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    return next(t["id"] for t in tok["added_tokens"] if t["content"] == content)


# Each builds a family's tokenizer files into a folder and returns the vocabulary size; DeBERTa's, ALBERT's and
# RoBERTa's also take sentences and a vocabulary size to train on (build_model_with_config's real-size stand-ins).
_TOKENIZER_BUILDERS: dict[str, Callable[..., int]] = {
    "deberta-v2": _deberta_tokenizer,
    "albert": _albert_tokenizer,
    "electra": lambda out: _wordpiece_tokenizer(out, "ElectraTokenizer"),
    "roberta": _roberta_tokenizer,
    "bert": lambda out: _wordpiece_tokenizer(out, "BertTokenizer"),
    "llama": _llama_tokenizer,
}


# ----------------------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------------------


def build_tiny_model(family: str, out_dir: Path, *, seed: int = 0) -> Path:
    """Write a tiny random-weight model of ``family`` (tokenizer + config + safetensors) into ``out_dir``."""
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r} (choose from: {', '.join(FAMILIES)})")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    vocab_size = _TOKENIZER_BUILDERS[family](out)
    config = _llama_config(vocab_size, out) if family == "llama" else _qa_config(family, vocab_size)
    _save_model(family, config, out, seed)
    _write_json(out / MARKER_FILE, {"family": family, "seed": seed, "version": BUILD_VERSION})
    logger.info("built tiny %s model in %s (%.2f s)", family, out, time.perf_counter() - started)
    return out


def is_complete(model_dir: Path, family: str, *, seed: int = 0) -> bool:
    """True when ``model_dir`` holds a finished build of ``family`` by this builder version."""
    marker = model_dir / MARKER_FILE
    needed = ("config.json", WEIGHTS_FILE, *TOKENIZER_FILES[family])
    if not marker.is_file() or not all((model_dir / name).is_file() for name in needed):
        return False
    try:
        info = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return info == {"family": family, "seed": seed, "version": BUILD_VERSION}


def build_tiny_models(out_dir: Path, families: Iterable[str] = FAMILIES) -> dict[str, Path]:
    """Tiny models under ``out_dir/<family>``; a complete earlier build is reused, so repeat calls are instant.

    Each model is built in a scratch directory and renamed into place, so parallel test sessions sharing
    ``out_dir`` never see a half-written model.
    """
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for family in families:
        target = root / family
        if not is_complete(target, family):
            _build_atomically(family, target)
        paths[family] = target
    return paths


def _build_atomically(family: str, target: Path) -> None:
    scratch = work_folder(target.parent, f".{family}-")  # the umask's permissions, as the models' folder has
    try:
        build_tiny_model(family, scratch)
        if target.exists():
            if is_complete(target, family):  # another process finished first
                return
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.replace(scratch, target)
        except OSError:
            if not is_complete(target, family):
                raise
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)


def write_tiny_question_file(out_dir: Path, models: dict[str, Path]) -> Path:
    """questions/mlpsych.yaml with every Hub id replaced by the path of the tiny model standing in for it."""
    from mlpsych.questions import dump_question_set, load_question_set

    source = load_question_set("mlpsych")
    questions = []
    for q in source.questions:
        local = [str(models[_family_of(m)]) for m in q.models]
        update: dict[str, object] = {"models": local}
        if q.normalize is not None:
            update["normalize"] = q.normalize.model_copy(update={"model": str(models["llama"])})
        questions.append(q.model_copy(update=update))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "questions.yaml"
    description = (f"The {source.name} library's questions read by tiny random-weight models built on this machine "
                   "(the demo models): their answers are meaningless; they show how the tool works, offline.")
    dump_question_set(source.model_copy(update={"questions": questions, "name": f"{source.name}-tiny",
                                                "description": description}), path)
    load_question_set(path)  # validates what was written
    return path


def _family_of(model_id: str) -> str:
    try:
        return HUB_TO_FAMILY[model_id]
    except KeyError:
        raise ValueError(f"no tiny stand-in for model {model_id!r} (known: {', '.join(HUB_TO_FAMILY)})") from None


def main(argv: list[str] | None = None) -> None:
    """``python -m mlpsych.dev.tiny OUT_DIR``: build the tiny models (and their question file) for notebooks or demos."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m mlpsych.dev.tiny", description=main.__doc__)
    parser.add_argument("out_dir", type=Path, help="folder that receives one sub-folder per family")
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    models = build_tiny_models(args.out_dir, args.families)
    for family, path in models.items():
        logger.info("%-10s %s", family, path)
    if set(HUB_TO_FAMILY.values()) <= set(models):
        logger.info("questions  %s", write_tiny_question_file(args.out_dir, models))


if __name__ == "__main__":
    main()


# ----------------------------------------------------------------------------------------------------------
# Random-weight models in the real architectures (for speed benchmarks: same shapes, same cost per window)
# ----------------------------------------------------------------------------------------------------------

# Architecture of the real checkpoints (their config.json values that set the cost of a window).
REAL_SIZES: dict[tuple[str, str], dict[str, object]] = {
    ("deberta-v2", "large"): dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                  intermediate_size=4096, vocab_size=128100),
    ("deberta-v2", "base"): dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                 intermediate_size=3072, vocab_size=128100),
    ("electra", "large"): dict(hidden_size=1024, embedding_size=1024, num_hidden_layers=24, num_attention_heads=16,
                               intermediate_size=4096, vocab_size=30522),
    ("electra", "base"): dict(hidden_size=768, embedding_size=768, num_hidden_layers=12, num_attention_heads=12,
                              intermediate_size=3072, vocab_size=30522),
    ("roberta", "large"): dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                               intermediate_size=4096, vocab_size=50265),
    ("roberta", "base"): dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                              intermediate_size=3072, vocab_size=50265),
    ("bert", "minilm-l6"): dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                                intermediate_size=1536, vocab_size=30522),
    ("bert", "minilm-l12"): dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=12,  # minilm-uncased-squad2
                                 intermediate_size=1536, vocab_size=30522),
    ("albert", "xxlarge"): dict(hidden_size=4096, embedding_size=128, num_hidden_layers=12, num_attention_heads=64,
                                intermediate_size=16384, vocab_size=30000),
}


def _bert_uncased_vocab(out: Path, tokenizer_class: str) -> int | None:
    """The real BERT-uncased WordPiece vocabulary (ELECTRA's and MiniLM's exactly), from the offline MiniLM package
    if present."""
    from mlpsych.embeddings import bundled_minilm_dir

    folder = bundled_minilm_dir()
    if folder is None or not (folder / "vocab.txt").is_file():
        return None
    shutil.copyfile(folder / "vocab.txt", out / "vocab.txt")
    _wordpiece_files(out, tokenizer_class)
    return sum(1 for _ in (out / "vocab.txt").open(encoding="utf-8"))


def build_model_with_config(family: str, out_dir: Path, size: str = "large", *, seed: int = 0,
                            tokenizer_texts: list[str] | None = None) -> Path:
    """A random-weight QA model with the real architecture of ``family``/``size`` (e.g. DeBERTa-v3-large).

    Weights are random, so answers are noise, but the cost of reading a window is the real one: for speed
    benchmarks. The tokenizer: ELECTRA and BERT (MiniLM) get the real BERT-uncased vocabulary when the offline
    MiniLM package is installed; DeBERTa, ALBERT and RoBERTa get their kind of tokenizer trained on
    ``tokenizer_texts`` when given (so a paper takes about as many tokens as with the real vocabularies), else the
    tiny one (more tokens per word than the real one). The embedding matrix has the real vocabulary size.
    """
    key = (family, size)
    if key not in REAL_SIZES:
        raise ValueError(f"no real configuration for {family} {size} (known: "
                         f"{', '.join(f'{f} {s}' for f, s in REAL_SIZES)})")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    tokens = None
    if family in ("electra", "bert"):
        tokens = _bert_uncased_vocab(out, "ElectraTokenizer" if family == "electra" else "BertTokenizer")
    elif family in ("deberta-v2", "albert", "roberta") and tokenizer_texts:
        sentences = [s for t in tokenizer_texts for s in t.split(". ") if s.strip()]
        # DeBERTa-v3's 128k pieces cannot be learnt from a few papers; 32k gives about its tokens per word
        vocab = 32000 if family == "deberta-v2" else int(REAL_SIZES[key]["vocab_size"])
        tokens = _TOKENIZER_BUILDERS[family](out, sentences, vocab)
    if tokens is None:
        tokens = _TOKENIZER_BUILDERS[family](out)
    config = _qa_config(family, tokens)
    real = dict(REAL_SIZES[key])
    real["vocab_size"] = max(int(real["vocab_size"]), tokens)
    for name, value in real.items():
        setattr(config, name, value)
    if family == "deberta-v2":
        config.layer_norm_eps = 1e-7
    _save_model(family, config, out, seed)
    _write_json(out / MARKER_FILE, {"family": family, "seed": seed, "version": BUILD_VERSION, "size": size})
    logger.info("built %s-%s (random weights) in %s (%.1f s)", family, size, out, time.perf_counter() - started)
    return out
