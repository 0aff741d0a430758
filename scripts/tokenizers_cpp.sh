#!/usr/bin/env bash
# Build the C++ part of ExecuTorch's tokenizers (pytorch-tokenizers: Hugging Face tokenizer.json,
# SentencePiece, tiktoken) as static, position-independent libraries, cached per user, and print the
# install prefix on the last line of stdout. etkit_llm_runner links it (runtime-cpp/extension/llm).
#
#   scripts/tokenizers_cpp.sh              fetch (if needed), build (if needed), print the prefix
#   scripts/tokenizers_cpp.sh --fetch-only fetch and verify the source distribution, then stop
#
# Source: the pytorch-tokenizers source distribution on PyPI (the only release published as an sdist
# is 1.0.1; newer releases are wheels only, which hold no C++ libraries), fetched with
# `pip download --no-binary` and checked against a pinned sha256. It bundles its third-party sources
# (abseil-cpp, re2, sentencepiece, pcre2, nlohmann/json, llama.cpp's unicode tables): nothing else
# is downloaded. Only the libraries the tokenizers need are built (no tests, tools or Python
# bindings); PCRE2 is included (SUPPORT_REGEX_LOOKAHEAD) because Hugging Face's byte-level
# pre-tokenizer pattern uses a lookahead RE2 cannot compile. Logging inside the library is compiled
# out (TK_LOG_ENABLED=0): callers report errors themselves.
#
# Installed layout (<prefix> = $ETKIT_CACHE/tokenizers/<version>-<hash of this script>):
#   include/   pytorch/tokenizers/*.h and the headers they include (re2, absl, nlohmann, pcre2)
#   lib/       the static archives
#   lib/cmake/etkit_tokenizers/etkit_tokenizers-config.cmake
#              defines the imported target etkit_tokenizers::tokenizers: include directory, compile
#              definitions and every archive in link order (taken from CMake's own link line)
#   SOURCE     what was built from (sdist name, sha256, compiler)
#
# Consumers must make the regex fallback known before loading a tokenizer (no static initialisers
# are relied on; the archives are not linked with --whole-archive):
#   namespace tokenizers { Result<std::unique_ptr<IRegex>> create_fallback_regex(const std::string&); }
#   tokenizers::register_override_fallback_regex(tokenizers::create_fallback_regex);
#
# Environment:
#   ETKIT_CACHE       cache root (default: ${XDG_CACHE_HOME:-~/.cache}/etkit)
#   ETKIT_BUILD_JOBS  parallel build jobs (default 2; the machine is shared)
#   ETKIT_VENV        the Python venv whose cmake/ninja/python/pip to use (default: <repo>/.venv)
#   CMAKE, NINJA      tools to use (default: the venv's, then PATH)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ETKIT_VENV:-$REPO_ROOT/.venv}"
CACHE="${ETKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etkit}"
DOWNLOADS="$CACHE/downloads"
JOBS="${ETKIT_BUILD_JOBS:-2}"
LOCK=/tmp/etkit-build.lock

VERSION=1.0.1
SDIST="pytorch_tokenizers-$VERSION.tar.gz"
SDIST_SHA256=19938c0efd5348fb0589610094c1c6bf6e055b20889f6250068d2b552a0b137b

log() { echo "tokenizers_cpp.sh: $*" >&2; }
die() { echo "tokenizers_cpp.sh: ERROR: $*" >&2; exit 1; }
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# The cache key: the version and this script's text (which holds the sha256 and the recipe).
SCRIPT_HASH="$(sha256_of "${BASH_SOURCE[0]}" | cut -c1-16)"
PREFIX="$CACHE/tokenizers/$VERSION-$SCRIPT_HASH"
WORK="$CACHE/tokenizers/.work-$VERSION-$SCRIPT_HASH"   # sources and build tree, removed after success
if [[ "${1:-}" != "--fetch-only" && -f "$PREFIX/.complete" ]]; then
  echo "$PREFIX"; exit 0
fi

find_tool() {  # $1 = name; prefer the repo venv's copy, then PATH
  if [[ -x "$VENV/bin/$1" ]]; then echo "$VENV/bin/$1"; else command -v "$1" || die "$1 not found; run 'make venv' first"; fi
}

# ---------------------------------------------------------------- fetch
mkdir -p "$DOWNLOADS"
fetch() {
  if [[ -f "$DOWNLOADS/$SDIST" && "$(sha256_of "$DOWNLOADS/$SDIST")" == "$SDIST_SHA256" ]]; then return 0; fi
  local python tmp
  python="$(find_tool python)"
  tmp="$(mktemp -d "$DOWNLOADS/.pip.XXXXXX")"
  log "downloading $SDIST from PyPI (pip download --no-binary pytorch-tokenizers)"
  # --no-binary for this one package only: ':all:' would also build pip's own build tools from source.
  if ! "$python" -m pip --disable-pip-version-check download "pytorch-tokenizers==$VERSION" --no-deps \
        --no-binary pytorch-tokenizers --no-build-isolation -d "$tmp" >&2; then
    rm -rf "$tmp"; die "pip could not download pytorch-tokenizers==$VERSION (sdist); check the network, or put $SDIST in $DOWNLOADS"
  fi
  [[ -f "$tmp/$SDIST" ]] || { rm -rf "$tmp"; die "pip download produced no $SDIST"; }
  if [[ "$(sha256_of "$tmp/$SDIST")" != "$SDIST_SHA256" ]]; then
    local got; got="$(sha256_of "$tmp/$SDIST")"; rm -rf "$tmp"
    die "sha256 mismatch for $SDIST: got $got, want $SDIST_SHA256"
  fi
  mv "$tmp/$SDIST" "$DOWNLOADS/$SDIST"; rm -rf "$tmp"
  log "verified $SDIST"
}
exec 8>"$DOWNLOADS/.tokenizers-fetch.lock"
flock 8
fetch
flock -u 8
if [[ "${1:-}" == "--fetch-only" ]]; then
  log "$SDIST ready in $DOWNLOADS"; exit 0
fi

# ---------------------------------------------------------------- build (serialised machine-wide)
CMAKE="${CMAKE:-$(find_tool cmake)}"
NINJA="${NINJA:-$(find_tool ninja)}"
CC_ID="$(c++ --version 2>/dev/null | head -n1 || echo unknown)"

# The wrapper project: the sdist's CMakeLists as a subdirectory (its install rules would build all of
# abseil, so they are not used), plus a smoke test that links the libraries the way consumers do.
write_wrapper() {
  local dir="$1" src="$2"
  mkdir -p "$dir"
  cat > "$dir/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.24)
project(etkit_tokenizers_build LANGUAGES C CXX)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
add_subdirectory("$src" tokenizers EXCLUDE_FROM_ALL)
add_executable(etkit_tokenizers_smoke smoke.cpp)
target_link_libraries(etkit_tokenizers_smoke PRIVATE tokenizers::tokenizers tokenizers::regex_lookahead)
EOF
  cat > "$dir/smoke.cpp" <<'EOF'
// Loads a hand-written byte-level BPE tokenizer.json (the pre-tokenizer pattern needs PCRE2's
// lookahead), encodes and decodes a string.
#include <pytorch/tokenizers/hf_tokenizer.h>
#include <pytorch/tokenizers/regex.h>
#include <cstdio>
#include <string>
#include <vector>
namespace tokenizers {
Result<std::unique_ptr<IRegex>> create_fallback_regex(const std::string& pattern);
}
int main(int argc, char** argv) {
  if (argc != 2) return 2;
  tokenizers::register_override_fallback_regex(tokenizers::create_fallback_regex);
  tokenizers::HFTokenizer tok;
  if (tok.load(argv[1]) != tokenizers::Error::Ok) { std::fprintf(stderr, "load failed\n"); return 1; }
  auto ids = tok.encode("ab a  b", 0, 0);
  if (!ids.ok()) { std::fprintf(stderr, "encode failed\n"); return 1; }
  const std::vector<uint64_t> want = {4, 3, 2, 5};  // "ab" "Ġa" "Ġ" "Ġb"
  std::string text;
  for (uint64_t id : ids.get()) {
    auto piece = tok.decode(0, id);
    if (!piece.ok()) { std::fprintf(stderr, "decode failed\n"); return 1; }
    text += piece.get();
  }
  if (ids.get() != want || text != "ab a  b" || tok.vocab_size() != 7) {
    std::fprintf(stderr, "unexpected result: %zu ids, text '%s', vocab %d\n", ids.get().size(), text.c_str(),
                 tok.vocab_size());
    return 1;
  }
  std::printf("tokenizers smoke test: ok\n");
  return 0;
}
EOF
  cat > "$dir/tokenizer.json" <<'EOF'
{"version": "1.0", "truncation": null, "padding": null,
 "added_tokens": [{"id": 6, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false,
                   "normalized": false, "special": true}],
 "normalizer": null,
 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
 "post_processor": null,
 "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
 "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
           "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
           "vocab": {"a": 0, "b": 1, "\u0120": 2, "\u0120a": 3, "ab": 4, "\u0120b": 5},
           "merges": [["a", "b"], ["\u0120", "a"], ["\u0120", "b"]]}}
EOF
}

build() {
  if [[ -f "$PREFIX/.complete" ]]; then return 0; fi   # another process built it while we waited
  local src="$WORK/src" bld="$WORK/build" wrapper="$WORK/wrapper" start=$SECONDS
  if [[ ! -f "$src/.unpacked" ]]; then
    rm -rf "$src" "$bld"
    mkdir -p "$src"
    log "unpacking $SDIST into $src"
    tar -xzf "$DOWNLOADS/$SDIST" -C "$src" --strip-components=1
    touch "$src/.unpacked"
  fi
  write_wrapper "$wrapper" "$src"
  log "configuring (cmake $("$CMAKE" --version | head -n1 | awk '{print $3}'), $CC_ID, build dir $bld)"
  # -ffunction-sections/-fdata-sections: a consumer linking with --gc-sections keeps only what it uses.
  local flags="-DTK_LOG_ENABLED=0 -ffunction-sections -fdata-sections"
  "$CMAKE" -S "$wrapper" -B "$bld" -G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DTOKENIZERS_BUILD_TEST=OFF -DTOKENIZERS_BUILD_TOOLS=OFF -DTOKENIZERS_BUILD_PYTHON=OFF \
    -DTOKENIZERS_ENABLE_LOGGING=OFF -DSUPPORT_REGEX_LOOKAHEAD=ON \
    -DABSL_BUILD_TESTING=OFF -DABSL_ENABLE_INSTALL=OFF -DRE2_BUILD_TESTING=OFF \
    -DSPM_BUILD_TEST=OFF -DSPM_ENABLE_SHARED=OFF -DSPM_ENABLE_TCMALLOC=OFF \
    -DBUILD_TESTING=OFF -DBUILD_SHARED_LIBS=OFF >&2
  log "building with -j$JOBS"
  "$CMAKE" --build "$bld" -j "$JOBS" --target etkit_tokenizers_smoke >&2
  log "smoke test"
  "$bld/etkit_tokenizers_smoke" "$wrapper/tokenizer.json" >&2 || die "the smoke test failed (exit $?)"

  # The archives in the order CMake links them (duplicates kept: they resolve circular references).
  local link archives=() syslibs=() w a
  link="$("$NINJA" -C "$bld" -t commands etkit_tokenizers_smoke | tail -n1)"
  for w in $link; do
    case "$w" in
      *.a) archives+=("$w") ;;
      -l*|-pthread) syslibs+=("$w") ;;
    esac
  done
  [[ ${#archives[@]} -gt 0 ]] || die "no archives on the smoke test's link line: $link"

  log "installing into $PREFIX"
  rm -rf "$PREFIX"
  mkdir -p "$PREFIX/lib/cmake/etkit_tokenizers" "$PREFIX/include/pytorch/tokenizers" "$PREFIX/include/re2" \
    "$PREFIX/include/nlohmann"
  local libs=""
  for a in "${archives[@]}"; do
    [[ "$a" == /* ]] || a="$bld/$a"
    [[ -f "$PREFIX/lib/$(basename "$a")" ]] || cp "$a" "$PREFIX/lib/"
    libs+="\${_prefix}/lib/$(basename "$a");"
  done
  for w in "${syslibs[@]}"; do
    if [[ "$w" == -pthread ]]; then libs+="Threads::Threads;"; else libs+="$w;"; fi
  done
  cp "$src"/include/pytorch/tokenizers/*.h "$PREFIX/include/pytorch/tokenizers/"
  cp "$src/third-party/sentencepiece/src/sentencepiece_processor.h" "$PREFIX/include/pytorch/tokenizers/"
  cp "$src"/third-party/re2/re2/*.h "$PREFIX/include/re2/"
  cp "$src/third-party/json/single_include/nlohmann/json.hpp" "$PREFIX/include/nlohmann/"
  (cd "$src/third-party/abseil-cpp" && find absl \( -name '*.h' -o -name '*.inc' \) -print0 \
     | xargs -0 cp --parents -t "$PREFIX/include/")
  find "$bld" -name pcre2.h -not -path '*/CMakeFiles/*' -exec cp {} "$PREFIX/include/" \; -quit
  for f in LICENSE third-party/re2/LICENSE third-party/abseil-cpp/LICENSE third-party/sentencepiece/LICENSE \
           third-party/pcre2/LICENCE.md third-party/json/LICENSE.MIT; do
    mkdir -p "$PREFIX/licenses/$(dirname "$f")"; cp "$src/$f" "$PREFIX/licenses/$f"
  done
  cat > "$PREFIX/lib/cmake/etkit_tokenizers/etkit_tokenizers-config.cmake" <<EOF
# Generated by scripts/tokenizers_cpp.sh: pytorch-tokenizers $VERSION (C++), static archives.
# Target etkit_tokenizers::tokenizers. Call
#   tokenizers::register_override_fallback_regex(tokenizers::create_fallback_regex)
# before loading a Hugging Face tokenizer (PCRE2 lookahead support; see the script's header).
get_filename_component(_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(etkit_tokenizers_VERSION "$VERSION")
if(NOT TARGET etkit_tokenizers::tokenizers)
  find_package(Threads REQUIRED)
  add_library(etkit_tokenizers::tokenizers INTERFACE IMPORTED)
  set_target_properties(etkit_tokenizers::tokenizers PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "\${_prefix}/include"
    INTERFACE_COMPILE_DEFINITIONS "TK_LOG_ENABLED=0"
    INTERFACE_LINK_LIBRARIES "${libs%;}")
endif()
set(etkit_tokenizers_FOUND TRUE)
EOF
  printf '%s sha256 %s\ncompiler %s\nbuilt in %ss with -j%s\n' "$SDIST" "$SDIST_SHA256" "$CC_ID" \
    "$((SECONDS - start))" "$JOBS" > "$PREFIX/SOURCE"
  touch "$PREFIX/.complete"
  rm -rf "$WORK"
  # Earlier builds (other versions of this script) are left alone; remove them by hand if unwanted.
  log "built in $((SECONDS - start)) s"
}

mkdir -p "$CACHE/tokenizers"
exec 9>"$LOCK"
log "waiting for $LOCK"
flock 9
build
flock -u 9
echo "$PREFIX"
