#!/usr/bin/env bash
# Create (once, cached per user) the ExecuTorch 1.5.1 "oracle" environment used by interop tests,
# and print its directory on the last line of stdout.
#
# The oracle is a `pip install --target` directory holding executorch (and the small pure-Python
# packages it imports), used as   PYTHONPATH=<dir> <repo>/.venv/bin/python script.py
# so it reuses the main venv's torch/torchvision and never touches the venv itself.
# executorch is a test oracle only: etkit never imports it (tests/interop/oracle.py runs it in a
# separate process).
#
#   scripts/et_oracle.sh            create if needed, print the directory
#   scripts/et_oracle.sh --check    also re-run the import check on an existing environment
#
# Environment: ETKIT_CACHE (default ~/.cache/etkit), ETKIT_VENV (default <repo>/.venv),
#              ETKIT_PYTHON (default $ETKIT_VENV/bin/python).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ETKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etkit}"
PY="${ETKIT_PYTHON:-${ETKIT_VENV:-$REPO_ROOT/.venv}/bin/python}"
ET_VERSION=1.5.1
DIR="$CACHE/et-oracle-$ET_VERSION"

# The packages executorch imports for export, lowering to XNNPACK and its Python runtime, found by
# trying. Everything else it declares (pandas, coremltools, hydra, ...) is not needed for that.
PACKAGES=(
  "executorch==$ET_VERSION"
  "torchao==0.18.*"
  "ruamel.yaml" "expecttest" "hypothesis" "tabulate" "parameterized" "kgb" "py-cpuinfo"
)
IMPORTS="import executorch.exir, executorch.runtime, executorch.backends.xnnpack.partition.xnnpack_partitioner"
STAMP_TEXT="${PACKAGES[*]}"

log() { echo "et_oracle.sh: $*" >&2; }
die() { echo "et_oracle.sh: ERROR: $*" >&2; exit 1; }

[[ -x "$PY" ]] || die "python not found at $PY; run 'make venv' first (or set ETKIT_PYTHON)"

check() { PYTHONPATH="$1" "$PY" -c "$IMPORTS" >&2; }

if [[ -f "$DIR/.complete" && "$(cat "$DIR/.complete")" == "$STAMP_TEXT" ]]; then
  if [[ "${1:-}" == "--check" ]]; then check "$DIR" || die "import check failed in $DIR; delete it and re-run"; fi
  echo "$DIR"; exit 0
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.et-oracle.lock"
flock 9
if [[ -f "$DIR/.complete" && "$(cat "$DIR/.complete")" == "$STAMP_TEXT" ]]; then echo "$DIR"; exit 0; fi

tmp="$DIR.tmp.$$"
rm -rf "$tmp"
log "installing ${PACKAGES[*]} into $DIR (no dependencies; torch comes from $PY)"
"$PY" -m pip install -q --disable-pip-version-check --no-deps --target "$tmp" "${PACKAGES[@]}" >&2 \
  || die "pip install of the oracle packages failed (${PACKAGES[*]})"
# pip --target may drop its own copies of packages the venv already has; keep the venv's torch.
rm -rf "$tmp"/torch "$tmp"/torch-*.dist-info "$tmp"/bin
check "$tmp" || die "the oracle does not import ($IMPORTS); see the error above"
rm -rf "$DIR"; mv "$tmp" "$DIR"
printf '%s' "$STAMP_TEXT" > "$DIR/.complete"
log "ready: $DIR"
echo "$DIR"
