#!/usr/bin/env bash
# Builds `bench` with `--features cuda` (the native engine on candle's CUDA backend) and
# prints where the binary is. Proves the cuda feature compiles on a machine with no GPU.
#
# What it does:
#   1. Finds a CUDA toolkit: an `nvcc` already on PATH, or $CUDA_HOME / $CUDA_PATH /
#      $CUDA_ROOT / /usr/local/cuda with bin/nvcc (the GPU machine's own toolkit wins).
#   2. Failing that, installs one from PyPI into a venv in the cache dir: the CUDA 13.0
#      wheels of the `cuda-toolkit` metapackage (nvcc, crt, nvvm/cicc, cudart, nvrtc,
#      cublas, curand, cccl/thrust). The CUDA 12 wheels cannot be used: nvidia-cuda-nvcc-cu12
#      ships only ptxas, no nvcc. cudarc 0.19.10 knows CUDA 11.4 to 13.4; BENCH_CUDA_PYPI_VERSION picks another.
#      It assembles $CACHE/cuda (bin/ include/ nvvm/ from the wheels, lib/ and lib64/ with
#      the unversioned .so links the linker needs) and, as the toolkit's own lib/stubs does,
#      a link-only stub lib/stubs/libcuda.so (SONAME libcuda.so.1) built from cudarc's list
#      of driver functions: the driver is not on PyPI.
#   3. Exports CUDA_HOME/CUDA_ROOT (cudarc's link search), PATH (cudarc runs `nvcc --version`,
#      candle-kernels' cudaforge runs nvcc), CUDA_COMPUTE_CAP (90 = H100 unless set, or found
#      by nvidia-smi), and runs, under nice:
#        cargo build -p bench --features cuda --target-dir $TARGET_DIR "$@"
#      (extra arguments go to cargo, e.g. --release).
#
# Needs: python3 with venv + network to PyPI (only when no toolkit is found), gcc/g++
# (host compiler for nvcc; gcc 12 works), the pinned Rust toolchain, ~3 GiB in the cache
# for the wheels, plus the target dir.
# Env: BENCH_CUDA_CACHE (default ~/.cache/bench-cuda), BENCH_CUDA_TARGET_DIR (default
# $BENCH_CUDA_CACHE/target), CUDA_COMPUTE_CAP, BENCH_CUDA_FORCE_PYPI=1 (ignore a system toolkit).
#
# The binary links libcuda.so.1 (the NVIDIA driver), libcudart/libcublas/libcublasLt/
# libcurand/libnvrtc at load time (candle-core asks cudarc for "dynamic-linking"): it starts
# only where the driver is installed, with the toolkit's lib dir on LD_LIBRARY_PATH (the
# script prints the line to use). On a machine without the driver even `bench --help` fails
# in the dynamic loader.
#
# Timing on the 2-core dev machine (no GPU, nice -n 19, other builds running): wheels ~1 min
# (~3 GiB); cargo build 16m16s with a target dir seeded from the workspace's target/debug
# (wasmtime and candle-core rebuilt; candle-kernels' nvcc PTX + libmoe.a for sm_90 ~8 min).
# A cold target dir takes longer. Without a driver, a built binary exits 127 in the loader
# (libcuda.so.1 not found); with a driver whose calls fail, `bench latency --device cuda`
# says: error: loading <model>: candle: DriverError(CUDA_ERROR_UNKNOWN, ...).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "check-cuda-build.sh: $*" >&2; }
die() { say "$*"; exit 1; }

CACHE=${BENCH_CUDA_CACHE:-$HOME/.cache/bench-cuda}
TARGET_DIR=${BENCH_CUDA_TARGET_DIR:-$CACHE/target}
# cuda-toolkit metapackage. 13.0 by default: the lent GPU machine's driver (580) runs CUDA 13.0,
# and the PTX that candle-kernels' nvcc writes loads only on a driver at least as new as that nvcc.
PYPI_CUDA=${BENCH_CUDA_PYPI_VERSION:-13.0.2}
mkdir -p "$CACHE"
start=$(date +%s)

# ---- 1. a toolkit already on this machine? ---------------------------------------------
cuda_root=
if [ "${BENCH_CUDA_FORCE_PYPI:-0}" != 1 ]; then
    if command -v nvcc >/dev/null 2>&1; then
        cuda_root=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
    else
        for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" "${CUDA_ROOT:-}" /usr/local/cuda /opt/cuda; do
            if [ -n "$d" ] && [ -x "$d/bin/nvcc" ]; then cuda_root=$(readlink -f "$d"); break; fi
        done
    fi
fi

# ---- 2. otherwise the PyPI wheels -------------------------------------------------------
if [ -z "$cuda_root" ]; then
    venv=$CACHE/cu13
    if [ ! -x "$venv/bin/python" ]; then
        say "no nvcc found: installing CUDA $PYPI_CUDA wheels from PyPI into $venv"
        python3 -m venv "$venv"
    fi
    if ! "$venv/bin/pip" show cuda-toolkit 2>/dev/null | grep -qx "Version: $PYPI_CUDA"; then
        nice -n 19 "$venv/bin/pip" install -q --disable-pip-version-check \
            "cuda-toolkit[nvcc,crt,nvvm,cudart,nvrtc,cublas,curand,cccl]==$PYPI_CUDA"
    fi
    wheels=$("$venv/bin/python" -c 'import os, nvidia; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')
    [ -x "$wheels/bin/nvcc" ] || die "no nvcc in $wheels/bin after pip install"

    cuda_root=$CACHE/cuda
    rm -rf "$cuda_root"
    mkdir -p "$cuda_root/lib/stubs"
    for d in bin include nvvm; do ln -s "$wheels/$d" "$cuda_root/$d"; done
    ln -s lib "$cuda_root/lib64"
    for f in "$wheels"/lib/*; do ln -s "$f" "$cuda_root/lib/"; done
    # The wheels ship only versioned sonames (libcudart.so.13); -lcudart needs libcudart.so.
    (cd "$cuda_root/lib" && for f in *.so.*; do b=${f%%.so.*}.so; [ -e "$b" ] || ln -s "$f" "$b"; done)

    # Link-only libcuda stub (like the toolkit's lib64/stubs/libcuda.so): every driver
    # function cudarc can declare, SONAME libcuda.so.1 so the real driver is loaded at run time.
    cudarc_sys=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19.*/src/driver/sys/mod.rs 2>/dev/null | tail -1 || true)
    if [ -z "$cudarc_sys" ]; then
        cargo fetch --locked >/dev/null
        cudarc_sys=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19.*/src/driver/sys/mod.rs | tail -1)
    fi
    grep -oE '^\s+fn cu[A-Za-z0-9_]+\(' "$cudarc_sys" | sed -E 's/^\s+fn //; s/\($//' | sort -u \
        | awk '{print "int " $1 "(void) { return 999; /* CUDA_ERROR_UNKNOWN */ }"}' \
        > "$cuda_root/lib/stubs/libcuda-stub.c"
    cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$cuda_root/lib/stubs/libcuda.so" \
        "$cuda_root/lib/stubs/libcuda-stub.c"
    say "toolkit from PyPI ready in $(( $(date +%s) - start ))s"
fi

# ---- 3. build -----------------------------------------------------------------------------
export PATH=$cuda_root/bin:$PATH
export CUDA_HOME=$cuda_root CUDA_ROOT=$cuda_root
unset CUDA_PATH CUDA_TOOLKIT_ROOT_DIR || true
if [ -z "${CUDA_COMPUTE_CAP:-}" ]; then
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ' || true)
    export CUDA_COMPUTE_CAP=${cap:-90}
fi
say "CUDA root $cuda_root; $(nvcc --version | grep -o 'release [0-9.]*'); CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP"

profile=debug
for a in "$@"; do [ "$a" = --release ] && profile=release; done
build_start=$(date +%s)
nice -n 19 cargo build --locked -p bench --features cuda --target-dir "$TARGET_DIR" "$@"
say "cargo build took $(( $(date +%s) - build_start ))s (all: $(( $(date +%s) - start ))s)"

bin=$TARGET_DIR/$profile/bench
[ -x "$bin" ] || die "no binary at $bin"
echo "$bin"
lib=$cuda_root/lib64
[ -d "$lib" ] || lib=$cuda_root/lib
say "built $bin"
say "run it where the NVIDIA driver is installed, as: LD_LIBRARY_PATH=$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} $bin ..."
missing=$(LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$bin" 2>/dev/null | grep 'not found' || true)
[ -z "$missing" ] || say "not found by the dynamic loader here (expected without a driver):
$missing"
