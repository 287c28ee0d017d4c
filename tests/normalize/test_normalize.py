"""The normalization stage: prompts, loading errors, the tiny Llama end to end, and combining models."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mlpsych.answers import Answer, Span
from mlpsych.dev.tiny import build_tiny_models, corpus
from mlpsych.documents import Document
from mlpsych.errors import NormalizerUnavailable
from mlpsych.models import load_failure_reason
from mlpsych.normalize.answers import NormalizeAudit, build_prompt, choose_model, combine_results, item_key
from mlpsych.normalize.grounding import ground
from mlpsych.normalize.llm import HOW_TO_ENABLE, Normalizer, NormalizeResult
from mlpsych.questions import NormalizeSpec, QuestionTemplate
from normalize.helpers import normalize_answers

PAGE1 = "We trained support vector machines (SVM) to predict loneliness. "
PAGE2 = "A random forest was fitted in R. Topics came from latent Dirichlet allocation (LDA). "
DOC = Document(id="p1", text=PAGE1 + PAGE2, pages=[(0, len(PAGE1)), (len(PAGE1), len(PAGE1 + PAGE2))])

Q1 = QuestionTemplate(
    id="q1", text="What machine learning techniques were used?", models=["deberta", "albert"],
    normalize=NormalizeSpec(prompt="Return the techniques as a Python list.\nSnippets:\n{answers}", combine="union"),
)


@pytest.fixture(scope="module")
def tiny_llama(tiny_models_dir: Path) -> Path:
    return build_tiny_models(tiny_models_dir, families=["llama"])["llama"]


def extractive(model: str, text: str, score: float) -> Answer:
    start = DOC.text.index(text)
    span = Span(doc_id="p1", question_id="q1", model=model, text=text, start=start, end=start + len(text),
                score=score)
    return Answer(doc_id="p1", question_id="q1", text=text, stage="extractive", models=[model], score=score,
                  start=start, end=start + len(text), page=DOC.page_at(start), spans=[span])


class FixedOutputNormalizer(Normalizer):
    """Returns fixed raw strings per prompt (checks the combination code; model code is tested separately)."""

    def __init__(self, outputs: dict[str, str]) -> None:
        super().__init__("fixed")
        self.outputs = outputs
        self.prompts: list[str] = []

    def run(self, prompts: list[str], *, progress: bool = True) -> list[NormalizeResult]:
        from mlpsych.normalize.listparse import parse_list

        self.prompts += prompts
        raws = [next(raw for marker, raw in self.outputs.items() if marker in p) for p in prompts]
        return [NormalizeResult(parse_list(raw), raw) for raw in raws]


# -- build_prompt / choose_model --------------------------------------------------------------------------


def test_build_prompt_fills_dedupes_and_caps() -> None:
    prompt = build_prompt("Q: {answers}\nEnd {not a field}", ["SVM", " svm ", "random\nforest", "", "LDA"],
                          max_input_items=2)
    assert prompt == "Q: SVM\nrandom forest\nEnd {not a field}"


def test_build_prompt_without_placeholder_appends() -> None:
    assert build_prompt("List them:", ["a", "b"]) == "List them:\na\nb"


def test_choose_model() -> None:
    assert choose_model(Q1) == "meta-llama/Meta-Llama-3-8B-Instruct"
    q = Q1.model_copy(update={"normalize": NormalizeSpec(prompt="x {answers}", model="local/llm")})
    assert choose_model(q) == "local/llm"
    assert choose_model(q, "other") == "other"


def test_item_key() -> None:
    assert item_key("k-NN") == item_key("k NN")
    assert item_key("SVMs") == item_key("svm")
    assert item_key("Random Forests") == item_key("random forest")
    assert item_key("LASSO") != item_key("LASS")


# -- unavailability --------------------------------------------------------------------------------------


def assert_how_to(message: str) -> None:
    assert HOW_TO_ENABLE in message
    for hint in ("HF_TOKEN", "--llm MODEL", "--llm-quantization 4bit", "CPU"):
        assert hint in message


def test_missing_local_folder(tmp_path: Path) -> None:
    with pytest.raises(NormalizerUnavailable) as info:
        Normalizer(str(tmp_path / "no-such-llm")).warm_up()
    assert "is not an existing folder" in str(info.value)
    assert_how_to(str(info.value))


def test_unknown_hub_id_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(NormalizerUnavailable) as info:
        Normalizer("mlpsych-tests/made-up-instruct-model").warm_up()
    assert "not in the local Hugging Face cache" in str(info.value)
    assert "'mlpsych-tests/made-up-instruct-model'" in str(info.value)
    assert_how_to(str(info.value))


@pytest.mark.parametrize("family, reason", [
    ("roberta", "its weights have no language-model head"),  # transformers would fit RobertaForCausalLM to it
    ("electra", "its weights have no language-model head"),
    ("deberta-v2", "configuration is DebertaV2Config, which has no text-generation form"),
])
def test_a_reader_folder_given_as_the_llm_is_refused(tiny_models: dict[str, Path], family: str, reason: str) -> None:
    """A reader named with --llm: refused with why, not loaded with a random head that writes noise (or fails on
    every paper with an index error)."""
    with pytest.raises(NormalizerUnavailable) as info:
        Normalizer(str(tiny_models[family]), device="cpu").warm_up()
    assert "is not a text-generation model" in str(info.value)
    assert reason in str(info.value)


def test_folder_without_safetensors(tmp_path: Path, tiny_llama: Path) -> None:
    folder = tmp_path / "pickled"
    shutil.copytree(tiny_llama, folder)
    (folder / "model.safetensors").unlink()
    with pytest.raises(NormalizerUnavailable, match="no .safetensors weights"):
        Normalizer(str(folder)).warm_up()


def test_gated_messages() -> None:
    httpx2 = pytest.importorskip("httpx2")  # huggingface_hub's HTTP client, needed to build its error
    from huggingface_hub.errors import GatedRepoError

    response = httpx2.Response(401, request=httpx2.Request("GET", "https://huggingface.co/x"))
    assert "gated" in load_failure_reason("meta-llama/x", GatedRepoError("Access restricted", response=response))
    wrapped = OSError("You are trying to access a gated repo.\nMake sure to have access to it. 401 Client Error.")
    assert "gated" in load_failure_reason("meta-llama/x", wrapped)


def test_quantization_needs_cuda(tiny_llama: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    with pytest.raises(NormalizerUnavailable, match="needs a CUDA GPU"):
        Normalizer(str(tiny_llama), quantization="4bit").warm_up()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="quantization"):
        Normalizer(quantization="3bit")
    with pytest.raises(ValueError):
        Normalizer(batch_size=0)


def test_model_that_does_not_fit(tmp_path: Path, tiny_llama: Path) -> None:
    """A config for ~100 billion parameters (~400 GB in fp32): refused from the config alone, before any weight is read."""
    folder = tmp_path / "huge"
    shutil.copytree(tiny_llama, folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(hidden_size=16384, intermediate_size=65536, num_hidden_layers=24, num_attention_heads=128,
                  num_key_value_heads=8)
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(NormalizerUnavailable, match=r"needs about \d+\.\d GiB .* but only"):
        Normalizer(str(folder), device="cpu").warm_up()


def test_bad_device_is_unavailable(tiny_llama: Path) -> None:
    with pytest.raises(NormalizerUnavailable, match="cannot run as asked"):
        Normalizer(str(tiny_llama), device="tpu").warm_up()


@pytest.mark.parametrize("error", ["OutOfMemoryError", "AcceleratorError"])
def test_a_gpu_without_room_for_the_llm_turns_normalization_off(tiny_llama: Path, monkeypatch, error) -> None:
    """torch's allocator error, or CUDA's own "out of memory" (an AcceleratorError, seen when other processes held
    the device machine's GPU): the LLM is unavailable with the reason, not a bug report."""
    import torch
    from transformers import AutoModelForCausalLM

    raised = {"OutOfMemoryError": torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 MiB"),
              "AcceleratorError": torch.AcceleratorError("CUDA error: out of memory")}[error]

    def full_gpu(*args, **kwargs):
        raise raised

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", full_gpu)
    with pytest.raises(NormalizerUnavailable, match=f"does not fit in GPU memory \\({error}\\)"):
        Normalizer(str(tiny_llama), device="cpu").warm_up()


# -- the tiny Llama, for real ----------------------------------------------------------------------------


@pytest.mark.slow
def test_tiny_llama_generates_and_parses(tiny_llama: Path) -> None:
    # fp32: batching must not change a row's output, and bf16 may round a padded shape differently
    normalizer = Normalizer(str(tiny_llama), max_new_tokens=6, batch_size=2, dtype="fp32")
    prompts = ["List the techniques: random forest, SVM", "Hello", "Return [] if none."]
    results = normalizer.run(prompts)
    assert normalizer.loaded
    assert len(results) == 3
    for result in results:
        assert isinstance(result.raw_output, str) and result.raw_output  # random weights still emit tokens
        assert result.error is None
    # The bound holds: at most max_new_tokens generated per row.
    encoded = normalizer._tokenizer(prompts, return_tensors="pt", padding=True)
    output = normalizer._model.generate(**encoded, **normalizer._greedy_kwargs())
    assert output.shape[1] - encoded["input_ids"].shape[1] <= 6
    # Greedy: same prompts, same outputs; batching does not change a row's output (left padding).
    again = Normalizer(str(tiny_llama), max_new_tokens=6, batch_size=1, dtype="fp32").run(prompts)
    assert [r.raw_output for r in again] == [r.raw_output for r in results]
    normalizer.release()
    assert not normalizer.loaded and normalizer._tokenizer is None
    assert normalizer.run(["Hello"])[0].raw_output == results[1].raw_output  # reloads after release


@pytest.mark.slow
@pytest.mark.parametrize("error", ["OutOfMemoryError", "AcceleratorError"])
def test_out_of_gpu_memory_while_generating_retries_one_prompt_at_a_time(tiny_llama: Path, error) -> None:
    """Either kind of CUDA out-of-memory (models.is_out_of_memory): a batch is generated again prompt by prompt, a
    prompt that does not fit alone gets an error of its own; any other error is raised."""
    import torch

    make = {"OutOfMemoryError": lambda: torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 MiB"),
            "AcceleratorError": lambda: torch.AcceleratorError("CUDA error: out of memory")}[error]
    prompts = ["List the techniques: random forest, SVM", "Hello", "Return [] if none."]
    expected = Normalizer(str(tiny_llama), max_new_tokens=6, batch_size=1, dtype="fp32").run(prompts)
    normalizer = Normalizer(str(tiny_llama), max_new_tokens=6, batch_size=3, dtype="fp32")
    normalizer.warm_up()
    generate, sizes = normalizer._generate, []

    def tight(texts: list[str]) -> list[str]:
        sizes.append(len(texts))
        if len(texts) > 1 or "Hello" in texts[0]:  # a batch, and the second prompt alone, do not fit
            raise make()
        return generate(texts)

    normalizer._generate = tight
    results = normalizer.run(prompts)
    assert sorted(sizes) == [1, 1, 1, 3]
    assert [r.error for r in results] == [None, "out of GPU memory while generating", None]
    assert [results[i].raw_output for i in (0, 2)] == [expected[i].raw_output for i in (0, 2)]

    def broken(texts: list[str]) -> list[str]:
        raise torch.AcceleratorError("CUDA error: an illegal memory access was encountered")

    normalizer._generate = broken
    with pytest.raises(RuntimeError, match="illegal memory access"):
        normalizer.run(prompts)


@pytest.mark.slow
def test_tiny_llama_whole_chain(tiny_llama: Path) -> None:
    """Extractive answers -> prompt -> tiny Llama -> parse -> ground -> answers; every item classified by ground()."""
    text = " ".join(corpus(60))
    doc = Document(id="c1", text=text)
    answers_by_model = {}
    for model, phrase in (("deberta", "random forest"), ("albert", "XGBoost")):
        start = text.index(phrase)
        answers_by_model[model] = [Answer(doc_id="c1", question_id="q1", text=phrase, stage="extractive",
                                          models=[model], score=0.5, start=start, end=start + len(phrase))]
    normalizer = Normalizer(str(tiny_llama), max_new_tokens=8)
    answers, audit = normalize_answers(doc, Q1, answers_by_model, normalizer)
    check_chain(text, answers, audit)
    # Random weights rarely say something the paper contains; a paper that does contain the model's (greedy,
    # so repeatable) items takes the grounded branch with the same real output.
    items = [i for found in audit.items.values() for i in found]
    if not items:
        pytest.skip("the tiny model's output parsed to no item")
    text2 = text + " Appendix: " + "; ".join(items) + "."
    answers2, audit2 = normalize_answers(Document(id="c1", text=text2), Q1, answers_by_model, normalizer)
    normalizer.release()
    assert audit2.raw_outputs == audit.raw_outputs
    check_chain(text2, answers2, audit2)
    assert answers2 and all(a.stage == "normalized" for a in answers2)


def check_chain(text: str, answers: list[Answer], audit: NormalizeAudit) -> None:
    assert set(audit.raw_outputs) == {"deberta", "albert"}
    assert all(isinstance(raw, str) and raw for raw in audit.raw_outputs.values())
    assert "random forest" in audit.prompts["deberta"] and "XGBoost" in audit.prompts["albert"]
    expected_items = {item_key(i) for items in audit.items.values() for i in items}
    assert {item_key(a.text) for a in answers} == expected_items
    for answer in answers:
        g = ground(answer.text, text)
        assert answer.stage == ("normalized" if g.grounded else "ungrounded")
        if g.grounded:
            assert 0 <= answer.start < answer.end <= len(text)
            assert answer.page is None and " ".join(text[answer.start:answer.end].split()) in answer.evidence


# -- combining models ------------------------------------------------------------------------------------


def two_models() -> dict[str, list[Answer]]:
    return {
        "deberta": [extractive("deberta", "support vector machines (SVM)", 0.9),
                    extractive("deberta", "random forest", 0.4)],
        "albert": [extractive("albert", "random forest", 0.7), extractive("albert", "latent Dirichlet allocation", 0.6)],
    }


OUTPUTS = {
    "support vector": "Sure: ['SVM', 'Random forest', 'XGBoost']",
    "latent Dirichlet": '["random forests", "LDA", "R"]',
}


def test_union_of_two_models() -> None:
    normalizer = FixedOutputNormalizer(OUTPUTS)
    answers, audit = normalize_answers(DOC, Q1, two_models(), normalizer)
    assert len(normalizer.prompts) == 2  # one prompt per model
    rows = {(a.text, a.stage, tuple(a.models), a.score, a.page) for a in answers}
    assert rows == {
        ("SVM", "normalized", ("deberta",), 0.9, 1),
        ("Random forest", "normalized", ("deberta", "albert"), 0.7, 2),
        ("XGBoost", "ungrounded", ("deberta",), 0.0, None),
        ("LDA", "normalized", ("albert",), 0.6, 2),  # abbreviation of albert's snippet's long form
        ("R", "normalized", ("albert",), 0.0, 2),  # in the paper, but in no snippet -> score 0
    }
    by_text = {a.text: a for a in answers}
    svm = by_text["SVM"]
    assert DOC.text[svm.start:svm.end] == "SVM" and "support vector machines" in svm.evidence
    lda = by_text["LDA"]
    assert DOC.text[lda.start:lda.end] == "latent Dirichlet allocation"
    r = by_text["R"]
    assert DOC.text[r.start:r.end] == "R" and r.evidence == "A random forest was fitted in R."
    assert [s.model for s in by_text["Random forest"].spans] == ["deberta", "albert"]
    assert by_text["XGBoost"].start is None and by_text["XGBoost"].evidence == ""
    assert audit.raw_outputs == {"deberta": OUTPUTS["support vector"], "albert": OUTPUTS["latent Dirichlet"]}
    assert audit.items["albert"] == ["random forests", "LDA", "R"]
    assert audit.combine == "union" and audit.errors == {}


def test_per_model_rows() -> None:
    question = Q1.model_copy(update={"normalize": Q1.normalize.model_copy(update={"combine": "per_model"})})
    answers, _ = normalize_answers(DOC, question, two_models(), FixedOutputNormalizer(OUTPUTS))
    rows = [(a.text, a.models, a.stage) for a in answers]
    assert rows == [
        ("SVM", ["deberta"], "normalized"), ("Random forest", ["deberta"], "normalized"),
        ("XGBoost", ["deberta"], "ungrounded"), ("random forests", ["albert"], "normalized"),
        ("LDA", ["albert"], "normalized"), ("R", ["albert"], "normalized"),
    ]
    forest = [a for a in answers if a.text.lower().startswith("random")]
    assert [a.score for a in forest] == [0.4, 0.7]  # each model's own snippet score


def test_model_without_answers_is_not_prompted() -> None:
    normalizer = FixedOutputNormalizer(OUTPUTS)
    answers_by_model = {"deberta": two_models()["deberta"], "albert": []}
    answers, audit = normalize_answers(DOC, Q1, answers_by_model, normalizer)
    assert len(normalizer.prompts) == 1
    assert audit.raw_outputs["albert"] == "" and audit.items["albert"] == []
    assert {a.text for a in answers} == {"SVM", "Random forest", "XGBoost"}


def test_garbage_output_gives_no_answers() -> None:
    answers, audit = normalize_answers(DOC, Q1, two_models(),
                                       FixedOutputNormalizer({"support": "}}{{ ::", "latent": "I'm sorry."}))
    assert answers == []
    assert audit.raw_outputs["deberta"] == "}}{{ ::"


def test_question_without_normalize() -> None:
    with pytest.raises(ValueError, match="no normalize prompt"):
        normalize_answers(DOC, Q1.model_copy(update={"normalize": None}), two_models(), FixedOutputNormalizer({}))


def test_batched_across_papers_matches_one_by_one() -> None:
    """prompts_for + one run + combine_results gives what normalize_answers gives paper by paper."""
    from mlpsych.normalize.answers import combine_results, prompts_for

    normalizer = FixedOutputNormalizer(OUTPUTS)
    papers = [(DOC, two_models()), (DOC, {"albert": two_models()["albert"]})]
    one_by_one = [normalize_answers(doc, Q1, abm, normalizer) for doc, abm in papers]
    prompts = [prompts_for(Q1, abm, max_input_items=60) for _, abm in papers]
    flat = [p for per_paper in prompts for p in per_paper.values()]
    results = iter(normalizer.run(flat))
    batched = [
        combine_results(doc, Q1, abm, {m: next(results) for m in per_paper}, llm="fixed", prompts=per_paper)
        for (doc, abm), per_paper in zip(papers, prompts)
    ]
    assert [[a.to_dict() for a in answers] for answers, _ in batched] == \
        [[a.to_dict() for a in answers] for answers, _ in one_by_one]
    assert [audit for _, audit in batched] == [audit for _, audit in one_by_one]


def test_reference_input_is_the_released_prompt_with_the_answers_joined() -> None:
    from mlpsych.normalize.answers import prompts_for
    from mlpsych.questions import load_question_set

    q1 = load_question_set("mlpsych").get("q1")
    answers = [Answer("p", "q1", text, "extractive", ["m"], score) for text, score in
               [("random forest", 0.9), ("SVM", 0.8), ("random forest", 0.5), (" LASSO ", 0.4)]]
    joined = prompts_for(q1, {"m": answers}, input_format="joined")["m"]
    assert joined.startswith("Extract the detailed machine learning or natural language processing techniques")
    assert joined.endswith("Do not explain or add anything else. Sentence: LASSO, SVM, random forest")
    assert "{answers}" not in joined and "Snippets" not in joined
    assert prompts_for(q1, {"m": answers})["m"].endswith("Snippets:\nrandom forest\nSVM\nLASSO\n")  # our own


def test_languages_told_apart_by_a_sign_stay_two_items() -> None:
    """Model a's LLM listing "C++" and model b's "C#" (or "C") gave one item: the other language was lost."""
    doc = Document(id="p2", text="The task ran in C# (Unity); the models were written in C++ and C.")
    software = Q1.model_copy(update={"id": "q2", "text": "What software was used?"})
    answers_by_model = {m: [Answer(doc_id="p2", question_id="q2", text=doc.text, stage="extractive", models=[m],
                                   score=0.5, start=0, end=len(doc.text))] for m in ("deberta", "albert")}
    results = {"deberta": NormalizeResult(["C++", "C"], '["C++", "C"]'), "albert": NormalizeResult(["C#"], '["C#"]')}
    answers, _ = combine_results(doc, software, answers_by_model, results)
    assert sorted((a.text, a.stage) for a in answers) == [("C", "normalized"), ("C#", "normalized"),
                                                          ("C++", "normalized")]
    assert item_key("Notepad++") != item_key("Notepad") and item_key("k-NN") == item_key("k NN")
