"""Readers run by ONNX Runtime on the CPU: the model exported once per machine, cached, and read like torch's.

Why: on a CPU, DeBERTa-v3's relative-position attention is many small operations that eager torch runs at 27% of
the matmul rate; ONNX Runtime read a DeBERTa-v3-base window 1.1x faster than torch in bf16 with fp32's logits
(within 1e-6), and 1.8x faster in int8 (benchmarks/README.md, onnx_runtime). ``runtime: onnxruntime`` in the
reader settings uses it. torch stays the default: with bf16 in the CPU it read the fast preset faster end to end
(MiniLM is slower in ONNX Runtime), and int8's answers fell short, in ONNX Runtime as in torch ("ONNX Runtime
readers" there); where torch reads fp32, ONNX Runtime gives the same answers sooner.

The export is torch's own (``torch.onnx.export``) of the model as :func:`mlpsych.models.load_qa_model` loads it
(safetensors only), with batch and length dynamic, kept under the cache folder by the model's fingerprint, the
torch and transformers versions and the inputs the reader feeds. int8 is ONNX Runtime's dynamic quantization of
the encoder's matrix products (weights int8, activations quantized per batch at run time), the span head kept in
fp32 as torch's int8 keeps it. ONNX files are protobuf data: loading one runs no code.
"""

from __future__ import annotations

import logging
import os
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlpsych.errors import ModelLoadError

log = logging.getLogger(__name__)

OPSET = 17
EXPORT_VERSION = 1  # bump when the export changes what a cached file holds
FP32_FILE, INT8_FILE = "model.onnx", "model-int8.onnx"
INSTALL_HELP = 'pip install "mlpsych[onnx]" (ONNX Runtime and onnx, from PyPI)'
DTYPES = {"auto": "float32", "fp32": "float32", "float32": "float32", "int8": "qint8", "qint8": "qint8"}


def refusal(dtype: str, device: str) -> str | None:
    """Why ONNX Runtime cannot read in ``dtype`` on ``device``, or None: it reads fp32 or int8 (its CPU kernels have
    no bf16 or fp16 matrix products), on the CPU (its GPU build is not what mlpsych installs, and torch reads well
    on GPUs)."""
    if device not in ("auto", "cpu"):
        return (f"runtime onnxruntime reads on the CPU only (device {device!r} asked for); use device cpu, or "
                "runtime torch on a GPU")
    if dtype not in DTYPES:
        return f"runtime onnxruntime reads in fp32 or int8 (dtype {dtype!r} asked for); use auto, fp32 or int8"
    return None


def onnx_dtype(requested: str, device: str = "auto") -> str:
    """The precision an ONNX Runtime reader reads in: ``auto`` and fp32 are float32 ($MLPSYCH_DTYPE, which sets
    torch's auto, does not apply), int8 is ``qint8``. Settings refuse the others (``refusal``); settings copied
    around validation are refused here, at loading."""
    reason = refusal(requested, device)
    if reason:
        raise ModelLoadError(reason)
    return DTYPES[requested]


def import_onnxruntime():
    """ONNX Runtime's module, or a ModelLoadError saying how to install it and onnx, which its quantizer uses
    (asked before a run reads any paper)."""
    try:
        import onnx  # noqa: F401 - what int8 quantization edits the graph with
        import onnxruntime
    except ImportError as error:
        # onnxruntime installed without onnx was said to be "ONNX Runtime, which is not installed": name the missing one
        missing = "onnx (ONNX Runtime's quantizer uses it)" if error.name == "onnx" else "ONNX Runtime"
        raise ModelLoadError(f"runtime onnxruntime needs {missing}, which is not installed: {INSTALL_HELP}") \
            from error
    return onnxruntime


@dataclass
class OnnxOutput:
    """What a transformers QA model returns, as far as the reader reads it."""

    start_logits: object
    end_logits: object


class OnnxQAModel:
    """An exported extractive QA model in an ONNX Runtime session, called as the torch model is called (keyword
    tensors in, ``start_logits`` / ``end_logits`` out), so the reader batches, pads and decodes the same way."""

    def __init__(self, session, config) -> None:
        self.session = session
        self.config = config
        self.inputs = [i.name for i in session.get_inputs()]

    def __call__(self, **inputs) -> OnnxOutput:
        import torch

        arrays = {name: np.ascontiguousarray(value.numpy(), dtype=np.int64) for name, value in inputs.items()}
        if "token_type_ids" in self.inputs and "token_type_ids" not in arrays:
            arrays["token_type_ids"] = np.zeros_like(arrays["input_ids"])
        start, end = self.session.run(["start_logits", "end_logits"], {k: arrays[k] for k in self.inputs})
        return OnnxOutput(torch.from_numpy(start), torch.from_numpy(end))


def _logits_module(model, with_types: bool):
    """The model as a module of positional tensors returning (start, end): the form the exporter traces."""
    import torch

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            extra = {"token_type_ids": token_type_ids} if with_types else {}
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, **extra)
            return out.start_logits, out.end_logits

    return Logits()


def export_dir(model_id: str, with_types: bool, cache_dir: Path | None = None) -> Path:
    """Where ``model_id``'s export lives: one folder per model fingerprint, exporter and inputs."""
    import torch
    import transformers

    from mlpsych.cache import default_cache_dir, make_key, model_fingerprint

    key = make_key(model=model_fingerprint(model_id), torch=torch.__version__, transformers=transformers.__version__,
                   opset=OPSET, version=EXPORT_VERSION, token_types=with_types)
    return (cache_dir or default_cache_dir()) / "onnx" / key[:32]


def export_model(model_id: str, folder: Path, with_types: bool) -> None:
    """Export ``model_id`` (fp32) to ``folder/model.onnx``: written in a work folder beside it and moved into place
    whole, so a crash or a second process never leaves half a file."""
    import torch

    from mlpsych.cache import cache_faults
    from mlpsych.models import load_qa_model

    model = load_qa_model(model_id, "cpu", torch.float32)
    # A cache folder that takes no file (read-only, full, a file in its place) ended the run as "a bug in mlpsych"
    with cache_faults(folder, "written", what=f"the ONNX export of {model_id}"):
        folder.parent.mkdir(parents=True, exist_ok=True)
        with _work_folder(folder.parent, ".export-") as work:
            ids = torch.ones((2, 16), dtype=torch.long)
            args = (ids, torch.ones_like(ids)) + ((torch.zeros_like(ids),) if with_types else ())
            names = ["input_ids", "attention_mask"] + (["token_type_ids"] if with_types else [])
            log.info("exporting %s to ONNX once (cached in %s)", model_id, folder)
            with torch.inference_mode(), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the exporter's notices on traced shapes and its own deprecation
                torch.onnx.export(_logits_module(model, with_types), args, work / FP32_FILE, input_names=names,
                                  output_names=["start_logits", "end_logits"], opset_version=OPSET, dynamo=False,
                                  dynamic_axes={name: {0: "batch", 1: "tokens"} for name in names})
            try:
                os.rename(work, folder)
            except OSError:  # another process exported it meanwhile: theirs is the same
                if not (folder / FP32_FILE).is_file():
                    raise


def quantize_export(folder: Path) -> None:
    """The export's int8 twin ``folder/model-int8.onnx``, made when int8 is first asked for (a third of the fp32
    file's size): the encoder's matrix products quantized, the span head's left in fp32. Made in a private work
    folder (the quantizer writes a shape-inferred copy beside its input, which two processes quantizing at once
    would share) and moved into place whole."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from mlpsych.cache import cache_faults

    head = [n for n in _matmul_nodes(folder / FP32_FILE) if "qa_outputs" in n]
    with cache_faults(folder, "written", what="the int8 ONNX export"), _work_folder(folder, ".int8-") as work:
        source = work / FP32_FILE
        try:
            os.link(folder / FP32_FILE, source)  # the same file under a private name: nothing copied
        except OSError:  # a file system without hard links
            shutil.copyfile(folder / FP32_FILE, source)
        with _root_notices_dropped():
            quantize_dynamic(source, work / INT8_FILE, weight_type=QuantType.QInt8, nodes_to_exclude=head)
        os.replace(work / INT8_FILE, folder / INT8_FILE)


@contextmanager
def _work_folder(parent: Path, prefix: str) -> Iterator[Path]:
    """A private folder in ``parent`` (the same file system, so what is made there moves into place whole), gone
    after, whatever was left in it by a crash or a Ctrl-C; a killed process's left-overs go the next time."""
    from mlpsych.files import remove_leftovers, work_folder

    remove_leftovers(p for p in parent.glob(prefix + "*") if p.is_dir() and not p.is_symlink())
    work = work_folder(parent, prefix)  # renamed into place as the export: readable by whoever shares the cache
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


class _ErrorsOnly(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


@contextmanager
def _root_notices_dropped():
    """ONNX Runtime's quantizer logs a line per tensor (and advice on pre-processing) on the root logger: those
    are dropped below errors while it runs. Records of named loggers (mlpsych's) pass, since a logger's filters
    see only what is logged on it."""
    root = logging.getLogger()
    quiet = _ErrorsOnly()
    root.addFilter(quiet)
    try:
        yield
    finally:
        root.removeFilter(quiet)


def _matmul_nodes(path: Path) -> list[str]:
    import onnx

    return [node.name for node in onnx.load(str(path), load_external_data=False).graph.node
            if node.op_type in ("MatMul", "Gemm")]


def load_onnx_qa_model(model_id: str, dtype: str, with_types: bool, cache_dir: Path | None = None) -> OnnxQAModel:
    """``model_id`` read by ONNX Runtime in ``dtype`` (float32 or qint8), exported first if this machine has not
    exported it yet (under ``cache_dir``, default mlpsych's cache folder), with torch's number of threads (its
    setting governs both runtimes)."""
    import torch
    from transformers import AutoConfig

    from mlpsych.cache import cache_faults
    from mlpsych.models import NO_REMOTE_CODE

    ort = import_onnxruntime()
    folder = export_dir(model_id, with_types, cache_dir)
    # an export only its maker may read (a colleague's, in a shared cache folder) was a PermissionError, as a bug
    with cache_faults(folder, "read", what=f"the ONNX export of {model_id}"):
        exported, quantized = (folder / FP32_FILE).is_file(), (folder / INT8_FILE).is_file()
    if not exported:
        export_model(model_id, folder, with_types)
    if dtype == "qint8" and not quantized:
        quantize_export(folder)
    options = ort.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    options.log_severity_level = 3  # errors only: its warnings on unused initializers are not the user's
    # Its threads otherwise spin after each call, taking the cores from the next stage or the other reader of a
    # cascade (both sessions alive, used in turn).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    file = folder / (INT8_FILE if dtype == "qint8" else FP32_FILE)
    try:
        session = ort.InferenceSession(str(file), options, providers=["CPUExecutionProvider"])
    except Exception as error:  # ONNX Runtime's own exception types are not importable by a stable name
        raise ModelLoadError(f"model {model_id!r}: its ONNX export {file} cannot be read by ONNX Runtime "
                             f"({str(error).strip().splitlines()[0]}); delete {folder} to export it again") from error
    log.info("loaded %s in ONNX Runtime (%s)", model_id, dtype)
    return OnnxQAModel(session, AutoConfig.from_pretrained(model_id, **NO_REMOTE_CODE))
