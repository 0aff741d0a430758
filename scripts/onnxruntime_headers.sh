#!/usr/bin/env bash
# Fetch ONNX Runtime's C API headers (onnxruntime_c_api.h and friends, MIT-licensed) from Debian's
# libonnxruntime-dev package, cached per user, and print the include directory on the last line of
# stdout. The etkit-qnn delegate compiles against them and loads the onnxruntime wheel's library at
# run time (docs/design/qnn-route.md section 4).
#
# Only the headers are used: the .deb is downloaded through an apt configuration private to this
# script (scripts/lib/debian_apt.sh; /etc/apt is only read), unpacked with `dpkg -x` into a scratch
# directory (never installed), and include/onnxruntime/ is kept. The plugin-EP API the delegate needs
# (RegisterExecutionProviderLibrary, GetEpDevices, SessionOptionsAppendExecutionProvider_V2) arrived in
# ONNX Runtime 1.22; trixie has 1.21, so the package comes from sid. The known-good version below is
# taken when the mirror still has it (its sha256 pinned); otherwise sid's current version is accepted
# if it is >= 1.22 (apt checks it against the signed index) and its header declares those calls.
#
# Environment:
#   ETKIT_CACHE                    cache root (default: ${XDG_CACHE_HOME:-~/.cache}/etkit)
#   ETKIT_DEBIAN_MIRROR            Debian mirror URL (default: the one in /etc/apt, else deb.debian.org)
#   ETKIT_ONNXRUNTIME_INCLUDE_DIR  use this directory (holding onnxruntime_c_api.h) instead of fetching
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ETKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etkit}"
ROOT="$CACHE/onnxruntime-headers"
KNOWN_GOOD_VERSION="1.23.2+dfsg-6.1"
KNOWN_GOOD_SHA256="4630a94adb36dc056feb124e51c6e952e2cab5188bc093a25bee8a7e1ac5196d"
MIN_API_VERSION=22
REQUIRED_CALLS=(RegisterExecutionProviderLibrary GetEpDevices SessionOptionsAppendExecutionProvider_V2)

log() { echo "onnxruntime_headers.sh: $*" >&2; }
die() { echo "onnxruntime_headers.sh: ERROR: $*" >&2; exit 1; }

# check_header DIR -> 0 when DIR/onnxruntime_c_api.h is new enough and declares the calls we use
check_header() {
  local h="$1/onnxruntime_c_api.h" api call
  [[ -f "$h" ]] || { log "$h does not exist"; return 1; }
  api="$(sed -nE 's/^#define ORT_API_VERSION ([0-9]+).*/\1/p' "$h" | head -n1)"
  [[ -n "$api" && "$api" -ge "$MIN_API_VERSION" ]] || { log "$h has ORT_API_VERSION ${api:-?} < $MIN_API_VERSION"; return 1; }
  for call in "${REQUIRED_CALLS[@]}"; do
    grep -q "$call" "$h" || { log "$h does not declare $call"; return 1; }
  done
}

if [[ -n "${ETKIT_ONNXRUNTIME_INCLUDE_DIR:-}" ]]; then
  check_header "$ETKIT_ONNXRUNTIME_INCLUDE_DIR" || die "ETKIT_ONNXRUNTIME_INCLUDE_DIR=$ETKIT_ONNXRUNTIME_INCLUDE_DIR is not usable"
  echo "$ETKIT_ONNXRUNTIME_INCLUDE_DIR"; exit 0
fi
if [[ -f "$ROOT/current" ]]; then
  dir="$(cat "$ROOT/current")"
  if [[ -f "$dir/.complete" ]] && check_header "$dir/include/onnxruntime"; then echo "$dir/include/onnxruntime"; exit 0; fi
fi

APT_DIR="$CACHE/apt-onnxruntime"
# shellcheck source=lib/debian_apt.sh
source "$REPO_ROOT/scripts/lib/debian_apt.sh"
mkdir -p "$ROOT"
exec 8>"$ROOT/.fetch.lock"
flock 8
mirror="$(debian_mirror)"
apt_use_sources "deb [signed-by=$DEBIAN_KEYRING] $mirror sid main" \
  || die "apt-get update against $mirror (sid) failed (isolated config in $APT_DIR); check the network"

tmp="$(mktemp -d "$ROOT/.fetch.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
if (cd "$tmp" && apt_isolated apt-get -q download "libonnxruntime-dev=$KNOWN_GOOD_VERSION" >&2); then
  deb="$(ls "$tmp"/libonnxruntime-dev_*.deb)"
  [[ "$(sha256sum "$deb" | cut -d' ' -f1)" == "$KNOWN_GOOD_SHA256" ]] \
    || die "sha256 of $(basename "$deb") is not the pinned $KNOWN_GOOD_SHA256"
else
  log "libonnxruntime-dev $KNOWN_GOOD_VERSION is no longer on $mirror; trying sid's current version"
  (cd "$tmp" && apt_isolated apt-get -q download libonnxruntime-dev >&2) \
    || die "could not download libonnxruntime-dev from $mirror (sid)"
  deb="$(ls "$tmp"/libonnxruntime-dev_*.deb)"
fi
version="$(dpkg-deb -f "$deb" Version)"
dpkg --compare-versions "$version" ge 1.22 || die "libonnxruntime-dev $version is older than 1.22 (no plugin-EP API)"
dpkg -x "$deb" "$tmp/root"
check_header "$tmp/root/usr/include/onnxruntime" || die "the headers of libonnxruntime-dev $version are not usable"

dir="$ROOT/$version"
rm -rf "$dir"; mkdir -p "$dir/include"
cp -r "$tmp/root/usr/include/onnxruntime" "$dir/include/"
cp "$tmp/root/usr/share/doc/libonnxruntime-dev/copyright" "$dir/" 2>/dev/null || true
printf 'libonnxruntime-dev %s sha256 %s\n' "$version" "$(sha256sum "$deb" | cut -d' ' -f1)" > "$dir/SOURCE"
touch "$dir/.complete"
echo "$dir" > "$ROOT/current"
log "headers of libonnxruntime-dev $version in $dir/include/onnxruntime"
echo "$dir/include/onnxruntime"
