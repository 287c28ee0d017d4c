#!/usr/bin/env bash
# The built wheel works outside the checkout: build it, install it into a clean venv in a temporary folder, and run
# mlpsych from there (the question library by name, tiny offline models, a spreadsheet out).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip wheel --quiet --no-deps -w "$work/dist" "$repo"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet "$work"/dist/mlpsych-*.whl
cp -r "$repo/examples/papers" "$work/papers"
cd "$work"  # nothing of the checkout is importable from here
export HF_HUB_OFFLINE=1 MLPSYCH_CACHE="$work/cache"
"$work/venv/bin/python" - <<'PY'
import mlpsych, mlpsych.questions as q
assert "site-packages" in mlpsych.__file__, mlpsych.__file__
assert q.library_names() == ["mlpsych", "study-coding"], q.library_names()
for name in q.library_names():
    q.load_question_set(name)
print("wheel: library", q.library_names(), "from", q.library_dir())
PY
"$work/venv/bin/mlpsych" dev tiny-models "$work/tiny"  # its question file is built from the library's "mlpsych"
"$work/venv/bin/mlpsych" run papers --questions "$work/tiny/questions.yaml" --out out.xlsx --no-progress \
    --max-length 128 --stride 32 --max-sub-questions 2 --no-normalize
test -s out.xlsx
# PDFs as installed (the pdfium backend from the wheel's dependencies): the examples' typeset PDFs, and the real
# published PDFs beside the checkout where this machine has them; each must be read, with its pages.
pdfs=("$repo/examples/pdf")
real="${MLPSYCH_REALPDFS:-$repo/../shared/realpdfs}"
[ -d "$real" ] && pdfs+=("$real")
for folder in "${pdfs[@]}"; do
  "$work/venv/bin/mlpsych" ingest "$folder" --pdf-backend pdfium --quiet --out "$work/pdf.jsonl"
  "$work/venv/bin/python" - "$folder" "$work/pdf.jsonl" <<'PY'
import json, pathlib, sys
folder, out = pathlib.Path(sys.argv[1]), sys.argv[2]
docs = [json.loads(line) for line in open(out, encoding="utf-8")]
assert len(docs) == len(list(folder.glob("*.pdf"))), (len(docs), folder)
bad = [(d["id"], d["status"]) for d in docs if d["status"] != "ok" or len(d["pages"]) < 2 or len(d["text"]) < 2000]
assert not bad, bad
print(f"wheel: {len(docs)} PDFs of {folder.name} read, {sum(len(d['pages']) for d in docs)} pages")
PY
done
# The fast preset's cascade as installed: the tiny BERT as the small reader, the template's tiny readers after it.
"$work/venv/bin/mlpsych" run papers --questions "$work/tiny/questions.yaml" --preset fast \
    --small-reader "$work/tiny/bert" --out fast.xlsx --no-progress --max-sub-questions 2 --no-normalize
test -s fast.xlsx
# ONNX Runtime readers as installed: without the extra, one line saying how to add it (exit 2); with it, a run.
set +e
"$work/venv/bin/mlpsych" run papers --questions "$work/tiny/questions.yaml" --runtime onnxruntime --no-progress \
    --max-length 128 --stride 32 --max-sub-questions 2 --no-normalize --out ort.xlsx 2> err.txt
code=$?
set -e
grep -q 'mlpsych\[onnx\]' err.txt && [ "$code" -eq 2 ] || { cat err.txt; exit 1; }
"$work/venv/bin/pip" install --quiet "$(ls "$work"/dist/mlpsych-*.whl)[onnx]"
"$work/venv/bin/mlpsych" run papers --questions "$work/tiny/questions.yaml" --runtime onnxruntime --dtype int8 \
    --no-progress --max-length 128 --stride 32 --max-sub-questions 2 --no-normalize --out ort.xlsx
"$work/venv/bin/python" - <<'PY'
import openpyxl
book = openpyxl.load_workbook("ort.xlsx")
run = {row[0]: row[1] for row in book["run"].iter_rows(values_only=True)}
assert run["setting reader.runtime"] == "onnxruntime" and run["reader_dtype"] == "qint8", run
assert book["answers"].max_row > 1
print("wheel: ONNX Runtime readers (int8) answered from the installed wheel")
PY
# The page as installed (the wheel had none): without the app extra, one line saying how to add it (exit 2); with
# it, the installed page renders in Streamlit's AppTest, and `mlpsych app` serves it (health checked, then stopped).
set +e
"$work/venv/bin/mlpsych" app --port 8599 2> err.txt
code=$?
set -e
grep -q 'mlpsych\[app\]' err.txt && [ "$code" -eq 2 ] || { cat err.txt; exit 1; }
"$work/venv/bin/pip" install --quiet "$(ls "$work"/dist/mlpsych-*.whl)[app]"
"$work/venv/bin/python" - <<'PY'
from streamlit.testing.v1 import AppTest
from mlpsych.app import launch
assert "site-packages" in str(launch.PAGE), launch.PAGE
at = AppTest.from_file(str(launch.PAGE), default_timeout=60).run()
assert not at.exception and at.title[0].value.startswith("mlpsych"), [e.value for e in at.exception]
print("wheel: the installed page renders", launch.PAGE)
PY
port=$("$work/venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$work/venv/bin/mlpsych" app --port "$port" > app.log 2>&1 &
app_pid=$!
trap 'kill "$app_pid" 2>/dev/null; wait "$app_pid" 2>/dev/null; rm -rf "$work"' EXIT
"$work/venv/bin/python" - "$port" "$app_pid" <<'PY' || { cat app.log; exit 1; }
import os, sys, time, urllib.request
port, pid = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen(f"http://localhost:{port}/_stcore/health", timeout=2) as response:
            assert response.read() == b"ok"
            print(f"wheel: mlpsych app answered on port {port}")
            break
    except OSError:
        os.kill(pid, 0)  # still running, else the server exited: fail
        time.sleep(0.5)
else:
    sys.exit("mlpsych app did not answer within 60 s")
PY
kill -INT "$app_pid"
wait "$app_pid"  # Ctrl-C stops it with exit code 0
trap 'rm -rf "$work"' EXIT
# The coding loop as installed: the tiny BERT adapted on the examples' hand coding (its calibrator cross-fitted by
# fold readers), then a run that reads with it and says so in its run sheet.
"$work/venv/bin/mlpsych" adapt --reader "$work/tiny/bert" --texts papers --gold "$repo/examples/gold.json" \
    --questions "$work/tiny/questions.yaml" --out adapted --epochs 1 --min-answers 1 --no-progress > adapt.txt
test -s adapted/model.safetensors && test -s adapted/mlpsych_reader.json
"$work/venv/bin/mlpsych" run papers --questions "$work/tiny/questions.yaml" --adapted adapted --out adapted.xlsx \
    --no-progress --max-length 128 --stride 32 --max-sub-questions 2 --no-normalize
"$work/venv/bin/python" - <<'PY'
import pathlib, openpyxl
run = {row[0]: row[1] for row in openpyxl.load_workbook("adapted.xlsx")["run"].iter_rows(values_only=True)}
assert run["adapted_readers"].startswith("adapted: answered q1"), run["adapted_readers"]
own = pathlib.Path("adapted/calibrator.json").is_file()  # none when the fold readers got no coded answer right
assert own == ("q1: adapted/calibrator.json" in run["calibrator"]), (own, run["calibrator"])
print("wheel: adapted reader used,", "with its own calibrator" if own else "no calibrator of its own")
PY
# A library name with models that are not on this machine: the one-line offline message, exit code 2.
set +e
"$work/venv/bin/mlpsych" run papers --questions mlpsych --only q2 --no-progress --out out2.xlsx 2> err.txt
code=$?
set -e
grep -q "these models are needed and not available" err.txt && [ "$code" -eq 2 ] || { cat err.txt; exit 1; }
echo "wheel: ok (installed outside the checkout, ran the library, tiny models, ONNX Runtime readers, an adapted reader and the page)"
