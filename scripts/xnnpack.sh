#!/usr/bin/env bash
# Build XNNPACK (2024-11-08) with pthreadpool, cpuinfo and FXdiv as static, position-independent
# libraries, cached per user, and print the install prefix on the last line of stdout. Small
# patches (scripts/patches/, listed below) are applied to the sources.
#
#   scripts/xnnpack.sh              fetch (if needed), build (if needed), print the prefix
#   scripts/xnnpack.sh --fetch-only fetch and verify the tarballs into the download cache, then stop
#
# Sources are Debian's original ("orig") tarballs, fetched with `apt-get source --download-only`
# through an apt configuration private to this script (its own sources.list, lists, cache and state
# under $ETKIT_CACHE/apt); /etc/apt is only read, never written. Every tarball is checked against a
# pinned sha256 before use. If no source tarball for cpuinfo or pthreadpool can be had, Debian's
# binary -dev packages are extracted (dpkg -x, never installed) into the cache and used instead.
#
# Environment:
#   ETKIT_CACHE       cache root (default: ${XDG_CACHE_HOME:-~/.cache}/etkit)
#   ETKIT_DEBIAN_MIRROR  Debian mirror URL (default: the first deb.debian.org-style URI in /etc/apt)
#   ETKIT_BUILD_JOBS  parallel build jobs (default 2; the machine is shared)
#   ETKIT_XNNPACK_BINARY_DEPS=1  use Debian's binary cpuinfo/pthreadpool even if sources exist (testing)
#   ETKIT_VENV        the Python venv whose cmake/ninja/python to use (default: <repo>/.venv)
#   CMAKE, NINJA      tools to use (default: the venv's, then PATH)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ETKIT_VENV:-$REPO_ROOT/.venv}"
CACHE="${ETKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etkit}"
DOWNLOADS="$CACHE/downloads"
JOBS="${ETKIT_BUILD_JOBS:-2}"
LOCK=/tmp/etkit-build.lock
RECIPE_VERSION=4   # bump when the build recipe below changes, so the cache key changes
# Patches applied to the unpacked sources (their contents are part of the cache key):
#   xnnpack-single-thread-l2-tiles.patch      with one thread, GEMM/IGEMM output channels are tiled so
#                                             a tile's packed weights stay in L2 (newer XNNPACK picks
#                                             cache-aware tiles itself; this 2024-11 release does not)
#   xnnpack-qb4w-gemv-far-prefetch.patch     the int4-weight GEMV kernels (an LLM's decode) prefetch the
#                                             packed weights 8 KB ahead instead of 896 bytes
#   xnnpack-qd8-gemv-hardware-prefetch.patch  the int8 and per-channel int4 GEMV kernels issue no software
#                                             prefetch (theirs, 768-960 bytes ahead, slowed the stream)
#   xnnpack-plan-memory-failure.patch         a reshape whose workspace allocation failed leaves the
#                                             runtime unplanned, so the next reshape plans (and fails) again
#   xnnpack-small-elementwise-sequential.patch  elementwise operators with at most 16 KiB of output run on
#                                             the calling thread: waking the workers costs more (an LLM's
#                                             decode step has ~400 such operators)
#   xnnpack-small-fully-connected-sequential.patch  fully connected operators with at most 64K
#                                             multiply-adds run on the calling thread too (after the above)
#   xnnpack-prefetch-next-operator.patch     xnn_invoke_runtime asks for the next operator's state while the
#                                             current one runs (a weight stream evicts it between operators)
#   pthreadpool-sequential-column-tiles-outer.patch   the sequential 2d_tile_2d loop runs column
#                                             tiles outer, so each weight tile is reused by every row tile
PATCHES_DIR="$REPO_ROOT/scripts/patches"

log() { echo "xnnpack.sh: $*" >&2; }
die() { echo "xnnpack.sh: ERROR: $*" >&2; exit 1; }

# --- what we build: "package|orig tarball|sha256" (known-good alternatives may be listed; first hit wins)
XNNPACK_SOURCES=(
  "xnnpack|xnnpack_0.0~git20241108.4ea82e5.orig.tar.xz|90bde2caef0f880f627bab0dc805a86c4b8070cd98e3243db3046ab3f3be1a99"
)
PTHREADPOOL_SOURCES=(
  "pthreadpool|pthreadpool_0.0~git20240616.560c60d.orig.tar.xz|4cc3cbd933b28131d2a34edc54f76af9fb41bc490af5eae1a5bd3cd07ea90708"
)
CPUINFO_SOURCES=(
  "cpuinfo|cpuinfo_0.0~git20250905.877328f.orig.tar.xz|557ca404a3836b9f335a3a06b65ff9fe9dbaaefab7fb5c0185f53d9f33615a10"
)
FXDIV_SOURCES=(
  "fxdiv|fxdiv_0.0~git20200417.b408327.orig.tar.xz|7953482badaf4cb34026c3487c257b8e4ab2df061c019bd6fabbbc12ad52c44b"
)
# Binary fallbacks (package names in Debian) for the two libraries XNNPACK can take prebuilt.
PTHREADPOOL_BINARY=libpthreadpool-dev
CPUINFO_BINARY=libcpuinfo-dev

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# ---------------------------------------------------------------- isolated apt
APT_DIR="$CACHE/apt"
# shellcheck source=lib/debian_apt.sh
source "$REPO_ROOT/scripts/lib/debian_apt.sh"   # debian_mirror, apt_isolated, apt_use_sources

apt_prepare() {  # $1 = "src" (deb-src only) or "bin" (also deb lines, for the binary fallback)
  local want="$1" mirror lines=()
  mirror="$(debian_mirror)"
  for suite in trixie sid; do
    lines+=("deb-src [signed-by=$DEBIAN_KEYRING] $mirror $suite main")
    if [[ "$want" == bin ]]; then lines+=("deb [signed-by=$DEBIAN_KEYRING] $mirror $suite main"); fi
  done
  apt_use_sources "${lines[@]}" || die "apt-get update against $mirror failed (isolated config in $APT_DIR)"
}

# Print the source versions of package $1 whose file list contains $2 (a tarball name).
versions_listing() {
  apt_isolated apt-cache showsrc "$1" 2>/dev/null | awk -v f="$2" '
    /^Package: / {ver=""} /^Version: / {ver=$2}
    index($0, " " f) && ver != "" {print ver}' | sort -u
}

# fetch_one "pkg|file|sha" -> 0 if $DOWNLOADS/file exists with the right sum afterwards
fetch_one() {
  local pkg file sha tmp v
  IFS='|' read -r pkg file sha <<<"$1"
  if [[ -f "$DOWNLOADS/$file" && "$(sha256_of "$DOWNLOADS/$file")" == "$sha" ]]; then return 0; fi
  apt_prepare src
  tmp="$(mktemp -d "$DOWNLOADS/.fetch.XXXXXX")"
  for v in $(versions_listing "$pkg" "$file"); do
    log "fetching $file (source package $pkg=$v)"
    # The mirror may serve the orig tarball but not the .dsc or debian.tar.xz, which makes
    # apt-get exit non-zero; only the orig tarball matters, so judge by it alone.
    (cd "$tmp" && apt_isolated apt-get -q source --download-only "$pkg=$v" >&2) || true
    if [[ -f "$tmp/$file" ]]; then
      if [[ "$(sha256_of "$tmp/$file")" == "$sha" ]]; then
        mv "$tmp/$file" "$DOWNLOADS/$file"; rm -rf "$tmp"; log "verified $file"; return 0
      fi
      log "sha256 mismatch for $file: got $(sha256_of "$tmp/$file"), want $sha"
    else
      log "download of $file ($pkg=$v) failed"
    fi
    rm -f "$tmp"/* 2>/dev/null || true
  done
  rm -rf "$tmp"
  return 1
}

# fetch_any NAME entries... -> prints the tarball path of the first entry that can be had
fetch_any() {
  local name="$1"; shift
  local e
  for e in "$@"; do
    if fetch_one "$e"; then IFS='|' read -r _ f _ <<<"$e"; echo "$DOWNLOADS/$f"; return 0; fi
  done
  return 1
}

# extract_binary PKG... -> extracts Debian binary packages (and their lib* dependencies) into one
# prefix under the cache with include/ and lib/, never installing them; prints the prefix.
extract_binary() {
  local dir="$CACHE/debian-binary/prefix" tmp pkg deb dep
  if [[ -f "$dir/.done" ]]; then echo "$dir"; return 0; fi
  apt_prepare bin
  tmp="$(mktemp -d "$DOWNLOADS/.bin.XXXXXX")"
  for pkg in "$@"; do
    log "source tarball unavailable; extracting Debian binary package $pkg (dpkg -x, not installed)"
    (cd "$tmp" && apt_isolated apt-get -q download "$pkg/trixie" >&2) \
      || (cd "$tmp" && apt_isolated apt-get -q download "$pkg" >&2) \
      || die "could not download Debian binary package $pkg either; cannot build XNNPACK without it"
    for dep in $(apt_isolated apt-cache depends "$pkg/trixie" 2>/dev/null | awk '/Depends: lib/ {print $2}'); do
      (cd "$tmp" && apt_isolated apt-get -q download "$dep/trixie" >&2) || log "could not download $dep"
    done
  done
  rm -rf "$dir"; mkdir -p "$dir/lib"
  for deb in "$tmp"/*.deb; do cp "$deb" "$DOWNLOADS/"; dpkg -x "$deb" "$dir/root"; done
  ln -sfn root/usr/include "$dir/include"
  find "$dir/root" -name 'lib*.a' -o -name 'lib*.so*' | while read -r f; do ln -sfn "$f" "$dir/lib/"; done
  rm -rf "$tmp"; touch "$dir/.done"; echo "$dir"
}

tarball_names() { local e out=(); for e in "$@"; do IFS='|' read -r _ f _ <<<"$e"; out+=("$f"); done; echo "${out[*]}"; }

# ---------------------------------------------------------------- compilers
# XNNPACK is built with the default compiler (GCC 12 here), and then its fp32 microkernels are
# rebuilt with clang when there is one (scripts/setup_system.sh installs clang-14) and replace GCC's
# in libmicrokernels-prod.a. Measured on an AVX2 host, 1 thread: GCC 12 keeps one accumulator of the
# AVX2 f32 GEMM microkernel (f32-gemm-5x16-minmax-avx2-broadcast) in a stack slot, a store-to-load
# chain through every k iteration, so all-MiniLM-L6-v2 fp32 took 191 ms against 78 ms with clang; but
# clang 14's int8 kernels were slower (ResNet-18 int8 54 ms against GCC's 44 ms) and it builds fewer
# of them (no avxvnni/avx256vnni/avx256skx variants). ETKIT_XNNPACK_F32_CC= (empty) skips the clang
# pass.
pick_clang() {
  local v
  for v in "" -19 -18 -17 -16 -15 -14; do command -v "clang$v" >/dev/null 2>&1 && { echo "clang$v"; return 0; }; done
  return 1
}
F32_CC="${ETKIT_XNNPACK_F32_CC-$(pick_clang || true)}"
if [[ -z "$F32_CC" && -z "${ETKIT_XNNPACK_F32_CC+set}" ]]; then
  echo "xnnpack.sh: WARNING: no clang found; XNNPACK's fp32 kernels come from $(cc --version | head -n1), which makes them slower on AVX2 (install clang-14)" >&2
fi
CC_ID="$(cc --version 2>/dev/null | head -n1 || echo unknown)${F32_CC:+ + f32 $("$F32_CC" --version 2>/dev/null | head -n1)}"

# ---------------------------------------------------------------- cache key and fast path
KEY_TEXT="recipe=$RECIPE_VERSION patches=$(cat "$PATCHES_DIR"/*.patch | sha256sum | cut -c1-16) $( [[ "${ETKIT_XNNPACK_BINARY_DEPS:-0}" == 1 ]] && echo "binary_deps=1 " )$(printf '%s ' "${XNNPACK_SOURCES[@]}" "${PTHREADPOOL_SOURCES[@]}" "${CPUINFO_SOURCES[@]}" "${FXDIV_SOURCES[@]}") cc=$CC_ID arch=$(uname -m)"
KEY="20241108-$(printf '%s' "$KEY_TEXT" | sha256sum | cut -c1-16)"
ROOT="$CACHE/xnnpack/$KEY"
PREFIX="$ROOT/install"
if [[ "${1:-}" != "--fetch-only" && -f "$PREFIX/.complete" ]]; then
  echo "$PREFIX"; exit 0
fi

mkdir -p "$DOWNLOADS"

# ---------------------------------------------------------------- fetch
# One fetch at a time per cache (the private apt lists are shared by every run using this cache).
exec 8>"$CACHE/.fetch.lock"
flock 8
xnnpack_tar="$(fetch_any xnnpack "${XNNPACK_SOURCES[@]}")" \
  || die "could not download $(tarball_names "${XNNPACK_SOURCES[@]}") from Debian trixie/sid ($(debian_mirror)); check the network, or put the file in $DOWNLOADS"
fxdiv_tar="$(fetch_any fxdiv "${FXDIV_SOURCES[@]}")" \
  || die "could not download $(tarball_names "${FXDIV_SOURCES[@]}") from Debian trixie/sid ($(debian_mirror)); check the network, or put the file in $DOWNLOADS"
pthreadpool_tar=""; cpuinfo_tar=""
if [[ "${ETKIT_XNNPACK_BINARY_DEPS:-0}" != 1 ]]; then   # 1 = exercise the binary fallback
  pthreadpool_tar="$(fetch_any pthreadpool "${PTHREADPOOL_SOURCES[@]}" || true)"
  cpuinfo_tar="$(fetch_any cpuinfo "${CPUINFO_SOURCES[@]}" || true)"
fi
# XNNPACK's CMake takes either all dependencies from source or all prebuilt (XNNPACK_USE_SYSTEM_LIBS),
# so if either library has no source tarball, both come from Debian's binary packages.
system_prefix=""
if [[ -z "$pthreadpool_tar" || -z "$cpuinfo_tar" ]]; then
  [[ -n "$pthreadpool_tar" ]] || log "no source tarball for pthreadpool ($(tarball_names "${PTHREADPOOL_SOURCES[@]}"))"
  [[ -n "$cpuinfo_tar" ]] || log "no source tarball for cpuinfo ($(tarball_names "${CPUINFO_SOURCES[@]}"))"
  system_prefix="$(extract_binary "$PTHREADPOOL_BINARY" "$CPUINFO_BINARY")"
fi

if [[ "${1:-}" == "--fetch-only" ]]; then
  log "tarballs ready in $DOWNLOADS"; exit 0
fi

# ---------------------------------------------------------------- build (serialised machine-wide)
find_tool() {  # $1 = name; prefer the repo venv's copy, then PATH
  if [[ -x "$VENV/bin/$1" ]]; then echo "$VENV/bin/$1"; else command -v "$1" || die "$1 not found; run 'make venv' first"; fi
}
CMAKE="${CMAKE:-$(find_tool cmake)}"
NINJA="${NINJA:-$(find_tool ninja)}"
PYTHON="${PYTHON:-$( [[ -x "$VENV/bin/python" ]] && echo "$VENV/bin/python" || command -v python3)}"

build() {
  if [[ -f "$PREFIX/.complete" ]]; then return 0; fi   # another process built it while we waited
  local src="$ROOT/src" bld="$ROOT/build" d extra=()
  rm -rf "$PREFIX"
  # Sources and the build tree are kept until success, so an interrupted build resumes.
  if [[ ! -f "$src/.unpacked" ]]; then
    rm -rf "$src" "$bld"
    mkdir -p "$src/xnnpack"
    log "unpacking sources into $src"
    tar -xJf "$xnnpack_tar" -C "$src/xnnpack"            # this tarball has no top-level folder
    for t in "$fxdiv_tar" "$pthreadpool_tar" "$cpuinfo_tar"; do
      [[ -n "$t" ]] || continue
      d="$(basename "$t")"; d="${d%%_*}"
      mkdir -p "$src/$d"; tar -xJf "$t" -C "$src/$d" --strip-components=1
    done
    log "applying $(cd "$PATCHES_DIR" && echo *.patch)"
    patch -s -d "$src/xnnpack" -p1 < "$PATCHES_DIR/xnnpack-single-thread-l2-tiles.patch" >&2
    patch -s -d "$src/xnnpack" -p1 < "$PATCHES_DIR/xnnpack-qb4w-gemv-far-prefetch.patch" >&2
    patch -s -d "$src/xnnpack" -p1 < "$PATCHES_DIR/xnnpack-qd8-gemv-hardware-prefetch.patch" >&2
    patch -s -d "$src/xnnpack" -p1 < "$PATCHES_DIR/xnnpack-plan-memory-failure.patch" >&2
    patch -s -d "$src/xnnpack" -p1 < "$PATCHES_DIR/xnnpack-small-elementwise-sequential.patch" >&2
    patch -s -d "$src/xnnpack" -p1 < "$PATCHES_DIR/xnnpack-small-fully-connected-sequential.patch" >&2
    patch -s -d "$src/xnnpack" -p1 < "$PATCHES_DIR/xnnpack-prefetch-next-operator.patch" >&2
    if [[ -d "$src/pthreadpool" ]]; then
      patch -s -d "$src/pthreadpool" -p1 < "$PATCHES_DIR/pthreadpool-sequential-column-tiles-outer.patch" >&2
    fi
    touch "$src/.unpacked"
  fi
  if [[ -n "$system_prefix" ]]; then
    extra+=(-DXNNPACK_USE_SYSTEM_LIBS=ON -DCPUINFO_SOURCE_DIR="$system_prefix"
            -DPTHREADPOOL_SOURCE_DIR="$system_prefix" -DFXDIV_SOURCE_DIR="$src/fxdiv")
  else
    extra+=(-DCPUINFO_SOURCE_DIR="$src/cpuinfo" -DPTHREADPOOL_SOURCE_DIR="$src/pthreadpool"
            -DFXDIV_SOURCE_DIR="$src/fxdiv")
  fi
  log "configuring (cmake $("$CMAKE" --version | head -n1 | awk '{print $3}'), $CC_ID, build dir $bld)"
  local configure=(-S "$src/xnnpack" -G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_INSTALL_LIBDIR=lib \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
    -DPython_EXECUTABLE="$PYTHON" \
    -DXNNPACK_LIBRARY_TYPE=static -DXNNPACK_BUILD_TESTS=OFF -DXNNPACK_BUILD_BENCHMARKS=OFF \
    -DXNNPACK_BUILD_ALL_MICROKERNELS=OFF -DXNNPACK_ENABLE_KLEIDIAI=OFF \
    -DCPUINFO_BUILD_TOOLS=OFF -DCPUINFO_BUILD_UNIT_TESTS=OFF -DCPUINFO_BUILD_MOCK_TESTS=OFF \
    -DCPUINFO_BUILD_BENCHMARKS=OFF -DCPUINFO_LIBRARY_TYPE=static \
    -DPTHREADPOOL_BUILD_TESTS=OFF -DPTHREADPOOL_BUILD_BENCHMARKS=OFF -DPTHREADPOOL_LIBRARY_TYPE=static \
    -DFXDIV_BUILD_TESTS=OFF -DFXDIV_BUILD_BENCHMARKS=OFF \
    "${extra[@]}")
  "$CMAKE" "${configure[@]}" -B "$bld" >&2
  log "building with -j$JOBS (this takes a while the first time)"
  "$CMAKE" --build "$bld" -j "$JOBS" >&2
  "$CMAKE" --install "$bld" >&2
  # The install step omits some archives and headers (cpuinfo, pthreadpool, fxdiv): copy them.
  mkdir -p "$PREFIX/lib" "$PREFIX/include"
  while IFS= read -r a; do
    [[ -f "$PREFIX/lib/$(basename "$a")" ]] || cp "$a" "$PREFIX/lib/"
  done < <(find "$bld" -name '*.a' -not -path '*/CMakeFiles/*')
  if [[ -n "$F32_CC" ]]; then
    log "rebuilding the fp32 microkernels with $F32_CC"
    CC="$F32_CC" "$CMAKE" "${configure[@]}" -B "$bld-f32" >&2
    "$CMAKE" --build "$bld-f32" -j "$JOBS" --target microkernels-prod >&2
    local objs="$bld-f32/f32-objects" archive
    archive="$(find "$bld-f32" -name libmicrokernels-prod.a -not -path '*/CMakeFiles/*' | head -n1)"
    [[ -f "$archive" ]] || die "the $F32_CC build produced no libmicrokernels-prod.a"
    rm -rf "$objs"; mkdir -p "$objs"
    # Only members both archives have: GCC may build ISA variants clang lacks, and those stay.
    comm -12 <(ar t "$archive" | grep '^f32-' | sort) <(ar t "$PREFIX/lib/libmicrokernels-prod.a" | grep '^f32-' | sort) \
      > "$objs/list"
    (cd "$objs" && xargs ar x "$archive" < list)
    (cd "$objs" && xargs ar r "$PREFIX/lib/libmicrokernels-prod.a" < list)
    ranlib "$PREFIX/lib/libmicrokernels-prod.a"
    log "replaced $(wc -l < "$objs/list") fp32 microkernel objects with $F32_CC's"
    rm -rf "$bld-f32"
  fi
  if [[ -n "$system_prefix" ]]; then
    cp -L "$system_prefix"/include/{cpuinfo.h,pthreadpool.h} "$PREFIX/include/" 2>/dev/null || true
    cp -L "$system_prefix"/lib/lib{cpuinfo,pthreadpool}.* "$PREFIX/lib/" 2>/dev/null || true
  else
    cp -n "$src/cpuinfo/include/cpuinfo.h" "$src/pthreadpool/include/pthreadpool.h" "$PREFIX/include/"
  fi
  cp -n "$src/fxdiv/include/fxdiv.h" "$PREFIX/include/"
  # XNNPACK's CMake calls the microkernels archive libmicrokernels-prod.a; ExecuTorch's build and
  # our consumers use the clearer name libxnnpack-microkernels-prod.a. Provide both.
  ln -sfn libmicrokernels-prod.a "$PREFIX/lib/libxnnpack-microkernels-prod.a"
  for f in include/xnnpack.h include/pthreadpool.h include/cpuinfo.h include/fxdiv.h \
           lib/libXNNPACK.a lib/libmicrokernels-prod.a lib/libxnnpack-microkernels-prod.a; do
    [[ -f "$PREFIX/$f" ]] || die "build finished but $PREFIX/$f is missing"
  done
  ls "$PREFIX"/lib/libcpuinfo.* "$PREFIX"/lib/libpthreadpool.* >/dev/null 2>&1 \
    || die "build finished but libcpuinfo/libpthreadpool are missing from $PREFIX/lib"
  smoke_test
  printf '%s\n' "$KEY_TEXT" > "$PREFIX/KEY"
  rm -rf "$bld"   # the objects are not needed once installed; the sources stay for debugging
  touch "$PREFIX/.complete"
}

# Compile and run a tiny C program: xnn_initialize, then a 1-node add subgraph [2,3] + [2,3].
smoke_test() {
  local dir="$ROOT/smoke"
  mkdir -p "$dir"
  cat > "$dir/smoke.c" <<'CEOF'
#include <stdio.h>
#include <xnnpack.h>
int main(void) {
  if (xnn_initialize(NULL) != xnn_status_success) { fprintf(stderr, "xnn_initialize failed\n"); return 1; }
  xnn_subgraph_t sg = NULL;
  if (xnn_create_subgraph(3, 0, &sg) != xnn_status_success) return 2;
  const size_t dims[2] = {2, 3};
  uint32_t a, b, y;
  if (xnn_define_tensor_value(sg, xnn_datatype_fp32, 2, dims, NULL, 0, XNN_VALUE_FLAG_EXTERNAL_INPUT, &a) ||
      xnn_define_tensor_value(sg, xnn_datatype_fp32, 2, dims, NULL, 1, XNN_VALUE_FLAG_EXTERNAL_INPUT, &b) ||
      xnn_define_tensor_value(sg, xnn_datatype_fp32, 2, dims, NULL, 2, XNN_VALUE_FLAG_EXTERNAL_OUTPUT, &y))
    return 3;
  if (xnn_define_binary(sg, xnn_binary_add, NULL, a, b, y, 0) != xnn_status_success) return 4;
  xnn_runtime_t rt = NULL;
  if (xnn_create_runtime_v2(sg, NULL, 0, &rt) != xnn_status_success) return 5;
  float x0[6] = {1, 2, 3, 4, 5, 6}, x1[6] = {10, 20, 30, 40, 50, 60}, out[6] = {0};
  struct xnn_external_value ext[3] = {{a, x0}, {b, x1}, {y, out}};
  if (xnn_setup_runtime(rt, 3, ext) != xnn_status_success) return 6;
  if (xnn_invoke_runtime(rt) != xnn_status_success) return 7;
  for (int i = 0; i < 6; i++) if (out[i] != x0[i] + x1[i]) { fprintf(stderr, "wrong sum at %d\n", i); return 8; }
  xnn_delete_runtime(rt); xnn_delete_subgraph(sg); xnn_deinitialize();
  printf("xnnpack smoke test: add ok\n");
  return 0;
}
CEOF
  cc -std=c11 -O1 -I"$PREFIX/include" "$dir/smoke.c" -o "$dir/smoke" \
    "$PREFIX/lib/libXNNPACK.a" "$PREFIX/lib/libxnnpack-microkernels-prod.a" \
    -L"$PREFIX/lib" -lpthreadpool -lcpuinfo -lpthread -lm \
    || die "smoke test did not compile/link against $PREFIX"
  LD_LIBRARY_PATH="$PREFIX/lib" "$dir/smoke" >&2 || die "smoke test failed (exit $?) against $PREFIX"
}

flock -u 8
exec 9>"$LOCK"
log "waiting for $LOCK"
flock 9
build
flock -u 9
echo "$PREFIX"
