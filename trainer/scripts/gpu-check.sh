#!/usr/bin/env bash
# GPU check for swerve's trainer model, in stages that each report on their own (see
# examples/gpu_parity.rs): per-op parity of every block the reference path runs, whole-model
# logits, gradients and cached decoding against the CPU, gradient checkpointing and the chunked
# LM head on the GPU, a GRPO step on both devices, an AdamW loop with tokens/s and MFU, and the
# Qwen2.5-0.5B shape at micro-batches 1, 2 and 4 (and 1 × 4096), 3B at 8 × 1024, peak memory
# against the memory plan. The binary runs under a 330 s limit so that a 15-minute device budget
# leaves room for a rerun.
#
# Usage (from the repository root):   trainer/scripts/gpu-check.sh [build|run|all]   (default all)
#   build  compile examples/gpu_parity and the trainer with --features cuda into $OUT_DIR/bin
#   run    run that binary (or build first when it is missing and cargo exists)
#   all    build, then run
# Extra arguments after the mode go to the example (--steps, --batch, --seq, --hidden, --layers,
# --vocab, --big, --phases-only; see examples/gpu_parity.rs).
#
# Assumptions, checked below with a clear message when they fail:
# - Linux x86-64. `run` needs an NVIDIA GPU with a working driver: nvidia-smi and libcuda.so.1.
# - `build` needs cargo, the crates of Cargo.lock (network or a filled ~/.cargo registry), and a
#   CUDA toolkit: nvcc plus include/cuda.h, and libnvrtc, libcublas, libcublasLt to link against.
#   It looks in $CUDA_ROOT, then nvcc on PATH, then /usr/local/cuda, then the NVIDIA wheels of a
#   Python environment (`python3 -c 'import nvidia'`, e.g. PyTorch's dependencies); if none is
#   found and the network allows, it builds one from the pinned CUDA 13.0 wheels
#   (scripts/cuda13-toolkit.sh) in $OUT_DIR/cuda13. Wheel libraries carry only versioned names
#   (libcublas.so.13), so the script makes unversioned links in $OUT_DIR/cuda-shim/lib64 for
#   the linker.
# - NVRTC: dfdx compiles a few kernels at run time with include folders fixed at build time;
#   `build` packs them into $OUT_DIR/bin/nvrtc and compiles those kernels offline
#   (scripts/nvrtc-check.py, with ptxas over all of dfdx's PTX); `run` recreates the folders at
#   the same paths when they are missing and compiles the kernels with that machine's NVRTC
#   before the binary starts. Carry $OUT_DIR/bin whole.
# - dfdx 0.13's build script runs `nvidia-smi --query-gpu=compute_cap` and panics without it
#   (it reads CUDA_COMPUTE_CAP only after that call); on a build machine with no GPU set
#   CUDA_COMPUTE_CAP (e.g. 90 for H100/H200) and the script puts a stub nvidia-smi first on PATH.
#   libcuda is linked from the toolkit's stubs when the driver's library is absent; the real one
#   is loaded at run time.
# - The machine that only runs (no cargo, no network: the project's H200 image has nvcc and
#   PyTorch but no Rust) gets the binary built elsewhere; LD_LIBRARY_PATH is extended with the
#   wheel library folders found through python3 so that libnvrtc/libcublas resolve.
# Everything is logged to $OUT_DIR/gpu-check.log. Then, when the trainer binary is there
# (`build` makes it), the `demo:` stage: the bundled run shortened to 20 SFT and 3 GRPO steps on
# the CPU and with --device cuda, SFT losses side by side. Whole run on an H200: about 2
# minutes (build ≈ 2 min warm cache here; device times in docs/gpu.md).
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
    # The driver's libcuda.so.1, where a container mounts it outside the loader's cache.
    [[ -d /usr/local/nvidia/lib64 ]] && dirs="$dirs:/usr/local/nvidia/lib64"
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}$dirs"
}

do_build() {
    have cargo || { echo "error: cargo not found; build on a machine with Rust and carry $OUT_DIR/bin/gpu_parity"; exit 1; }
    local root
    if ! root=$(find_cuda); then
        local w
        if ! w=$(wheel_root) || ! ls "$w"/cuda_nvcc/bin/nvcc >/dev/null 2>&1; then
            # The pinned CUDA 13.0 wheels (what the H200 machine's driver accepts), never an
            # unpinned fallback: a newer toolkit emits PTX that driver cannot load.
            echo "no CUDA toolkit found; fetching the pinned CUDA 13.0 wheels (needs network)"
            "$ROOT/trainer/scripts/cuda13-toolkit.sh" "$OUT_DIR/cuda13"
            root=$OUT_DIR/cuda13/shim
        else
            root=$(shim_from_wheels "$w")
        fi
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
        cargo build --release -p swerve-trainer --features cuda --example gpu_parity --bin trainer)
    local built=${CARGO_TARGET_DIR:-$ROOT/target/gpu-check/cargo}/release
    cp "$built/examples/gpu_parity" "$built/trainer" "$OUT_DIR/bin/"
    strip "$OUT_DIR/bin/gpu_parity" "$OUT_DIR/bin/trainer"
    # The trainer carries its plugins and wasmtime (about 60 MB): compressed, so that the whole
    # bin folder travels within the device tool's 64 MiB; `run` unpacks it.
    xz -f -T0 "$OUT_DIR/bin/trainer"
    echo "build: $((SECONDS - t0)) s -> $OUT_DIR/bin/{gpu_parity,trainer.xz} ($(du -sh "$OUT_DIR/bin" | cut -f1))"
    pack_nvrtc "$root"
    # The run-time kernels compile here first, with the same options and include folders.
    # (libnvrtc loads libnvrtc-builtins from the loader's path: its own folder goes on it.)
    local nvrtc
    nvrtc=$(readlink -f "$(ls "$root"/lib64/libnvrtc.so* | head -1)")
    LD_LIBRARY_PATH="$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        python3 "$ROOT/trainer/scripts/nvrtc-check.py" --dfdx-src "$OUT_DIR/bin/nvrtc/dfdx-src" \
        --include "$root/include" --out-dir "$(cat "$OUT_DIR/bin/nvrtc/out-dir")" \
        --nvrtc "$nvrtc" --ptxas "$root/bin/ptxas" \
        --arch "sm_${CUDA_COMPUTE_CAP:-90}"
}

# NVRTC's include folders are fixed in the binary at build time (dfdx passes the toolkit's
# `include` and its build OUT_DIR to every run-time kernel compile). Records both paths and
# packs their contents into $OUT_DIR/bin/nvrtc, with dfdx's kernel sources for nvrtc-check.py,
# so that `run` can recreate them at the same paths on a machine that has neither.
pack_nvrtc() {
    local root=$1 pack=$OUT_DIR/bin/nvrtc out_dir
    rm -rf "$pack"; mkdir -p "$pack/dfdx-src/src/tensor_ops"
    # The build folder of dfdx whose path the binary holds (string constants run together in
    # the binary, so look for each candidate's path rather than parse them out).
    out_dir=$(for d in "${CARGO_TARGET_DIR:-$ROOT/target/gpu-check/cargo}"/release/build/dfdx-*/out; do
        [[ -f $d/cuda_utils.cuh ]] && grep -qF "$d" "$OUT_DIR/bin/gpu_parity" && echo "$d"; done | head -1)
    [[ -n $out_dir ]] || { echo "error: no dfdx build folder named in $OUT_DIR/bin/gpu_parity"; exit 1; }
    grep -qF "$root/include" "$OUT_DIR/bin/gpu_parity" ||
        { echo "error: $root/include is not the include folder named in the binary"; exit 1; }
    echo "$root/include" >"$pack/include-dir"
    echo "$out_dir" >"$pack/out-dir"
    tar -C "$(readlink -f "$root/include")" -cJf "$pack/include.tar.xz" .
    tar -C "$out_dir" -cJf "$pack/out.tar.xz" --exclude='*.ptx' .
    (cd "$out_dir" && tar -cJf "$pack/ptx.tar.xz" ./*.ptx)
    local src
    src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/dfdx-0.13.0 | head -1)
    (cd "$src" && for f in src/tensor_ops/*/cuda_kernel.rs; do
        if grep -q compile_ptx_with_opts "$f"; then install -D -m 644 "$f" "$pack/dfdx-src/$f"; fi
    done)
    echo "nvrtc folders packed: include $root/include, OUT_DIR $out_dir ($(du -sh "$pack" | cut -f1))"
}

# On the machine that runs: recreate the folders packed above where the binary expects them,
# then compile the run-time kernels with that machine's NVRTC before the binary needs them.
unpack_nvrtc() {
    local pack=$OUT_DIR/bin/nvrtc
    [[ -d $pack ]] || { echo "no $pack: NVRTC folders not recreated (built on this machine?)"; return 0; }
    local inc out
    inc=$(cat "$pack/include-dir") out=$(cat "$pack/out-dir")
    if [[ ! -f $inc/cuda_fp16.h ]]; then
        rm -rf "$inc"; mkdir -p "$inc" && tar -C "$inc" -xJf "$pack/include.tar.xz"
        echo "recreated $inc"
    fi
    if [[ ! -f $out/cuda_utils.cuh ]]; then
        mkdir -p "$out" && tar -C "$out" -xJf "$pack/out.tar.xz" && tar -C "$out" -xJf "$pack/ptx.tar.xz"
        echo "recreated $out"
    fi
    local nvrtc ptxas_bin
    nvrtc=$(for d in ${LD_LIBRARY_PATH//:/ }; do ls "$d"/libnvrtc.so.13* 2>/dev/null; done | grep -v alt | head -1 || true)
    ptxas_bin=$(command -v ptxas || ls /usr/local/cuda/bin/ptxas 2>/dev/null || true)
    python3 "$ROOT/trainer/scripts/nvrtc-check.py" --dfdx-src "$pack/dfdx-src" --include "$inc" \
        --out-dir "$out" --nvrtc "${nvrtc:-libnvrtc.so.13}" ${ptxas_bin:+--ptxas "$ptxas_bin"} \
        --arch "sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)" ||
        echo "nvrtc-check failed: the run-time kernels will fail in the binary too"
}

do_run() {
    have nvidia-smi || { echo "error: nvidia-smi not found: no GPU driver here"; exit 1; }
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv
    [[ -x $OUT_DIR/bin/gpu_parity ]] || do_build
    runtime_libs
    unpack_nvrtc
    local mem=$OUT_DIR/memory.csv
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$mem" &
    local sampler=$!
    local status=0
    timeout 330 "$OUT_DIR/bin/gpu_parity" "$@" || status=$?
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    echo "peak GPU memory used (whole device, MiB): $(sort -n "$mem" | tail -1)"
    if [[ -f $OUT_DIR/bin/trainer.xz && ! -x $OUT_DIR/bin/trainer ]]; then
        python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
            "$OUT_DIR/bin/trainer.xz" "$OUT_DIR/bin/trainer" && chmod +x "$OUT_DIR/bin/trainer"
    fi
    [[ -x $OUT_DIR/bin/trainer ]] && demo_stage
    [[ $status -eq 0 ]] || { echo "gpu_parity failed with status $status"; exit "$status"; }
}

# `demo:` the trainer's own command on both devices: the bundled run (SFT, then GRPO with the
# swe-rl reward plugin, then predictions) shortened to 20 SFT and 3 GRPO steps, on the CPU and
# with --device cuda; the SFT losses side by side (same seed and data: they should agree to
# float rounding), and each run's wall time.
demo_stage() {
    local cfg=$OUT_DIR/demo.toml
    sed -e 's/^max_steps = 200$/max_steps = 20/' -e 's/^max_steps = 240$/max_steps = 3/' \
        -e 's/^predict_max_new_tokens = .*/predict_max_new_tokens = 64/' \
        "$ROOT/trainer/configs/swerve-mini-tiny.toml" >"$cfg"
    [[ $(grep -cE '^max_steps = (20|3)$' "$cfg") -eq 2 ]] ||
        { echo "demo: trainer/configs/swerve-mini-tiny.toml changed; max_steps not shortened"; return 1; }
    local dev t0 rc
    for dev in cpu cuda; do
        t0=$SECONDS rc=0
        timeout 150 "$OUT_DIR/bin/trainer" demo --config "$cfg" --output "$OUT_DIR/demo-$dev" \
            --device "$dev" >"$OUT_DIR/demo-$dev.log" 2>&1 || rc=$?
        echo "demo: --device $dev exit $rc in $((SECONDS - t0)) s"
        [[ $rc -eq 0 ]] || tail -20 "$OUT_DIR/demo-$dev.log"
    done
    python3 - "$OUT_DIR" <<'PY'
import json, sys, os
def losses(dev, kind, key):
    p = os.path.join(sys.argv[1], f"demo-{dev}", kind, "metrics.jsonl")
    if not os.path.exists(p):
        return []
    return [json.loads(l).get(key) for l in open(p) if l.strip()]
for kind, key in (("sft", "loss"), ("grpo", "reward")):
    c, g = losses("cpu", kind, key), losses("cuda", kind, key)
    print(f"demo: {kind} {key} cpu {['%.6f' % x for x in c if x is not None][:20]}")
    print(f"demo: {kind} {key} gpu {['%.6f' % x for x in g if x is not None][:20]}")
    pairs = [(a, b) for a, b in zip(c, g) if a is not None and b is not None]
    if pairs:
        worst = max(abs(a - b) / max(abs(a), 1e-12) for a, b in pairs)
        print(f"demo: {kind} {key}: {len(pairs)} steps compared, max relative difference {worst:.2e}")
PY
}

case $MODE in
    build) do_build ;;
    run) do_run "$@" ;;
    all) do_build; do_run "$@" ;;
    *) echo "usage: $0 [build|run|all] [example args]"; exit 2 ;;
esac
echo "== gpu-check done"
