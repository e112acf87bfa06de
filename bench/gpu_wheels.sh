#!/usr/bin/env bash
# Build wheels/ (git-ignored): the pure-Python packages latentcode needs that the GPU machine lacks.
#
# The device machine (docs/gpu.md) has Python 3.12, torch, transformers, numpy, pandas, pyarrow, einops,
# jaxtyping, safetensors, scikit-learn, matplotlib, pyyaml and tqdm, but no transformer-lens and some of its
# small dependencies, and it cannot reach a registry. `import transformer_lens` also imports `datasets`, which
# imports dill and multiprocess. The versions are those of this repository's tested environment; every file is a
# py3 (or py312) wheel, so it serves Python 3.12. ml-collections is for the authors' JAX code that call 1 times
# (ref/, docs/gpu.md); the machine has its other packages (jax, flax, optax, chex, absl-py). Not included: wandb (a large binary wheel that importing
# transformer_lens or latentcode never touches), umap-learn, plotly and submitit (analysis and clusters only).
#
# usage: bash bench/gpu_wheels.sh            (PYTHON=... to use another interpreter's pip)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
WHEELS=(
  transformer-lens==4.3.0
  datasets==5.2.0
  dill==0.4.1
  multiprocess==0.70.19
  fancy-einsum==0.0.3
  better-abc==0.0.3
  typeguard==4.6.0
  beartype==0.23.1
  ml-collections==1.1.0
)
rm -rf wheels
mkdir wheels
"$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation py \
  --abi none --platform any -d wheels "${WHEELS[@]}" 2>/dev/null \
  || "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 -d wheels "${WHEELS[@]}"
ls -l wheels
du -sh wheels
total=$(du -sb wheels | cut -f1)
if [ "$total" -gt $((40 * 1024 * 1024)) ]; then
  echo "wheels/ is $total bytes, over the 40 MiB budget (the tree that travels is at most 64 MiB)" >&2
  exit 1
fi
for f in wheels/*.whl; do
  case "$f" in
    *-none-any.whl) ;;
    *) echo "$f is not a pure-Python wheel" >&2; exit 1 ;;
  esac
done
