# Top-level convenience targets. Quick start: `make demo` and `make test`.
#
#   make deps          install missing build dependencies (Debian/Ubuntu, apt-get; pyarrow into a venv)
#   make build         configure + build build/ (Release; CUDA off unless CUDA=1)
#   make test          build, then run the fast tests (ctest -LE slow)
#   make test-all      build, then run every test including the slow ones
#   make asan          build-asan/ with ASan+UBSan (Debug), run the fast tests but the kernel twins
#   make cuda-compile  build-cuda/ with MKS_ENABLE_CUDA=ON: nvcc compiles every .cu
#   make demo          build, then run samples/demo.sh
#   make clean         remove build/, build-asan/, build-cuda/

SHELL := /bin/bash
NPROC := $(shell nproc 2>/dev/null || echo 2)
CUDA ?= 0
CTEST_JOBS ?= 2
BUILD_DIR ?= build

ifeq ($(CUDA),1)
CUDA_FLAG := -DMKS_ENABLE_CUDA=ON
else
CUDA_FLAG := -DMKS_ENABLE_CUDA=OFF
endif

DEPS_PKGS := cmake gcc pkg-config zstd libutf8proc-dev libpcre2-dev libzstd-dev zlib1g-dev libisal-dev pigz tabix libjansson-dev libxxhash-dev nettle-dev python3 python3-venv python3-dev libopenmpi-dev openmpi-bin

.PHONY: all deps deps-arrow build test test-all asan cuda-compile demo clean help

all: build

help:
	@sed -n '1,12p' Makefile

deps:
	@if ! command -v dpkg-query >/dev/null 2>&1; then \
	  echo "deps: no dpkg-query (not Debian/Ubuntu): install $(DEPS_PKGS) or their equivalents yourself"; \
	  exit 0; \
	fi; \
	missing=""; \
	for p in $(DEPS_PKGS); do \
	  if ! dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q "install ok installed"; then \
	    missing="$$missing $$p"; \
	  fi; \
	done; \
	if [ -z "$$missing" ]; then \
	  echo "deps: all present ($(DEPS_PKGS))"; \
	else \
	  echo "deps: installing:$$missing"; \
	  if [ "$$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends $$missing; \
	fi
	@$(MAKE) --no-print-directory deps-arrow

# Parquet / Arrow IPC inputs (MKS_ENABLE_ARROW, docs/reader.md): Debian 12 has
# no libarrow, so Arrow's C++ libraries and headers come from the pyarrow
# wheel, in a venv CMake looks for (ARROW_VENV). No package index: a note,
# and those inputs stay off.
ARROW_VENV ?= $(HOME)/.local/share/mkshards/arrow-venv
deps-arrow:
	@if "$(ARROW_VENV)/bin/python" -c 'import pyarrow' 2> /dev/null; then \
	  echo "deps: pyarrow $$("$(ARROW_VENV)/bin/python" -c 'import pyarrow; print(pyarrow.__version__)') in $(ARROW_VENV)"; \
	elif python3 -m venv "$(ARROW_VENV)" > /dev/null 2>&1 && \
	     "$(ARROW_VENV)/bin/python" -m pip install -q --disable-pip-version-check pyarrow; then \
	  echo "deps: installed pyarrow into $(ARROW_VENV) (Arrow C++ for .parquet / .arrow inputs)"; \
	else \
	  echo "deps: pyarrow not installed into $(ARROW_VENV) (python3-venv or a package index missing): .parquet / .arrow inputs stay off"; \
	fi

build: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release $(CUDA_FLAG)
	cmake --build $(BUILD_DIR) -j$(NPROC)

test: build
	bash tests/ctest_report.sh --test-dir $(BUILD_DIR) --output-on-failure -LE slow -j$(CTEST_JOBS)

test-all: build
	bash tests/ctest_report.sh --test-dir $(BUILD_DIR) --output-on-failure -j$(CTEST_JOBS)

asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMKS_SANITIZE=ON -DMKS_ENABLE_CUDA=OFF
	cmake --build build-asan -j$(NPROC)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  bash tests/ctest_report.sh --test-dir build-asan --output-on-failure -LE 'slow|kernel-twin' -j$(CTEST_JOBS)

cuda-compile: deps
	@if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then \
	  echo "cuda-compile: nvcc not found, skipping (install the CUDA toolkit to compile the kernels)"; \
	else \
	  export PATH="$$PATH:/usr/local/cuda/bin"; \
	  if [ ! -f build-cuda/_nccl/nvidia/nccl/include/nccl.h ]; then \
	    mkdir -p build-cuda/_nccl && python3 -m pip download -q --no-deps -d build-cuda/_nccl nvidia-nccl-cu13 && \
	    python3 -m zipfile -e build-cuda/_nccl/nvidia_nccl_cu13-*.whl build-cuda/_nccl && rm -f build-cuda/_nccl/*.whl || \
	    echo "cuda-compile: cannot fetch the nvidia-nccl-cu13 wheel: NCCL code compiles only where CMake finds NCCL"; \
	  fi; \
	  bash tools/fetch_cudnn_frontend.sh || \
	    echo "cuda-compile: no cudnn-frontend headers: the cuDNN attention compiles to its KN_ENOTSUP stubs"; \
	  cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DMKS_ENABLE_CUDA=ON && \
	  cmake --build build-cuda -j$(NPROC); \
	fi

demo: build
	@for s in samples/*.sh; do echo "==> $$s"; MKSHARDS=$(BUILD_DIR)/tools/mkshards bash "$$s" || exit $$?; done

clean:
	rm -rf build build-asan build-cuda
