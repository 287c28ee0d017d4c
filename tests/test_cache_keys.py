"""Every setting that changes a result is in its cache key, and nothing else is.

One baseline run with tiny models fills a cache; each case then changes one setting and reruns on a copy of that
cache. The units read again must be exactly those the setting affects (the others come from the cache): a
setting missing from the key would reuse stale results, one wrongly in it would recompute for nothing.
"""

from __future__ import annotations

import importlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from test_pipeline import docs  # tests/ is on sys.path (rootdir conftest)

from mlpsych.cache import ResultCache, model_fingerprint
from mlpsych.models import DTYPE_ENV, dtype_name, pick_device
from mlpsych.pipeline import Pipeline
from mlpsych.questions import QuestionSet, RetrievalSpec, load_question_set
from mlpsych.reading.reader import Reader
from mlpsych.settings import LLMSettings, ReaderSettings, RunSettings

DOCS = docs()  # the pipeline tests' two papers
READER = ReaderSettings(max_length=128, stride=32, batch_size=8, question_tokens=32)
Unit = tuple[str, str, str]  # (model, paper, question)


# What "auto" is here (this machine, $MLPSYCH_DTYPE) by its command-line name, and another dtype.
AUTO = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}[dtype_name("auto")]
OTHER = "bf16" if AUTO == "fp32" else "fp32"


@dataclass
class Baseline:
    questions: QuestionSet  # q1 read by two models, q2 by two others and with retrieval
    cache: Path
    units: set[Unit]
    electra: Path  # q2's model, a private copy whose files a case may touch


def run(questions: QuestionSet, reader: ReaderSettings, cache: Path) -> tuple[set[Unit], ResultCache]:
    """Run the pipeline; the units actually read, and the cache (for its hit count)."""
    read: set[Unit] = set()
    run_many = Reader.run_many

    def recording(self, papers):
        read.update((self.model_id, doc.id, query.question_id) for doc, queries in papers for query in queries)
        return run_many(self, papers)

    results = ResultCache(cache)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Reader, "run_many", recording)
        settings = RunSettings(reader=reader, llm=LLMSettings(enabled=False))
        Pipeline(questions, settings, results, progress=False).run(DOCS)
    results.close()
    return read, results


@pytest.fixture(scope="module")
def baseline(tiny_questions: Path, tmp_path_factory: pytest.TempPathFactory) -> Baseline:
    folder = tmp_path_factory.mktemp("cache-keys")
    source = load_question_set(tiny_questions).select(["q1", "q2"])
    electra = Path(shutil.copytree(source.get("q2").models[0], folder / "electra"))
    q2 = source.get("q2").model_copy(update={"models": [str(electra), *source.get("q2").models[1:]],
                                             "retrieval": RetrievalSpec(mode="bm25", budget=2)})
    questions = source.model_copy(update={"questions": [source.get("q1"), q2]})
    units = {(m, d.id, q.id) for q in questions.questions for m in q.models for d in DOCS}
    read, _ = run(questions, READER, folder / "cache")
    assert read == units
    return Baseline(questions, folder / "cache", units, electra)


def question(questions: QuestionSet, question_id: str, **changes) -> QuestionSet:
    return questions.model_copy(update={"questions": [
        q.model_copy(update=changes) if q.id == question_id else q for q in questions.questions]})


def touch(path: Path, request: pytest.FixtureRequest) -> None:
    """A new modification time for ``path`` (as a re-saved model has), put back after the test."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    request.addfinalizer(lambda: os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns)))


def other_dtype_in_environment(b: Baseline, env: pytest.MonkeyPatch, request) -> tuple[ReaderSettings, QuestionSet]:
    env.setenv(DTYPE_ENV, OTHER)
    return READER, b.questions


def q2_model_revised(b: Baseline, env: pytest.MonkeyPatch, request) -> tuple[ReaderSettings, QuestionSet]:
    touch(b.electra / "model.safetensors", request)
    return READER, b.questions


def library_upgraded(name: str) -> Callable[..., tuple[ReaderSettings, QuestionSet]]:
    def upgrade(b: Baseline, env: pytest.MonkeyPatch, request) -> tuple[ReaderSettings, QuestionSet]:
        env.setattr(importlib.import_module(name), "__version__", "99.0.0")
        return READER, b.questions
    return upgrade


def reader(**changes) -> Callable[..., tuple[ReaderSettings, QuestionSet]]:
    return lambda b, env, request: (READER.model_copy(update=changes), b.questions)


def onnxruntime_fp32(b: Baseline, env: pytest.MonkeyPatch, request) -> tuple[ReaderSettings, QuestionSet]:
    pytest.importorskip("onnxruntime", reason="ONNX Runtime (onnxruntime) is not installed")
    return READER.model_copy(update={"runtime": "onnxruntime", "dtype": "fp32"}), b.questions


def asked(question_id: str, **changes) -> Callable[..., tuple[ReaderSettings, QuestionSet]]:
    return lambda b, env, request: (READER, question(b.questions, question_id, **changes))


def everything(b: Baseline, unit: Unit) -> bool:
    return True


def nothing(b: Baseline, unit: Unit) -> bool:
    return False


def of(question_id: str) -> Callable[[Baseline, Unit], bool]:
    return lambda b, unit: unit[2] == question_id


# What changes (the reader settings and questions of the rerun) -> which units it affects.
CASES: dict[str, tuple[Callable[..., tuple[ReaderSettings, QuestionSet]], Callable[[Baseline, Unit], bool]]] = {
    "nothing": (reader(), nothing),
    "batch size": (reader(batch_size=2), nothing),
    "device named": (reader(device=pick_device("auto")), nothing),
    "dtype auto resolves to, named": (reader(dtype=AUTO), nothing),
    "another dtype": (reader(dtype=OTHER), everything),
    "another dtype through the environment": (other_dtype_in_environment, everything),
    "int8": (reader(dtype="int8", device="cpu"), everything),  # int8 runs on the CPU only, GPU or not
    "runtime onnxruntime": (onnxruntime_fp32, everything),
    "max length": (reader(max_length=112), everything),
    "max length: the model's": (reader(max_length=None), everything),
    "stride": (reader(stride=24), everything),
    "question tokens": (reader(question_tokens=28), everything),
    "n best": (reader(n_best=5), everything),
    "null threshold": (reader(null_threshold=0.1), everything),
    "q1 answer length": (asked("q1", max_answer_tokens=7), of("q1")),
    "q1 top k": (asked("q1", top_k=2), of("q1")),
    "q1 may be empty": (asked("q1", allow_empty=True), of("q1")),
    "q2 retrieval budget": (asked("q2", retrieval=RetrievalSpec(mode="bm25", budget=1)), of("q2")),
    "q2's model revised": (q2_model_revised, lambda b, unit: unit[0] == str(b.electra)),
    "transformers upgraded": (library_upgraded("transformers"), everything),
    "tokenizers upgraded": (library_upgraded("tokenizers"), everything),
    "torch upgraded": (library_upgraded("torch"), everything),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_a_changed_setting_recomputes_exactly_what_it_affects(case, baseline, tmp_path, monkeypatch, request):
    change, affected = CASES[case]
    settings, questions = change(baseline, monkeypatch, request)
    read, results = run(questions, settings, Path(shutil.copytree(baseline.cache, tmp_path / "cache")))
    expected = {unit for unit in baseline.units if affected(baseline, unit)}
    assert read == expected
    assert results.hits == len(baseline.units) - len(expected)


def test_a_hub_model_is_known_by_the_commit_of_its_cached_snapshot(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    assert model_fingerprint("org/reader") == "org/reader"  # not downloaded yet: the id alone
    repo = tmp_path / "models--org--reader"
    (repo / "refs").mkdir(parents=True)
    for commit in ("a" * 40, "b" * 40):  # downloaded, then updated on the Hub and downloaded again
        (repo / "snapshots" / commit).mkdir(parents=True)
        (repo / "snapshots" / commit / "config.json").write_text("{}", encoding="utf-8")
        (repo / "refs" / "main").write_text(commit, encoding="utf-8")
        assert model_fingerprint("org/reader") == f"org/reader@{commit}"


PROMPTS = ["List the methods:\nrandom forest\nRF", "List the software:\ncaret\nR"]


@pytest.mark.slow
def test_llm_outputs_are_cached_per_setting_that_changes_them(tiny_models, tmp_path, monkeypatch):
    import transformers

    from mlpsych.errors import NormalizerUnavailable
    from mlpsych.normalize.cache import CachedNormalizer

    llama = shutil.copytree(tiny_models["llama"], tmp_path / "llama")
    cache = ResultCache(tmp_path / "cache")

    def generated(prompts: list[str] = PROMPTS, **changes) -> int:
        normalizer = CachedNormalizer(str(llama), LLMSettings(**{"max_new_tokens": 8, **changes}), cache)
        normalizer.run(prompts)
        normalizer.release()
        return normalizer.generated

    assert generated() == 2
    assert generated() == 0
    assert generated(batch_size=1) == 0
    assert generated(dtype=AUTO) == 0
    assert generated(dtype=OTHER) == 2
    monkeypatch.setenv(DTYPE_ENV, OTHER)
    assert generated() == 0  # "auto" is now that other dtype: its outputs are reused
    monkeypatch.delenv(DTYPE_ENV)
    assert generated(max_new_tokens=9) == 2
    with monkeypatch.context() as upgraded:
        upgraded.setattr(transformers, "__version__", "99.0.0")  # generation may change with the library
        assert generated() == 2
    assert generated([PROMPTS[0], "List the methods:\nlasso"]) == 1
    config = llama / "tokenizer_config.json"  # the chat template lives here: a revised model
    config.write_text(config.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert generated() == 2
    if not pick_device("auto").startswith("cuda"):  # 4-bit needs CUDA: never the unquantized outputs instead
        with pytest.raises(NormalizerUnavailable, match="4bit"):
            generated(quantization="4bit")
