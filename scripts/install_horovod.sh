#!/usr/bin/env bash
# Install Horovod 0.28.1 (TensorFlow + Gloo, CPU only) into the environment of PYTHON.
#
# Usage: bash scripts/install_horovod.sh [PYTHON]        (default: .venv/bin/python)
#
# Contract:
#   * Idempotent: if `import horovod.tensorflow` already works under PYTHON (with tf_keras),
#     it only says so and exits 0.
#   * The built wheel is cached under ${RALP_TF_CACHE:-$HOME/.cache/ralp_tf}/wheels/tf-<TF version>/
#     so the 4-8 minute compile happens once per machine (and per TensorFlow version, because
#     Horovod's TF ops link against that TensorFlow's ABI). Delete the folder to force a rebuild.
#   * Build flags (see BUILD_NOTES.md, Pitfalls): TF + Gloo, no MPI/PyTorch/MXNet, --no-build-isolation so the
#     build sees the installed TensorFlow. cmake is pip-installed into the venv if missing/too old.
#   * TF 2.21 header workaround: xla_mpi_ops.cc includes highwayhash/farmhash headers that TF ships
#     under include/external/..., and the pre-2.16 path tensorflow/compiler/xla/client/xla_builder.h.
#     We put those folders plus a one-line forwarding header on CPATH; the PyPI sdist is unmodified.
#   * Concurrent invocations are serialised with flock on the cache folder.
#   * Exit status is non-zero, with the build log tail, if the build or the final check fails.
set -euo pipefail

HVD_VERSION="${HOROVOD_VERSION:-0.28.1}"
PY="${1:-.venv/bin/python}"
if ! command -v "$PY" >/dev/null 2>&1 && [ ! -x "$PY" ]; then
    echo "install_horovod: python '$PY' not found; pass the venv python, e.g. .venv/bin/python" >&2
    exit 2
fi
case "$PY" in
    */*) PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" ;;
    *) PY="$(command -v "$PY")" ;;
esac
BIN="$(dirname "$PY")"

check_import() {
    TF_USE_LEGACY_KERAS=1 TF_CPP_MIN_LOG_LEVEL=3 "$PY" - <<'EOF' >/dev/null 2>&1
import horovod, horovod.tensorflow as hvd, horovod.tensorflow.keras  # noqa: F401
assert horovod.__version__ and hvd.gloo_built()
EOF
}

if check_import; then
    echo "install_horovod: horovod $("$PY" -c 'import horovod; print(horovod.__version__)') already imports with TensorFlow; nothing to do."
    exit 0
fi

TF_VERSION="$("$PY" -c 'import importlib.metadata as m; print(m.version("tensorflow-cpu") if any(d.metadata["Name"]=="tensorflow-cpu" for d in m.distributions()) else m.version("tensorflow"))' 2>/dev/null)" || {
    echo "install_horovod: TensorFlow is not installed in $PY's environment; run 'make setup' first." >&2
    exit 2
}
PYTAG="$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
CACHE_ROOT="${RALP_TF_CACHE:-$HOME/.cache/ralp_tf}"
WHEEL_DIR="$CACHE_ROOT/wheels/tf-$TF_VERSION"
mkdir -p "$WHEEL_DIR"

exec 9>"$WHEEL_DIR/.lock"
if ! flock -n 9; then
    echo "install_horovod: another build holds $WHEEL_DIR/.lock; waiting for it..."
    flock 9
fi

find_wheel() { ls -1 "$WHEEL_DIR"/horovod-"$HVD_VERSION"-"$PYTAG"-*.whl 2>/dev/null | head -n1; }
WHEEL="$(find_wheel || true)"

if [ -z "$WHEEL" ]; then
    echo "install_horovod: no cached wheel for horovod $HVD_VERSION / TF $TF_VERSION / $PYTAG; building (4-8 minutes on 2 cores)."
    for tool in g++ make; do
        command -v "$tool" >/dev/null || { echo "install_horovod: '$tool' is required to build Horovod (apt-get install build-essential)." >&2; exit 2; }
    done
    # cmake >= 3.13 is needed; prefer the venv's, pip-install it there if missing or old.
    need_cmake=1
    for c in "$BIN/cmake" "$(command -v cmake || true)"; do
        if [ -n "$c" ] && [ -x "$c" ]; then
            v="$("$c" --version | head -n1 | awk '{print $3}')"
            if [ "$(printf '%s\n3.13\n' "$v" | sort -V | head -n1)" = "3.13" ]; then need_cmake=0; break; fi
        fi
    done
    if [ "$need_cmake" = 1 ]; then
        echo "install_horovod: installing cmake into the venv"
        "$PY" -m pip install --quiet "cmake>=3.13"
    fi
    export PATH="$BIN:$PATH"
    # Build dependencies that --no-build-isolation does not fetch.
    "$PY" -m pip install --quiet wheel packaging cloudpickle psutil pyyaml

    TF_INC="$("$PY" -c 'import tensorflow as tf; print(tf.sysconfig.get_include())' 2>/dev/null)"
    SHIM="$(mktemp -d)"
    BUILD_TMP="$(mktemp -d)"
    trap 'rm -rf "$SHIM" "$BUILD_TMP"' EXIT
    mkdir -p "$SHIM/tensorflow/compiler/xla/client"
    if [ -f "$TF_INC/xla/hlo/builder/xla_builder.h" ]; then
        echo '#include "xla/hlo/builder/xla_builder.h"' > "$SHIM/tensorflow/compiler/xla/client/xla_builder.h"
    fi
    export CPATH="$TF_INC/external/highwayhash:$TF_INC/external/farmhash_archive/src:$SHIM${CPATH:+:$CPATH}"
    export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
           HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_CPU_OPERATIONS=gloo
    export MAKEFLAGS="-j${HOROVOD_BUILD_JOBS:-$(nproc)}"
    LOG="$WHEEL_DIR/build.log"
    start=$(date +%s)
    if ! "$PY" -m pip wheel --no-build-isolation --no-deps --no-binary horovod \
            "horovod==$HVD_VERSION" -w "$BUILD_TMP" -v >"$LOG" 2>&1; then
        echo "install_horovod: build failed; last lines of $LOG:" >&2
        tail -n 40 "$LOG" >&2
        exit 1
    fi
    mv "$BUILD_TMP"/horovod-*.whl "$WHEEL_DIR"/
    WHEEL="$(find_wheel)"
    echo "install_horovod: built $(basename "$WHEEL") in $(( $(date +%s) - start )) s (log: $LOG)"
else
    echo "install_horovod: using cached wheel $WHEEL"
fi

"$PY" -m pip install --quiet --force-reinstall --no-deps "$WHEEL"
"$PY" -m pip install --quiet cloudpickle psutil pyyaml packaging

if ! check_import; then
    echo "install_horovod: horovod installed from $WHEEL but 'import horovod.tensorflow' fails:" >&2
    TF_USE_LEGACY_KERAS=1 "$PY" -c 'import horovod.tensorflow' 2>&1 | tail -n 20 >&2
    echo "If TensorFlow was upgraded, delete $WHEEL_DIR and rerun." >&2
    exit 1
fi
TF_USE_LEGACY_KERAS=1 TF_CPP_MIN_LOG_LEVEL=3 "$BIN/horovodrun" --check-build 2>/dev/null | sed -n '1,30p' || true
echo "install_horovod: horovod $HVD_VERSION ready in $("$PY" -c 'import sys; print(sys.prefix)')"
