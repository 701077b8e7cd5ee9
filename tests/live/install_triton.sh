#!/usr/bin/env bash
# The live Triton's venv: nvidia-pytriton (pinned), which bundles a CPU-capable Triton server
# (tritonserver 2.51.0 and its Python backend), in a virtual environment of its own.
#   tests/live/install_triton.sh .venv-triton
# Found by trying (issue 21): the bundled Python-backend stub links `libpython3.X.so.1.0` by
# name, and the loader's first pick is the system's (Debian's 3.11.2) while the stub runs the
# venv's standard library (here pyenv's 3.11.7): the model fails to load (`'_thread.RLock' object
# has no attribute '_recursion_count'`). Whoever starts the server (tests/live/triton_server.py)
# puts the venv interpreter's own LIBDIR first on LD_LIBRARY_PATH; the check below loads the
# stub's libraries that way and fails here if the interpreter has no shared libpython.
set -euo pipefail
VENV=${1:-.venv-triton}
VERSION=${PYTRITON_VERSION:-0.7.0}
PYTHON=${PYTHON:-python3}
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "nvidia-pytriton==$VERSION"
LIBDIR=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')
LDLIBRARY=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("LDLIBRARY"))')
if [ ! -e "$LIBDIR/$LDLIBRARY" ] || [ "${LDLIBRARY%.a}" != "$LDLIBRARY" ]; then
  echo "install_triton: $PYTHON has no shared libpython ($LIBDIR/$LDLIBRARY); the Triton" \
    "Python backend needs one" >&2
  exit 1
fi
STUB=$("$VENV/bin/python" -c 'import pathlib, sys, pytriton
print(pathlib.Path(pytriton.__file__).parent / "tritonserver" / "python_backend_stubs"
      / f"{sys.version_info.major}.{sys.version_info.minor}" / "triton_python_backend_stub")')
SERVER=$(dirname "$(dirname "$(dirname "$STUB")")")/bin/tritonserver
for binary in "$SERVER" "$STUB"; do
  if LD_LIBRARY_PATH=$LIBDIR ldd "$binary" | grep -q 'not found'; then
    echo "install_triton: $binary lacks libraries:" >&2
    LD_LIBRARY_PATH=$LIBDIR ldd "$binary" | grep 'not found' >&2
    exit 1
  fi
done
"$VENV/bin/python" -c 'import importlib.metadata as m, pytriton.triton
print("nvidia-pytriton", m.version("nvidia-pytriton"), "ready")'
touch "$VENV/.installed-stamp"
