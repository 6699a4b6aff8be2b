#!/usr/bin/env bash
# Builds a CUDA 13.0 toolkit folder from PyPI wheels, for compiling the `cuda` feature on a
# machine with no GPU and no CUDA install (how the gpu_parity binary was built for the H200
# machine, whose driver is CUDA 13.0: PTX from a newer nvcc would not load there).
#
# Usage: trainer/scripts/cuda13-toolkit.sh DIR   then   CUDA_ROOT=DIR/shim trainer/scripts/gpu-check.sh build
#
# Versions are pinned to 13.0: nvcc, crt (nvcc's crt/ headers, a wheel of their own), nvvm
# (cicc; an unpinned nvvm emits PTX the 13.0 ptxas rejects: "Unsupported .version 9.5"), cccl (cuda_fp16.h needs <nv/target>), runtime, nvrtc,
# cublas, curand. libcuda comes with the driver, so the link uses a stub exporting the driver
# symbols cudarc 0.9 declares (soname libcuda.so.1; the real one is loaded at run time).
set -euo pipefail
DIR=${1:?usage: $0 DIR}
mkdir -p "$DIR/wheels" "$DIR/root"
python3 -m pip download -q --no-deps -d "$DIR/wheels" \
    'nvidia-cuda-nvcc==13.0.88' 'nvidia-cuda-crt==13.0.88' 'nvidia-nvvm==13.0.88' 'nvidia-cuda-cccl==13.0.*' \
    'nvidia-cuda-runtime==13.0.*' 'nvidia-cuda-nvrtc==13.0.88' 'nvidia-cublas==13.0.2.14' \
    'nvidia-curand==10.4.*'
for w in "$DIR"/wheels/*.whl; do python3 -m zipfile -e "$w" "$DIR/root"; done
CU=$DIR/root/nvidia/cu13
chmod +x "$CU"/bin/* "$CU"/nvvm/bin/* 2>/dev/null || true
SHIM=$DIR/shim
rm -rf "$SHIM" && mkdir -p "$SHIM/lib64"
ln -s "$CU/bin" "$SHIM/bin"
ln -s "$CU/include" "$SHIM/include"
ln -s "$CU/nvvm" "$SHIM/nvvm"
for lib in nvrtc cublas cublasLt curand; do
    so=$(ls "$CU"/lib/lib$lib.so.* | grep -v alt | head -1)
    ln -sf "$so" "$SHIM/lib64/lib$lib.so"
done
CUDARC=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.9.15 | head -1)
grep -ohE 'pub fn cu[A-Za-z0-9_]+' "$CUDARC/src/driver/sys.rs" | sort -u | sed 's/pub fn //' |
    while read -r sym; do echo "int $sym(void){return 999;}"; done >"$SHIM/cuda_stub.c"
cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$SHIM/lib64/libcuda.so" "$SHIM/cuda_stub.c"
echo "CUDA_ROOT=$SHIM ($("$SHIM/bin/nvcc" --version | tail -1))"
