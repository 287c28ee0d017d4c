"""Run settings with named presets: one typed object the CLI, the app and notebooks fill in the same way.

A preset is a named bundle of choices (which windows are read, which models read them), applied to a question
set and run settings in one call, so the CLI's ``--preset fast`` and the app's preset menu do the same thing.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from mlpsych.errors import SettingsError, UnknownChoice


# The most tokens a reader adds around the question and the window (RoBERTa's <s> q </s></s> c </s>): the room a
# window's stride is checked against before any model is loaded.
MAX_SPECIAL_TOKENS = 4


class ReaderSettings(BaseModel):
    """How a paper is windowed, decoded and computed; what changes the result is in the cache key (``cache_fields``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Tokens per model input (within the model's maximum; None: the model's maximum). 384 as the transformers
    # pipeline; the model's 512 shared by all questions was not better on both halves of the development papers
    # (benchmarks/README.md, answer_quality).
    max_length: int | None = Field(default=384, ge=16, description="window length in tokens, within the model's "
                                   "maximum", json_schema_extra={"none": "the model's maximum"})
    # In the shared layout (retrieval's windows), room kept for the question, so windows do not depend on it. A
    # longer question borrows up to stride // 2 tokens from the side of the window its neighbour also reads
    # (nothing goes unread), and is cut beyond that.
    question_tokens: int = Field(default=24, ge=1)
    # After max_length and question_tokens, which its validator reads (a field sees only the fields before it).
    stride: int = Field(default=128, ge=0, description="tokens shared by neighbouring windows (the paper's doc_stride)")
    n_best: int = Field(default=20, ge=1)  # start and end candidates per window
    batch_size: int | None = Field(default=None, ge=1, description="windows read at once",  # Reader.default_batch_size
                                   json_schema_extra={"none": "chosen per device and model"})
    null_threshold: float = 0.0  # for may-be-empty questions: a span must beat the no-answer score by this margin
    device: str = Field(default="auto", description="auto, cpu, cuda, cuda:N or mps")
    dtype: str = Field(default="auto", description="auto, fp32, fp16, bf16 or int8 (CPU only: linear layers "
                       "quantized after loading) for the readers ($MLPSYCH_DTYPE sets what auto means)")
    # torch reads on every device; onnxruntime reads on the CPU from the model exported to ONNX once per machine
    # (mlpsych.onnx_runtime): the same answers in fp32, and int8 faster than torch's for DeBERTa.
    runtime: Literal["torch", "onnxruntime"] = Field(
        default="torch", description="torch, or onnxruntime (CPU; fp32 or int8; the model exported to ONNX once and "
        "cached; needs mlpsych[onnx])")
    # How the transformers question-answering pipeline of the paper's code reads, one field per choice so
    # benchmarks/answer_quality.py measures each alone. The defaults are the pipeline's wherever mlpsych's own way
    # did not measure better on answers (decision table in benchmarks/README.md); of mlpsych's own choices only
    # longer phrase answers stayed (questions.QUESTION_KINDS).
    # "shared": windows laid out once per paper with ``question_tokens`` of room (every question reads the same
    # windows); "per_question": each question's windows fill ``max_length`` around its own tokens (the pipeline).
    layout: Literal["shared", "per_question"] = "per_question"
    max_answer_tokens: int | None = Field(default=None, ge=1)  # longest span; None: the template's (by kind)
    snap_to_words: bool = True  # spans widened to the tokenizer's whole words (the pipeline's align_to_words)
    keep_blank_tokens: bool = True  # keep tokens that cover only white space (bare "▁" pieces) in the input
    # "n_best": the top ``n_best`` starts x ends of a window; "exhaustive": every (start, end) pair in the
    # length band, as the pipeline searches; "pipeline": the same computed as the pipeline computes it (float32, the
    # whole window's square, numpy's selection), so spans of equal or near-equal score are picked as it picks them.
    search: Literal["n_best", "exhaustive", "pipeline"] = "exhaustive"
    dedupe: bool = False  # a span read in two overlapping windows counts once (the pipeline keeps both)
    # Spans of the same text (ignoring case) found more than once, in one window (two token pairs snapped to the same
    # words) or in several: "kept" each, as transformers 4.40's question-answering pipeline; "summed" into one, its
    # score the sum, its offsets the first one's in reading order, with 2 x top_k + 10 candidates searched per window
    # where spans snap to words, as transformers 4.57's, which the released code's answers were checked with.
    # Summed by default: against the earlier "kept" it answered better on both halves of the development papers
    # (benchmarks/README.md, answer_quality, issue 23's re-run).
    same_text: Literal["kept", "summed"] = "summed"

    @field_validator("stride")
    @classmethod
    def _stride_within_window(cls, stride: int, info: ValidationInfo) -> int:
        """A stride the windows cannot hold is refused with the settings: else every paper failed at its windowing,
        after the whole folder was read."""
        length, question = info.data.get("max_length"), info.data.get("question_tokens")
        if length is not None and question is not None and stride >= length - question - MAX_SPECIAL_TOKENS:
            raise PydanticCustomError("stride", "must be below the paper's tokens a window holds (max_length {length} "
                                      "less {question} kept for the question and up to {special} for the model's own "
                                      "tokens): a smaller stride or a larger max_length",
                                      {"length": length, "question": question, "special": MAX_SPECIAL_TOKENS})
        return stride

    @field_validator("runtime")
    @classmethod
    def _runtime_runs_dtype(cls, runtime: str, info: ValidationInfo) -> str:
        """A runtime asked for with a dtype or device it cannot read in is refused with the settings, before any
        model is loaded."""
        if runtime == "onnxruntime":
            from mlpsych.onnx_runtime import refusal

            reason = refusal(info.data.get("dtype", "auto"), info.data.get("device", "auto"))
            if reason:
                raise PydanticCustomError("runtime", reason)
        return runtime

    def cache_fields(self) -> dict:
        """Settings that change the result: windowing, decoding, the runtime (ONNX Runtime's version) and the dtype
        the model runs in, ``auto`` resolved for this machine (and ``$MLPSYCH_DTYPE``) without loading the model.
        ``max_length`` None is the model's maximum, which its fingerprint covers. Device and batch size change
        nothing beyond float noise."""
        from mlpsych.models import dtype_name

        fields = self.model_dump(exclude={"device", "dtype", "batch_size", "runtime"})
        if self.runtime == "torch":  # the default adds nothing to the key, so results cached before it stay valid
            return {**fields, "dtype": dtype_name(self.dtype, self.device, int8=True)}
        from mlpsych.onnx_runtime import import_onnxruntime, onnx_dtype

        # its kernels make the outputs (torch's version is in every read's key: mlpsych.cache.library_versions)
        return {**fields, "dtype": onnx_dtype(self.dtype, self.device), "runtime": self.runtime,
                "onnxruntime": import_onnxruntime().__version__}


class LLMSettings(BaseModel):
    """The normalization model: the template's model unless ``model`` overrides it."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    model: str | None = Field(default=None, description="normalization model (Hub id or folder) instead of the "
                              "template's", json_schema_extra={"none": "the template's, else the library's default LLM"})
    device: str = Field(default="auto", description="auto, cpu, cuda, cuda:N or mps for the LLM")
    dtype: str = "auto"
    quantization: Literal["8bit", "4bit"] | None = Field(default=None, description="bitsandbytes loading (CUDA)")
    max_new_tokens: int = Field(default=256, ge=8, le=4096)
    batch_size: int = Field(default=4, ge=1)
    max_input_items: int = Field(default=60, ge=1)  # extractive answers shown to the LLM per prompt
    # "lines": the template's prompt with the answers one per line at ``{answers}``; "joined": the released code's
    # ``reference_prompt + ", ".join(sorted(set(answers)))``, uncapped.
    input_format: Literal["lines", "joined"] = "lines"
    keep_ungrounded: bool = False  # items the paper does not contain are answers too (the released code kept them)


class AnswerSettings(BaseModel):
    """How a model's raw spans become answers, and several models' answers one list. The defaults are the released
    code's: mlpsych's own rules measured no better on answers (benchmarks/README.md, answer_quality)."""

    model_config = ConfigDict(extra="forbid")

    # "mlpsych": reading.merge (position overlap, whole-word containment ignoring case); "released": the paper's
    # released post-processing (reading.released: touching spans merge, case-sensitive substrings, score filter).
    rules: Literal["mlpsych", "released"] = "released"
    # "joint": all models' spans merged together (agreement counted); "union": each model's answers, then the
    # plain union of their texts (the released code).
    models: Literal["joint", "union"] = "union"
    # Multi-hop: answers kept per entity, of the ``top_k`` read (released: 3 of 5, substring de-duplication
    # only); None keeps every answer of the question's merging rules.
    per_entity: int | None = Field(default=3, ge=1)
    entity_case: Literal["casefold", "exact"] = "exact"  # how repeated bridge entities are told apart
    # The released rules read only a model's first ``read`` raw spans (the released code reads 20 of the pipeline's
    # 30, as the default does); None reads all the question's ``top_k``.
    read: int | None = Field(default=20, ge=1)
    # The final answers of an entity question that name one entity written differently (``normalize.answers.item_key``:
    # case, hyphens and spacing between words, a final plural s: "Random Forests" / "random forest"): "exact" keeps
    # each, folding only identical texts as the merging rules do (the released code, --preset reference); "entity"
    # makes them one answer, the best-supported row's (most models, then most spans, then score) with the highest
    # score (``pipeline.merge.fold_entities``). Entity by default: precision-aware F1 higher, nothing lower, on both
    # halves of the development papers, in the default and fast presets (benchmarks/README.md, answer_quality).
    fold: Literal["exact", "entity"] = "entity"
    # The confidence column's calibrator (a file of ``mlpsych calibrate``); None: the default shipped with mlpsych,
    # fitted on the development papers (mlpsych.coding.confidence).
    calibrator: str | None = None


class CascadeSettings(BaseModel):
    """The cascade: a small SQuAD2 reader reads every window, the large readers only where its spans score best.

    The large readers' windows are taken best first (the small reader's span mass in each window, fused by rank
    with the ``fuse`` signals) until they hold ``mass`` of the probability of the small reader's ``spans`` best
    spans: a paper whose answers the small reader finds in two places costs two windows, one where it hesitates
    over twenty costs more. See :mod:`mlpsych.retrieval.cascade`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = None  # the small reader (Hub id or folder); None: no cascade
    mass: float = Field(default=0.9, gt=0, le=1)
    spans: int = Field(default=50, ge=1)  # the small reader's best spans per question that carry the mass
    min_windows: int = Field(default=1, ge=1)
    max_windows: int | None = Field(default=None, ge=1)
    # What orders the windows: the small reader's mass alone, fused with BM25 on the question, or fused with the
    # template's retrieval signals (its ``signals`` list, BM25 on the question included where it names it).
    fuse: Literal["small", "question", "signals"] = "small"
    bridge_windows: Literal["small", "source"] = Field(
        default="small", description="what a bridged sub-question (q4's 'What was X used for?') reads: small: the "
        "small reader reads the windows naming X and its spans choose among them; source: the windows already "
        "chosen for the bridge's source question (q1) by the same reader that name X, with no small read (a "
        "sub-question none of whose q1 windows names X is read as with small)")
    tool_windows: bool = Field(
        default=False, description="a question ordered by the software signal (q2) also reads every window where the "
        "paper marks a name as software ('the X package', 'X 1.2.3', 'implemented in X', a package's address), "
        "besides the windows chosen (mlpsych.retrieval.tools)")


class RetrievalSettings(BaseModel):
    """Which windows of a paper are read: the global side of each template's ``retrieval`` spec.

    ``read``: ``template`` follows each template (no spec = read all, as the paper did); ``all`` reads every
    window of every paper whatever the templates say (faithful reproduction); ``retrieve`` scores windows for
    every question and reads only the best ``budget`` of them, or, with a ``cascade`` model, the windows where a
    small reader's answers weigh most (the fast preset).
    """

    model_config = ConfigDict(extra="forbid")

    read: Literal["template", "all", "retrieve"] = Field(
        default="template", description="template: as each template says; all: read every window (the paper's "
        "behaviour); retrieve: read only the windows that retrieval ranks best for each question")
    mode: Literal["bm25", "dense"] | None = Field(default=None, description="how windows are scored when retrieving",
                                                  json_schema_extra={"none": "the template's, else bm25"})
    budget: int | None = Field(default=None, ge=1, description="windows read per question when retrieving",
                               json_schema_extra={"none": "the template's"})
    neighbours: int = Field(default=0, ge=0, le=4, description="also read this many windows beside each chosen one")
    entity_anchor: bool = True  # bridged sub-questions read only windows that mention their entity
    entity_budget: int | None = Field(default=None, ge=1)  # cap on anchored windows; None: the budget
    entity_extra: int = Field(default=0, ge=0)  # sub-questions also read this many best windows of the paper
    dense_model: str | None = None  # sentence-embedding model for mode=dense; None: the offline MiniLM
    cascade: CascadeSettings = Field(default_factory=CascadeSettings)


class RunSettings(BaseModel):
    """Everything that shapes a run besides the papers and the questions."""

    model_config = ConfigDict(extra="forbid")

    reader: ReaderSettings = Field(default_factory=ReaderSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    answers: AnswerSettings = Field(default_factory=AnswerSettings)
    max_sub_questions: int | None = Field(default=None, ge=1, description="cap on multi-hop sub-questions per paper",
                                         json_schema_extra={"none": "the template's"})
    preset: str | None = None  # the preset applied, for the run sheet

    def describe(self) -> dict:
        """Flat settings for the run sheet."""
        out = {f"reader.{k}": v for k, v in self.reader.model_dump().items()}
        out.update({f"llm.{k}": v for k, v in self.llm.model_dump().items()})
        retrieval = self.retrieval.model_dump()
        out.update({f"retrieval.{k}": v for k, v in retrieval.items() if k != "cascade"})
        out.update({f"retrieval.cascade.{k}": v for k, v in retrieval["cascade"].items()})
        out.update({f"answers.{k}": v for k, v in self.answers.model_dump().items()})
        out["max_sub_questions"] = self.max_sub_questions
        out["preset"] = self.preset
        return out


# -- presets ---------------------------------------------------------------------------------------------

# The fast preset reads each question with one base-size reader (the large ensembles collapse: a substitute
# that duplicates another reader of the question is read once). Two readers per question would double the
# windows read; one reader keeps q1-q3's retrieval budgets within 10x fewer windows than the paper's full read,
# at the cost of the ensembles' agreement (the paper's combined ensembles scored a little above single models).
ONE_READER_SUBSTITUTES: dict[str, str] = {
    "deepset/deberta-v3-large-squad2": "deepset/deberta-v3-base-squad2",
    "ahotrod/albert_xxlargev1_squad2_512": "deepset/deberta-v3-base-squad2",
    "ahotrod/electra_large_discriminator_squad2_512": "deepset/electra-base-squad2",
    "deepset/roberta-large-squad2": "deepset/electra-base-squad2",
}


# The fast preset's cascade: the point that the rule of ``mlpsych.retrieval.tradeoff.choose_point`` (the cheapest
# configuration whose coverage of the full read's gold spans reaches 0.97 for q1-q3 and 0.95 for q4) picks on the 34
# development papers in ``benchmarks/cascade_retrieval.py``. That rule, applied on other papers than those it is
# measured on (two-fold and leave-one-out), gives the out-of-sample figures in benchmarks/README.md. q4's
# sub-questions read q1's windows naming their entity (``bridge_windows``): adopted by a rule fixed in advance
# (same coverage and 28x instead of 24x fewer FLOPs out of sample, q4 F1 not lower); the point is the rule's choice
# with it, with the stand-in reader of 2026-11-26. Its mass is also the choice of a rule counting answers as well as
# coverage (``tradeoff.choose_by_answers``, fixed in advance; benchmarks/README.md): on the 34 development papers no
# lower mass kept q1-q3's F1 within 0.01 of it, nor q4's gold-span coverage at 0.90.
FAST_CASCADE = CascadeSettings(model="deepset/minilm-uncased-squad2", fuse="signals", mass=0.99, spans=50,
                               min_windows=1, bridge_windows="source", tool_windows=True)


class Preset(BaseModel):
    """A named run configuration: how windows are chosen, which reader models stand in for the templates', and
    settings or template fields it fixes (``settings``: RunSettings sections to fields; ``questions``: fields of
    questions without a bridge; ``follow_ups``: fields of bridged questions)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    purpose: str = Field(description="what it is for, in a few words (the app's choice of preset)")
    cpu_cost: str = Field(description="what a paper costs on a laptop CPU without a GPU (measured, in "
                                      "benchmarks/README.md)")
    description: str = Field(description="how it reads, in full (the command line's --help)")
    retrieval: RetrievalSettings
    model_substitutions: dict[str, str] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)
    questions: dict[str, Any] = Field(default_factory=dict)
    follow_ups: dict[str, Any] = Field(default_factory=dict)


PRESETS: dict[str, Preset] = {
    "paper": Preset(
        name="paper",
        purpose="the best answers",
        cpu_cost="without a GPU, 10 min or more per paper",
        description="The default, for the best answers: every window of every paper read by the template's models, "
                    "as the paper's code reads except where a change measured better on answers.",
        retrieval=RetrievalSettings(read="all"),
    ),
    "fast": Preset(
        name="fast",
        purpose="quick on a laptop CPU",
        cpu_cost="about 30-90 s per paper",
        description="Laptop-friendly: a small SQuAD2 reader (MiniLM) reads every window, and one base-size reader "
                    "per question (instead of the large ensembles) reads only the windows where the small reader's "
                    "answers weigh most, ranked with the templates' retrieval signals; how many follows the paper "
                    "(a cascade: about 28x fewer FLOPs than the paper's full read).",
        # entity_budget / entity_extra act only without the cascade (--small-reader none): the earlier fast preset
        retrieval=RetrievalSettings(read="retrieve", mode="bm25", entity_budget=2, entity_extra=1,
                                    cascade=FAST_CASCADE),
        model_substitutions=dict(ONE_READER_SUBSTITUTES),
        # the base readers' whole 512 positions (fewer windows); same texts kept, the reading its cascade was measured
        # with (the first 20 of a top 30 of kept texts are the top 20 it read), until it is measured with the sum
        settings={"reader": {"max_length": None, "same_text": "kept"}},
    ),
}


def get_preset(name: str) -> Preset:
    """The preset called ``name``; an :class:`~mlpsych.errors.UnknownChoice` naming the known presets otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownChoice(f"unknown preset {name!r} (choose from: {', '.join(PRESETS)})") from None


# The paper's released code: the transformers 4.57 question-answering pipeline called with top_k=30 and
# doc_stride=128 (max_seq_len 384, max_answer_len 15, words, same texts summed), its post-processing
# (reading.released) on the first 20 of those 30, a plain union of models, every entity asked about with 3 of 5
# answers kept. docs/reference.md says how each part was checked.
REFERENCE = {
    "reader": {"max_length": 384, "stride": 128, "layout": "per_question", "max_answer_tokens": 15,
               "snap_to_words": True, "keep_blank_tokens": True, "search": "pipeline", "dedupe": False,
               "same_text": "summed", "null_threshold": 0.0, "dtype": "fp32"},
    "answers": {"rules": "released", "models": "union", "per_entity": 3, "entity_case": "exact", "read": 20,
                "fold": "exact"},
    "llm": {"input_format": "joined", "keep_ungrounded": True, "max_new_tokens": 256},
    "max_sub_questions": 10_000,
}
REFERENCE_QUESTIONS = {"top_k": 30, "merge": True, "allow_empty": False}
REFERENCE_FOLLOW_UPS = {"top_k": 5, "merge": False, "allow_empty": False}

PRESETS["reference"] = Preset(
    name="reference",
    purpose="the paper's code, to replicate it",
    cpu_cost="without a GPU, 5-12 min per paper",
    description="The paper's released code, reproduced to replicate its tables: every window read by the "
                "template's models as the transformers 4.57 question-answering pipeline reads (384-token windows "
                "per question, answers of at most 15 tokens snapped to words, same texts summed, the top 30), the "
                "released post-processing of the first 20, a plain union of the models' answers, every q1 entity "
                "asked about (3 answers of 5 kept), fp32.",
    retrieval=RetrievalSettings(read="all"),
    settings=REFERENCE,
    questions=REFERENCE_QUESTIONS,
    follow_ups=REFERENCE_FOLLOW_UPS,
)


def deep_update(base: dict, changes: dict) -> dict:
    """``base`` with ``changes`` applied, nested dicts merged key by key (neither is modified)."""
    out = dict(base)
    for key, value in changes.items():
        out[key] = deep_update(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def build_settings(questions, preset: str | None = None, *, base: dict | None = None, given: dict | None = None):
    """``(questions, settings)`` for a run, the one way the front ends make them: the settings' defaults with
    ``base`` (a front end's own switches, which a preset may change), the preset applied (:func:`apply_preset`),
    then ``given`` (what the user chose explicitly, which wins over the preset). ``base`` and ``given`` are nested
    dicts of :class:`RunSettings` fields; a value the settings refuse is a :class:`SettingsError` naming the field."""
    settings = _validated(deep_update(RunSettings().model_dump(), base or {}))
    if preset:
        questions, settings = apply_preset(preset, questions, settings)
    if given:
        settings = _validated(deep_update(settings.model_dump(), given))
    return questions, settings


def _validated(values: dict) -> RunSettings:
    """The settings for ``values``; pydantic's report of a refused value becomes one line naming the field."""
    from pydantic import ValidationError

    try:
        return RunSettings.model_validate(values)
    except ValidationError as error:
        first = error.errors()[0]
        raise SettingsError(".".join(str(part) for part in first["loc"]), first.get("input"), first["msg"]) from None


def substitute_models(questions, substitutions: dict[str, str]):
    """A copy of the question set with model ids replaced (a model that becomes a duplicate is read once)."""
    if not substitutions:
        return questions
    changed = []
    for q in questions.questions:
        models = list(dict.fromkeys(substitutions.get(m, m) for m in q.models))
        changed.append(q.model_copy(update={"models": models}))
    return questions.model_copy(update={"questions": changed})


def apply_preset(preset: str | Preset, questions, settings: RunSettings | None = None):
    """``(questions, settings)`` with the preset's reader models and retrieval; other settings are kept.

    ``questions`` is a :class:`mlpsych.questions.QuestionSet`; neither argument is modified.
    """
    chosen = get_preset(preset) if isinstance(preset, str) else preset
    base = settings or RunSettings()
    data = deep_update(base.model_dump(), chosen.settings)
    data.update(retrieval=chosen.retrieval.model_dump(), preset=chosen.name)
    questions = substitute_models(questions, chosen.model_substitutions)
    if chosen.questions or chosen.follow_ups:
        questions = questions.model_copy(update={"questions": [
            q.model_copy(update=chosen.follow_ups if q.bridge_from else chosen.questions) for q in questions.questions]})
    return questions, RunSettings.model_validate(data)
