"""Readers run by ONNX Runtime: the same answers as torch in fp32 for every family, int8 of the encoder only, the
export made once and never left half-written, and clear refusals."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from mlpsych.files import LEFTOVER_SECONDS
from mlpsych.documents import Document
from mlpsych.errors import ModelLoadError
from mlpsych.models import DTYPE_ENV
from mlpsych.reading.reader import Query, Reader
from mlpsych.settings import ReaderSettings

pytest.importorskip("onnxruntime", reason="ONNX Runtime (onnxruntime) is not installed")
onnx = pytest.importorskip("onnx", reason="onnx is not installed")

from mlpsych import onnx_runtime  # noqa: E402 - after the skip: it is what is tested

TEXT = " ".join(
    f"In study {i}, participants (N = {100 + i}) were classified with random forests and support vector machines; "
    f"the models were fitted in R with the caret package (version 6.0-{i})."
    for i in range(30)
)
DOC = Document(id="d", text=TEXT)
# Two questions of different lengths, windows of 96 tokens laid out around each: inputs of several lengths, read
# in batches of 3, so an export that fixed the traced example's shape would answer differently.
QUERIES = [Query("q1", "What methods were used?", 10, 8),
           Query("q2", "Which software packages and versions were used to fit the models in the study?", 5, 6)]


def reader(model, **settings) -> Reader:
    return Reader(str(model), ReaderSettings(device="cpu", max_length=96, stride=24, batch_size=3, **settings))


def read(model, **settings) -> dict[int, list]:
    r = reader(model, **settings)
    spans = r.run(DOC, QUERIES)
    r.release()
    return spans


@pytest.mark.parametrize("family", ["deberta-v2", "albert", "electra", "roberta", "bert"])
def test_onnxruntime_reads_torchs_answers_in_fp32(tiny_models, family):
    torch_spans = read(tiny_models[family], dtype="fp32")
    ort_spans = read(tiny_models[family], dtype="fp32", runtime="onnxruntime")
    for qi in range(len(QUERIES)):
        assert [(s.start, s.end, s.text) for s in ort_spans[qi]] == [(s.start, s.end, s.text) for s in torch_spans[qi]]
        assert [s.score for s in ort_spans[qi]] == pytest.approx([s.score for s in torch_spans[qi]], rel=1e-4)
        assert [s.null_score for s in ort_spans[qi]] == pytest.approx([s.null_score for s in torch_spans[qi]],
                                                                      rel=1e-4)


@pytest.mark.parametrize("family", ["deberta-v2", "bert"])
def test_int8_quantizes_the_encoder_and_keeps_the_span_head(tiny_models, family):
    r = reader(tiny_models[family], dtype="int8", runtime="onnxruntime")
    int8 = r.run(DOC, QUERIES)[0]
    graph = onnx.load(str(onnx_runtime.export_dir(r.model_id, r._template.uses_token_types) / "model-int8.onnx")).graph
    integer = [n.name for n in graph.node if n.op_type == "MatMulInteger"]
    head = [n.op_type for n in graph.node if "qa_outputs" in n.name]
    assert len(integer) >= 12  # two layers' query, key, value, output and both feed-forward products
    assert "MatMul" in head and "MatMulInteger" not in head
    fp32 = read(tiny_models[family], dtype="fp32", runtime="onnxruntime")[0]
    assert int8[0].start == fp32[0].start and int8[0].end == fp32[0].end
    scores = {(s.start, s.end): s.score for s in fp32}
    shared = [s for s in int8 if (s.start, s.end) in scores]
    assert len(shared) >= 6
    # a random-weight model's scores are near-uniform: int8 moves them by up to a tenth of the best (0.106 with the
    # device machine's tiny DeBERTa, whose vocabulary another sentencepiece trained)
    assert 0 < max(abs(s.score - scores[s.start, s.end]) for s in shared) < 0.2 * max(scores.values())


def test_the_export_is_made_once_and_reused_and_int8_when_first_asked_for(tiny_models, tmp_path, monkeypatch):
    monkeypatch.setenv("MLPSYCH_CACHE", str(tmp_path))
    first = reader(tiny_models["electra"], runtime="onnxruntime")
    first.warm_up()
    folder = onnx_runtime.export_dir(first.model_id, first._template.uses_token_types)
    assert folder.parent == tmp_path / "onnx"
    made = {f.name: f.stat().st_mtime_ns for f in folder.iterdir()}
    assert set(made) == {"model.onnx"}  # no int8 file until int8 is read
    second = reader(tiny_models["electra"], runtime="onnxruntime", dtype="int8")
    second.warm_up()
    files = {f.name: f.stat().st_mtime_ns for f in folder.iterdir()}
    assert set(files) == {"model.onnx", "model-int8.onnx"} and files["model.onnx"] == made["model.onnx"]
    reader(tiny_models["electra"], runtime="onnxruntime", dtype="int8").warm_up()
    assert {f.name: f.stat().st_mtime_ns for f in folder.iterdir()} == files
    assert [p.name for p in (tmp_path / "onnx").iterdir()] == [folder.name]  # no work folder left behind


def test_a_failed_export_leaves_nothing_behind_and_the_next_run_exports(tiny_models, tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv("MLPSYCH_CACHE", str(tmp_path))

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # the user's Ctrl-C while the export is written

    with monkeypatch.context() as patch:
        patch.setattr(torch.onnx, "export", crash)
        with pytest.raises(KeyboardInterrupt):
            reader(tiny_models["bert"], runtime="onnxruntime").warm_up()
    assert list((tmp_path / "onnx").iterdir()) == []
    assert read(tiny_models["bert"], runtime="onnxruntime")[0]


def test_a_failed_quantization_leaves_the_export_whole_and_the_next_run_quantizes(tiny_models, tmp_path, monkeypatch):
    from onnxruntime import quantization

    monkeypatch.setenv("MLPSYCH_CACHE", str(tmp_path))
    r = reader(tiny_models["bert"], runtime="onnxruntime")
    r.warm_up()
    folder = onnx_runtime.export_dir(r.model_id, r._template.uses_token_types)

    def crash(model_input, model_output, **kwargs):
        Path(model_output).write_bytes(b"half a model")
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(quantization, "quantize_dynamic", crash)
        with pytest.raises(KeyboardInterrupt):
            reader(tiny_models["bert"], runtime="onnxruntime", dtype="int8").warm_up()
    assert [f.name for f in folder.iterdir()] == ["model.onnx"]
    assert read(tiny_models["bert"], runtime="onnxruntime", dtype="int8")[0]


def test_an_export_finished_meanwhile_by_another_process_is_kept(tiny_models, tmp_path):
    """Two processes (Ray workers on one machine) may export the same model at once: the one that finishes second
    finds the folder in place, keeps it and leaves no work folder behind."""
    model = str(tiny_models["bert"])
    folder = onnx_runtime.export_dir(model, True, tmp_path)
    onnx_runtime.export_model(model, folder, True)
    made = {f.name: f.stat().st_mtime_ns for f in folder.iterdir()}
    onnx_runtime.export_model(model, folder, True)  # the slower process, finishing after the first
    assert {f.name: f.stat().st_mtime_ns for f in folder.iterdir()} == made
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]
    assert onnx_runtime.load_onnx_qa_model(model, "qint8", True, tmp_path).inputs == \
        ["input_ids", "attention_mask", "token_type_ids"]
    onnx_runtime.quantize_export(folder)  # the int8 twin made twice: replaced whole, no temporary file left
    assert sorted(f.name for f in folder.iterdir()) == ["model-int8.onnx", "model.onnx"]


def test_quantizing_uses_no_shared_scratch_file(tiny_models, tmp_path):
    """ONNX Runtime's quantizer writes a shape-inferred copy beside its input and deletes it after: two Ray workers
    quantizing one export at once lost each other's copy (a paper failed with "No such file ...-inferred.onnx").
    Another process's copy is stood for by a folder in its place: quantizing must not need that name."""
    model = str(tiny_models["roberta"])
    folder = onnx_runtime.export_dir(model, False, tmp_path)
    onnx_runtime.export_model(model, folder, False)
    (folder / "model-inferred.onnx").mkdir()
    onnx_runtime.quantize_export(folder)
    assert sorted(f.name for f in folder.iterdir()) == ["model-inferred.onnx", "model-int8.onnx", "model.onnx"]
    assert onnx_runtime.load_onnx_qa_model(model, "qint8", False, tmp_path).inputs == ["input_ids", "attention_mask"]


def test_a_damaged_export_is_one_clear_error(tiny_models, tmp_path, monkeypatch):
    monkeypatch.setenv("MLPSYCH_CACHE", str(tmp_path))
    r = reader(tiny_models["roberta"], runtime="onnxruntime")
    r.warm_up()
    folder = onnx_runtime.export_dir(r.model_id, r._template.uses_token_types)
    (folder / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(ModelLoadError, match="delete .* to export it again") as error:
        reader(tiny_models["roberta"], runtime="onnxruntime").warm_up()
    assert str(folder) in str(error.value)


@pytest.mark.parametrize(("flags", "message"), [
    (["--dtype", "bf16"], "--runtime onnxruntime: runtime onnxruntime reads in fp32 or int8 (dtype 'bf16' asked for)"),
    (["--dtype", "fp16"], "reads in fp32 or int8"),
    (["--device", "cuda"], "reads on the CPU only (device 'cuda' asked for)"),
])
def test_settings_onnxruntime_cannot_read_are_refused_with_the_settings(flags, message):
    from mlpsych.cli import build_parser
    from mlpsych.cli.run_cmd import settings_from_args
    from mlpsych.errors import UserError
    from mlpsych.questions import load_question_set

    args = build_parser().parse_args(["run", "papers", "--runtime", "onnxruntime", *flags])
    with pytest.raises(UserError, match=re.escape(message)):
        settings_from_args(args, load_question_set("mlpsych"))
    args = build_parser().parse_args(["run", "papers", "--runtime", "onnxruntime", "--dtype", "int8"])
    assert settings_from_args(args, load_question_set("mlpsych"))[1].reader.runtime == "onnxruntime"


def test_without_onnxruntime_installed_the_error_says_how_to_install_it(tiny_models, tiny_questions, examples_dir,
                                                                        tmp_path, monkeypatch, capsys):
    from mlpsych.cli import main

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # what importing it does where it is not installed
    with pytest.raises(ModelLoadError, match=r"mlpsych\[onnx\]"):
        reader(tiny_models["bert"], runtime="onnxruntime").warm_up()
    out = tmp_path / "out.xlsx"
    code = main(["run", str(examples_dir / "papers"), "--questions", str(tiny_questions), "--runtime", "onnxruntime",
                 "--no-progress", "--no-normalize", "--out", str(out), "--cache", str(tmp_path / "cache")])
    error = capsys.readouterr().err
    assert code == 2 and 'pip install "mlpsych[onnx]"' in error and len(error.strip().splitlines()) == 1
    assert not out.exists() and not (tmp_path / "cache").exists()  # said before any paper was read


def test_cache_fields_name_the_runtime_and_its_own_auto(monkeypatch):
    torch_fields = ReaderSettings().cache_fields()
    assert "runtime" not in torch_fields  # results cached before runtimes existed keep their keys
    monkeypatch.setenv(DTYPE_ENV, "bf16")  # sets torch's auto, not ONNX Runtime's
    ort = ReaderSettings(runtime="onnxruntime").cache_fields()
    assert ort["runtime"] == "onnxruntime" and ort["dtype"] == "float32"
    assert ReaderSettings(runtime="onnxruntime", dtype="int8").cache_fields()["dtype"] == "qint8"
    assert {k: v for k, v in ort.items() if k not in ("runtime", "dtype", "onnxruntime")} == \
        {k: v for k, v in torch_fields.items() if k != "dtype"}
    monkeypatch.setattr(onnx_runtime.import_onnxruntime(), "__version__", "99.0.0")  # an upgrade of ONNX Runtime reads again
    assert ReaderSettings(runtime="onnxruntime").cache_fields() == {**ort, "onnxruntime": "99.0.0"}


def test_a_cache_folder_that_takes_no_export_is_one_clear_error(tiny_models, tiny_questions, examples_dir, tmp_path,
                                                                  monkeypatch, capsys):
    """A cache folder that is read-only, full or has a file where the exports go ended the run with
    'NotADirectoryError ... this is a bug in mlpsych'."""
    from mlpsych.cli import main

    cache = tmp_path / "cache"
    monkeypatch.setenv("MLPSYCH_CACHE", str(cache))
    cache.mkdir()
    (cache / "onnx").write_text("a file where the exports' folder goes")
    code = main(["run", str(examples_dir / "papers"), "--questions", str(tiny_questions), "--runtime", "onnxruntime",
                 "--no-progress", "--no-normalize", "--out", str(tmp_path / "out.xlsx"), "--cache", str(cache)])
    error = capsys.readouterr().err
    assert code == 2 and "bug" not in error
    assert f"the ONNX export of {tiny_models['deberta-v2']} {cache / 'onnx'}" in error
    assert "free space there or make it writable" in error


def test_the_export_is_kept_in_the_runs_cache_folder(tiny_models, tiny_questions, examples_dir, tmp_path, monkeypatch):
    """``--cache`` moved the results but not the ONNX exports: they were still written to the per-user cache folder
    (a home folder over its quota stopped the run though --cache named a folder with room)."""
    from mlpsych.cli import main

    monkeypatch.setenv("MLPSYCH_CACHE", str(tmp_path / "default"))
    cache = tmp_path / "cache"
    code = main(["run", str(examples_dir / "papers" / "burnout-survey-text.txt"), "--questions", str(tiny_questions),
                 "--only", "q1", "--runtime", "onnxruntime", "--no-progress", "--no-normalize",
                 "--out", str(tmp_path / "out.jsonl"), "--cache", str(cache)])
    assert code == 0
    exports = list((cache / "onnx").iterdir())
    assert exports and all((folder / "model.onnx").is_file() for folder in exports)
    assert not (tmp_path / "default").exists()


def test_without_onnx_the_error_names_onnx_not_onnxruntime(tiny_models, monkeypatch):
    """ONNX Runtime installed alone (pip install onnxruntime) was told 'needs ONNX Runtime, which is not installed'."""
    monkeypatch.setitem(sys.modules, "onnx", None)  # what importing it does where it is not installed
    with pytest.raises(ModelLoadError, match=r"needs onnx \(.*not installed: pip install \"mlpsych\[onnx\]\"") as error:
        reader(tiny_models["bert"], runtime="onnxruntime").warm_up()
    assert "needs ONNX Runtime" not in str(error.value)


def test_a_killed_exports_work_folder_goes_with_the_next_export_but_a_running_ones_stays(tmp_path):
    """A SIGKILL during an export skips its clean-up: its `.export-*` (or `.int8-*`) folder, a model's size, stayed in
    the cache for good. The next export into the same folder removes those unchanged for an hour; a younger one may
    be another process's export under way."""
    import os
    import time

    old = time.time() - LEFTOVER_SECONDS - 60
    killed, running, kept = tmp_path / ".export-killed", tmp_path / ".export-running", tmp_path / "0123abcd"
    for folder in (killed, running, kept):
        folder.mkdir()
        (folder / onnx_runtime.FP32_FILE).write_bytes(b"half")
    for path in (killed / onnx_runtime.FP32_FILE, killed, kept):
        os.utime(path, (old, old))
    touched = tmp_path / ".export-writing"  # an old folder whose file is being written now
    touched.mkdir()
    (touched / onnx_runtime.FP32_FILE).write_bytes(b"half")
    os.utime(touched, (old, old))
    with onnx_runtime._work_folder(tmp_path, ".export-") as work:
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".export-running", ".export-writing", "0123abcd",
                                                                     work.name])
    assert not work.exists()


def test_an_export_in_a_shared_cache_folder_is_readable_by_the_colleagues_sharing_it(tiny_models, tmp_path):
    """The export was made in a `tempfile.mkdtemp` folder (its owner's only, 0700) and renamed into place: a
    colleague whose $MLPSYCH_CACHE names the same group folder stopped at it with "PermissionError ... this is a
    bug in mlpsych" (seen as another user). It now has the permissions the umask gives any new folder."""
    import os
    import stat

    model = str(tiny_models["bert"])
    folder = onnx_runtime.export_dir(model, True, tmp_path)
    umask = os.umask(0o002)  # a lab's group folder
    try:
        onnx_runtime.export_model(model, folder, True)
        onnx_runtime.quantize_export(folder)
    finally:
        os.umask(umask)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o775
    assert {f.name: stat.S_IMODE(f.stat().st_mode) for f in folder.iterdir()} == {"model.onnx": 0o664,
                                                                                 "model-int8.onnx": 0o664}


def test_an_export_this_user_may_not_read_is_one_line(tiny_models, tmp_path, monkeypatch):
    """An export a colleague made that only they may read (made by an older mlpsych, or under their umask 077)."""
    from mlpsych.errors import CacheError

    model = str(tiny_models["bert"])
    folder = onnx_runtime.export_dir(model, True, tmp_path)
    is_file = Path.is_file

    def denied(path: Path) -> bool:
        if folder in path.parents:
            raise PermissionError(13, "Permission denied", str(path))
        return is_file(path)

    monkeypatch.setattr(Path, "is_file", denied)
    with pytest.raises(CacheError) as error:
        onnx_runtime.load_onnx_qa_model(model, "float32", True, tmp_path)
    assert str(error.value) == (
        f"the ONNX export of {model} {folder} cannot be read (Permission denied): make it readable and writable "
        "for you (its owner can), or choose another cache folder (--cache or $MLPSYCH_CACHE); results stored "
        "before are kept, rerun to resume")
