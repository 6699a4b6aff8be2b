#!/usr/bin/env bash
# GPU check for swerve's trainer model, in stages that each report on their own (see
# examples/gpu_parity.rs): per-op parity of every block the reference path runs, whole-model
# logits, gradients and cached decoding against the CPU, gradient checkpointing and the chunked
# LM head on the GPU, a GRPO step on both devices, an AdamW loop with tokens/s and MFU, and the
# Qwen2.5-0.5B shape at micro-batches 1, 2 and 4 against the memory plan. The binary runs under a
# 330 s limit so that a 15-minute device budget leaves room for a rerun.
#
# Usage (from the repository root):   trainer/scripts/gpu-check.sh [build|run|all]   (default all)
#   build  compile examples/gpu_parity with --features cuda and copy the binary to $OUT_DIR/bin
#   run    run that binary (or build first when it is missing and cargo exists)
#   all    build, then run
# Extra arguments after the mode go to the example (--steps, --batch, --seq, --hidden, --layers,
# --vocab; see examples/gpu_parity.rs).
#
# Assumptions, checked below with a clear message when they fail:
# - Linux x86-64. `run` needs an NVIDIA GPU with a working driver: nvidia-smi and libcuda.so.1.
# - `build` needs cargo, the crates of Cargo.lock (network or a filled ~/.cargo registry), and a
#   CUDA toolkit: nvcc plus include/cuda.h, and libnvrtc, libcublas, libcublasLt to link against.
#   It looks in $CUDA_ROOT, then nvcc on PATH, then /usr/local/cuda, then the NVIDIA wheels of a
#   Python environment (`python3 -c 'import nvidia'`, e.g. PyTorch's dependencies); if none is
#   found and the network allows, it pip-installs the nvcc/runtime/nvrtc/cublas wheels into
#   $OUT_DIR/cuda-wheels. Wheel libraries carry only versioned names (libcublas.so.12), so the
#   script makes unversioned links in $OUT_DIR/cuda-shim/lib64 for the linker.
# - dfdx 0.13's build script runs `nvidia-smi --query-gpu=compute_cap` and panics without it
#   (it reads CUDA_COMPUTE_CAP only after that call); on a build machine with no GPU set
#   CUDA_COMPUTE_CAP (e.g. 90 for H100/H200) and the script puts a stub nvidia-smi first on PATH.
#   libcuda is linked from the toolkit's stubs when the driver's library is absent; the real one
#   is loaded at run time.
# - The machine that only runs (no cargo, no network: the project's H200 image has nvcc and
#   PyTorch but no Rust) gets the binary built elsewhere; LD_LIBRARY_PATH is extended with the
#   wheel library folders found through python3 so that libnvrtc/libcublas resolve.
# Everything is logged to $OUT_DIR/gpu-check.log. Whole run: a few minutes (build ≈ 1–2 min warm
# cache; on the GPU: parity stages seconds, training loop 10 steps of 8×256 tokens on a
# ~60M-parameter model, the memory stage 9 steps of the 0.5B shape).
set -euo pipefail

MODE=${1:-all}
[[ $# -gt 0 ]] && shift
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT_DIR=${OUT_DIR:-$ROOT/target/gpu-check}
mkdir -p "$OUT_DIR/bin"
LOG=$OUT_DIR/gpu-check.log
exec > >(tee -a "$LOG") 2>&1
echo "== gpu-check $(date -u +%FT%TZ) mode=$MODE host=$(uname -n) arch=$(uname -m)"
[[ $(uname -m) == x86_64 ]] || echo "warning: not x86-64; a binary built here will not run on the H200 machine"

have() { command -v "$1" >/dev/null 2>&1; }

# Folders of NVIDIA wheel packages in the Python environment, if any.
wheel_root() {
    have python3 || return 1
    python3 - <<'PY' 2>/dev/null
import os, nvidia
print(os.path.dirname(list(nvidia.__path__)[0]) + "/nvidia")
PY
}

find_cuda() {
    if [[ -n ${CUDA_ROOT:-} && -x $CUDA_ROOT/bin/nvcc ]]; then echo "$CUDA_ROOT"; return; fi
    if have nvcc; then dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")"; return; fi
    if [[ -x /usr/local/cuda/bin/nvcc ]]; then echo /usr/local/cuda; return; fi
    return 1
}

# Builds a toolkit-shaped folder (bin, include, lib64) out of wheel folders.
shim_from_wheels() {
    local w=$1 shim=$OUT_DIR/cuda-shim
    rm -rf "$shim"; mkdir -p "$shim/include" "$shim/lib64"
    local nvcc
    nvcc=$(ls "$w"/cuda_nvcc/bin/nvcc "$w"/cu*/bin/nvcc 2>/dev/null | head -1 || true)
    [[ -n $nvcc ]] || { echo "no nvcc in wheels under $w"; return 1; }
    ln -s "$(dirname "$nvcc")" "$shim/bin"
    for inc in "$w"/*/include; do cp -rs "$inc"/. "$shim/include/" 2>/dev/null || true; done
    for lib in "$w"/*/lib "$w"/*/lib64 "$w"/*/lib/stubs; do
        [[ -d $lib ]] || continue
        for so in "$lib"/lib*.so*; do
            [[ -e $so ]] || continue
            local base=${so##*/}; base=${base%%.so*}.so
            [[ -e $shim/lib64/$base ]] || ln -s "$so" "$shim/lib64/$base"
        done
    done
    echo "$shim"
}

runtime_libs() {
    local dirs="" w
    if w=$(wheel_root); then
        for d in "$w"/*/lib; do dirs="$dirs:$d"; done
    fi
    if root=$(find_cuda 2>/dev/null); then dirs="$dirs:$root/lib64:$root/lib"; fi
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}$dirs"
}

do_build() {
    have cargo || { echo "error: cargo not found; build on a machine with Rust and carry $OUT_DIR/bin/gpu_parity"; exit 1; }
    local root
    if ! root=$(find_cuda); then
        local w
        if ! w=$(wheel_root) || ! ls "$w"/cuda_nvcc/bin/nvcc >/dev/null 2>&1; then
            echo "no CUDA toolkit found; trying pip wheels (needs network)"
            python3 -m pip install -q --target "$OUT_DIR/cuda-wheels" \
                nvidia-cuda-nvcc-cu12 nvidia-cuda-runtime-cu12 nvidia-cuda-nvrtc-cu12 nvidia-cublas-cu12
            w=$OUT_DIR/cuda-wheels/nvidia
        fi
        root=$(shim_from_wheels "$w")
    fi
    echo "CUDA toolkit: $root ($("$root/bin/nvcc" --version | tail -1))"
    [[ -f $root/include/cuda.h ]] || { echo "error: $root/include/cuda.h missing (cudarc needs it)"; exit 1; }
    # The linker needs unversioned names; add them (and a libcuda stub when no driver) in a shim.
    local links=$OUT_DIR/link-shim; rm -rf "$links"; mkdir -p "$links"
    for name in cuda nvrtc cublas cublasLt; do
        local found
        found=$(ls "$root"/lib64/lib$name.so* "$root"/lib/lib$name.so* /usr/lib/x86_64-linux-gnu/lib$name.so* \
                   "$root"/lib64/stubs/lib$name.so* 2>/dev/null | head -1 || true)
        [[ -n $found ]] && ln -sf "$found" "$links/lib$name.so"
    done
    export CUDA_ROOT=$root CUDA_PATH=$root PATH="$root/bin:$PATH"
    export LIBRARY_PATH="$links:$root/lib64:${LIBRARY_PATH:-}"
    export RUSTFLAGS="${RUSTFLAGS:-} -L native=$links"
    if ! nvidia-smi --query-gpu=compute_cap --format=csv,noheader >/dev/null 2>&1; then
        local cap=${CUDA_COMPUTE_CAP:-90}
        echo "no working nvidia-smi: stub reporting compute capability $cap for dfdx's build script"
        mkdir -p "$OUT_DIR/stub-bin"
        # dfdx's build script asks with --format=csv and expects the header line first.
        printf '#!/bin/sh\ncase "$*" in *noheader*) ;; *) echo compute_cap ;; esac\necho %s.%s\n' \
            "${cap:0:1}" "${cap:1}" >"$OUT_DIR/stub-bin/nvidia-smi"
        chmod +x "$OUT_DIR/stub-bin/nvidia-smi"
        export PATH="$OUT_DIR/stub-bin:$PATH" CUDA_COMPUTE_CAP=$cap
    fi
    local t0=$SECONDS
    (cd "$ROOT" && CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target/gpu-check/cargo} \
        cargo build --release -p swerve-trainer --features cuda --example gpu_parity)
    cp "${CARGO_TARGET_DIR:-$ROOT/target/gpu-check/cargo}/release/examples/gpu_parity" "$OUT_DIR/bin/"
    echo "build: $((SECONDS - t0)) s -> $OUT_DIR/bin/gpu_parity"
}

do_run() {
    have nvidia-smi || { echo "error: nvidia-smi not found: no GPU driver here"; exit 1; }
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv
    [[ -x $OUT_DIR/bin/gpu_parity ]] || do_build
    runtime_libs
    local mem=$OUT_DIR/memory.csv
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$mem" &
    local sampler=$!
    local status=0
    timeout 330 "$OUT_DIR/bin/gpu_parity" "$@" || status=$?
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    echo "peak GPU memory used (whole device, MiB): $(sort -n "$mem" | tail -1)"
    [[ $status -eq 0 ]] || { echo "gpu_parity failed with status $status"; exit "$status"; }
}

case $MODE in
    build) do_build ;;
    run) do_run "$@" ;;
    all) do_build; do_run "$@" ;;
    *) echo "usage: $0 [build|run|all] [example args]"; exit 2 ;;
esac
echo "== gpu-check done"
