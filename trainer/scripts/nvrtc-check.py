#!/usr/bin/env python3
"""Compiles dfdx 0.13's run-time CUDA kernels offline, as the trainer would on a GPU, and runs
ptxas over the result and over dfdx's build-time PTX.

dfdx compiles a few kernels with NVRTC the first time they run (reshape of a non-contiguous
tensor, concatenation, stacking, dtype conversion), with the include folders fixed at build time
(the toolkit's `include` and dfdx's build `OUT_DIR`, which holds `cuda_utils.cuh`). A failure
there is a panic in the middle of a GPU run; this check finds it on the build machine, without
a GPU, and on the GPU machine before the run (where the folders are recreated).

Usage:
  nvrtc-check.py --dfdx-src DIR --include DIR --out-dir DIR [--nvrtc LIB] [--ptxas BIN]
                 [--arch sm_90]

  --dfdx-src  dfdx-0.13.0's source folder (the cargo registry's), where the kernel sources are
  --include   the toolkit include folder the binary was built with (CUDA_INCLUDE_DIR)
  --out-dir   dfdx's build OUT_DIR (cuda_utils.cuh and the build-time *.ptx)
  --nvrtc     libnvrtc to load (default: libnvrtc.so.13 from the loader's path)
  --ptxas     ptxas to assemble every PTX with for --arch (skipped when absent)

Exits non-zero when any kernel fails to compile or assemble; prints one line per kernel.
"""
import argparse
import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The element types the trainer instantiates dfdx's kernels with (f32 tensors; usize indices
# for gathers; f16 for dtype conversion when a checkpoint holds half-precision weights).
TYPES = {"$T": ["float"], "$Ty": ["float"], "$Src": ["float", "__half"], "$Dst": ["float", "__half"]}


def kernel_sources(dfdx_src):
    """(file, constant name, source) for each NVRTC-compiled kernel string in dfdx."""
    out = []
    for path in sorted(glob.glob(os.path.join(dfdx_src, "src", "tensor_ops", "*", "cuda_kernel.rs"))):
        text = open(path, encoding="utf-8").read()
        if "compile_ptx_with_opts" not in text:
            continue
        for m in re.finditer(r'const (\w+): &str = "((?:[^"\\]|\\.)*)";', text, re.S):
            src = m.group(2).replace('\\"', '"').replace("\\\\", "\\")
            out.append((os.path.relpath(path, dfdx_src), m.group(1), src))
    return out


def instantiate(src):
    """Every substitution of the type placeholders a source uses."""
    variants = [src]
    for ph in sorted(TYPES, key=len, reverse=True):  # $Ty before $T
        if ph in src:
            variants = [v.replace(ph, t) for v in variants for t in TYPES[ph]]
    return variants


class Nvrtc:
    def __init__(self, lib):
        self.lib = ctypes.CDLL(lib)
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        ver = (ctypes.c_int(), ctypes.c_int())
        self.lib.nvrtcVersion(ctypes.byref(ver[0]), ctypes.byref(ver[1]))
        self.version = f"{ver[0].value}.{ver[1].value}"

    def compile(self, src, options):
        prog = ctypes.c_void_p()
        rc = self.lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), None, 0, None, None)
        if rc:
            return None, self.lib.nvrtcGetErrorString(rc).decode()
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        rc = self.lib.nvrtcCompileProgram(prog, len(options), opts)
        size = ctypes.c_size_t()
        self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        self.lib.nvrtcGetProgramLog(prog, log)
        if rc:
            self.lib.nvrtcDestroyProgram(ctypes.byref(prog))
            return None, self.lib.nvrtcGetErrorString(rc).decode() + ": " + log.value.decode().strip()
        self.lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
        ptx = ctypes.create_string_buffer(size.value)
        self.lib.nvrtcGetPTX(prog, ptx)
        self.lib.nvrtcDestroyProgram(ctypes.byref(prog))
        return ptx.value.decode(), None


def ptxas(binary, arch, ptx_path):
    if not binary:
        return None
    r = subprocess.run([binary, f"-arch={arch}", ptx_path, "-o", os.devnull],
                       capture_output=True, text=True)
    return None if r.returncode == 0 else (r.stderr or r.stdout).strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dfdx-src", required=True)
    ap.add_argument("--include", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--nvrtc", default="libnvrtc.so.13")
    ap.add_argument("--ptxas", default=shutil.which("ptxas"))
    ap.add_argument("--arch", default="sm_90")
    a = ap.parse_args()

    for what, path in (("--include", os.path.join(a.include, "cuda_fp16.h")),
                       ("--out-dir", os.path.join(a.out_dir, "cuda_utils.cuh"))):
        if not os.path.isfile(path):
            sys.exit(f"error: {what}: {path} does not exist")
    nv = Nvrtc(a.nvrtc)
    print(f"nvrtc {nv.version} ({a.nvrtc}); ptxas {a.ptxas or 'absent: PTX not assembled'}; arch {a.arch}")
    # cudarc 0.9 passes exactly these options for dfdx's CompileOptions (arch, include paths).
    options = [f"--include-path={a.include}", f"--include-path={a.out_dir}", f"--gpu-architecture={a.arch}"]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        sources = kernel_sources(a.dfdx_src)
        if not sources:
            sys.exit(f"error: --dfdx-src {a.dfdx_src}: no NVRTC kernel sources found")
        for i, (file, name, src) in enumerate(sources):
            for j, variant in enumerate(instantiate(src)):
                label = f"{file}:{name}#{j}"
                ptx, err = nv.compile(variant, options)
                if err is None:
                    p = os.path.join(tmp, f"k{i}_{j}.ptx")
                    open(p, "w").write(ptx)
                    err = ptxas(a.ptxas, a.arch, p)
                print(f"nvrtc {'ok  ' if err is None else 'FAIL'} {label}" + (f": {err}" if err else ""))
                failures += err is not None
        built = sorted(glob.glob(os.path.join(a.out_dir, "*.ptx")))
        bad = [(p, e) for p in built if (e := ptxas(a.ptxas, a.arch, p))]
        for p, e in bad:
            print(f"ptxas FAIL {os.path.basename(p)}: {e}")
        print(f"build-time PTX: {len(built) - len(bad)}/{len(built)} assemble for {a.arch}"
              + ("" if a.ptxas else " (not checked: no ptxas)"))
        failures += len(bad)
    print(f"nvrtc-check: {'ok' if failures == 0 else f'{failures} failure(s)'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
