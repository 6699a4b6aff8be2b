#!/usr/bin/env bash
# swerve's model against transformers on random-weight checkpoints of real shapes (Qwen2.5-0.5B,
# tied; its shape untied with 4 layers; a Llama with 3:1 grouped-query attention). Needs a
# Python with torch, transformers and safetensors (PYTHON, default /tmp/refvenv/bin/python:
# `python3 -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install torch transformers safetensors`).
# The checkpoints (2 GB for Qwen2.5-0.5B) go to a temporary folder and are removed.
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${PYTHON:-/tmp/refvenv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build --release --locked -p swerve-trainer --example real_shape
for shape in ${SHAPES:-qwen2.5-0.5b qwen2.5-0.5b-untied llama-gqa}; do
    "$python" trainer/scripts/make_real_shape.py "$work/$shape" --shape "$shape"
    target/release/examples/real_shape "$work/$shape"
    rm -rf "${work:?}/$shape"
done
