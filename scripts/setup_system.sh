#!/usr/bin/env bash
# Install the Debian packages etkit's build needs (idempotent; quick when everything is present).
#
#   build-essential  C/C++ compilers for the runtime, the plugins and XNNPACK
#   dpkg-dev         apt-get source (scripts/xnnpack.sh fetches Debian's original tarballs)
#   xz-utils         unpacking those tarballs
#   patch            applying scripts/patches/ to them
#   debian-archive-keyring, gpgv, ca-certificates   verifying the trixie/sid indexes we read
#   util-linux       flock (builds on the shared machine are serialised)
#   clang-14         compiles XNNPACK's fp32 microkernels (scripts/xnnpack.sh): GCC 12 keeps an
#                    accumulator of its AVX2 f32 GEMM in a stack slot (fp32 models up to 2.4x slower)
#   libclang-rt-14-dev   clang's sanitizer and libFuzzer runtimes: `make fuzz` (scripts/fuzz.py) links
#                    its targets with -fsanitize=fuzzer,address,undefined
#   glslc, libvulkan-dev   the Vulkan plugin's shader compiler and headers
#   libvulkan1, mesa-vulkan-drivers   the Vulkan loader and Mesa's lavapipe, a Vulkan 1.3 CPU device that
#                    runs the Vulkan delegate's tests on a machine without a GPU
#   vulkan-tools     vulkaninfo, to see which Vulkan devices a machine has
#   chromium         headless Chromium: tests/devtools/test_report.py renders `etkit devtools report`'s HTML
#                    and checks its console for script errors
#   python3.11-venv  `python3.11 -m venv` when python3.11 is Debian's
#   gcc-arm-none-eabi, libnewlib-arm-none-eabi, libstdc++-arm-none-eabi-newlib   the Cortex-M cross
#                    compiler and its C/C++ libraries: `etkit runner build --target cortex-m55` (bare metal)
#   qemu-system-arm  runs that image on the emulated mps3-an547 board (Cortex-M55) in tests/baremetal
# cmake and ninja come from the Python venv (requirements-dev.txt), not from Debian.
# Needs root (or sudo) only when something is missing.
set -euo pipefail

PACKAGES=(build-essential dpkg-dev xz-utils patch debian-archive-keyring gpgv ca-certificates util-linux
          clang-14 libclang-rt-14-dev glslc libvulkan-dev libvulkan1 mesa-vulkan-drivers vulkan-tools
          chromium gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib qemu-system-arm)
if [[ "$(readlink -f "$(command -v python3.11 || echo /nonexistent)")" == /usr/bin/* ]]; then
  PACKAGES+=(python3.11-venv)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]]; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup_system.sh: all system packages present (${PACKAGES[*]})" >&2
  exit 0
fi

SUDO=""
if [[ "$(id -u)" != 0 ]]; then
  command -v sudo >/dev/null || { echo "setup_system.sh: ERROR: need root to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "setup_system.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >&2
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 \
  || { echo "setup_system.sh: ERROR: apt-get install ${missing[*]} failed" >&2; exit 1; }
