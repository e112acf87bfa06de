#!/usr/bin/env bash
# CPU rehearsal of the GPU loop (docs/gpu.md), with a budget of seconds instead of minutes.
#
# Builds an interpreter that lacks what the GPU machine lacks (this venv's packages minus transformer-lens and the
# packages bench/gpu_wheels.sh carries), then, like the device tool, copies the working tree to a fresh folder for
# every call, with wheels/ and the archives of the previous call in gpu_carry/, and runs bench/gpu_runbook.sh there
# with OUT set, until every run of a tiny two-variant, two-seed grid has finished. Call 1 is the GPU's call 1 with
# tiny budgets on the CPU: the CUDA tests (skipped here), the benchmark table (--device cpu, tiny preset, two
# variants), the reference timing when ref/ holds a checkout, and training through the graph-ready step
# (cuda_graph); later calls continue the runs. Last, it trains the same grid straight through, in the step form
# call 1 used, and checks that the weights are bitwise equal.
#
# usage: bash bench/gpu_rehearse.sh [WORK_DIR]      (needs wheels/: bash bench/gpu_wheels.sh)
#   PYTHON=/path/to/venv/bin/python picks the interpreter whose packages the rehearsal borrows (default: .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
WORK=${1:-$(mktemp -d /tmp/gpu-rehearsal.XXXX)}
mkdir -p "$WORK"
ls wheels/*.whl >/dev/null || { echo "no wheels/: run bash bench/gpu_wheels.sh first" >&2; exit 1; }

# 1. the GPU machine's situation: no transformer-lens, datasets, dill, multiprocess, ... and no latentcode install
PYTHON=${PYTHON:-.venv/bin/python}
BASE=$("$PYTHON" -c "import sys; print(sys._base_executable)")
"$BASE" -m venv "$WORK/env"
FROM=$("$PYTHON" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
TO=$("$WORK/env/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
for entry in "$FROM"/*; do
  name=$(basename "$entry")
  case "${name,,}" in
    transformer_lens*|datasets*|dill*|multiprocess*|_multiprocess*|fancy_einsum*|better_abc*|typeguard*) continue ;;
    beartype*|wandb*|pip|pip-*|setuptools*|_distutils_hack|distutils-precedence.pth) continue ;;
    *latentcode*|__editable__*|easy-install.pth) continue ;;
  esac
  [ -e "$TO/$name" ] || ln -s "$entry" "$TO/$name"
done
if "$WORK/env/bin/python" -c "import transformer_lens" 2>/dev/null; then
  echo "the rehearsal interpreter still imports transformer_lens" >&2; exit 1
fi

# 2. a tiny grid: 2 ensembles of 2 seeds, more steps than one call of a few seconds trains
GRID_TEXT='task: sraven
preset: tiny
out: gpu_runs/rehearsal
variants: [softmax, hyla]
seeds: [0, 1]
model: {attn_dropout: 0.1}
train: {steps: 120, warmup: 5, checkpoint_every: 25, eval_every: 25, log_every: 5}'

call() {  # a fresh copy of the tree, plus the carried paths, like the device tool
  local n=$1; shift
  local tree=$WORK/tree$n
  rm -rf "$tree" && mkdir -p "$tree"
  (cd "$REPO" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$tree" 2>/dev/null || true)
  rm -f "$tree/runs"
  cp -r "$REPO/wheels" "$tree/wheels"
  printf '%s\n' "$GRID_TEXT" >"$tree/sweeps/rehearsal.yaml"
  mkdir -p "$tree/gpu_carry"
  if [ "$n" -gt 1 ] && ls "$WORK/out$((n - 1))"/runs-*.tar.gz* >/dev/null 2>&1; then
    cp "$WORK/out$((n - 1))"/runs-*.tar.gz* "$tree/gpu_carry/"
  fi
  (cd "$tree" && OUT=$WORK/out$n bash bench/gpu_runbook.sh --grid sweeps/rehearsal.yaml --jobs 2 --threads 1 \
    --python "$WORK/env/bin/python" --pip-args "--python-version 3.12" "$@")
}

call 1 --gpu-tests --bench --bench-args "--device cpu --preset tiny --variants softmax --members 1 2 --warmup 1 \
  --window 0.2 --chunk 1 --budget 30" --graph on --budget 110 --reserve 5
[ -s "$WORK/out1/bench_table.csv" ] || { echo "call 1 wrote no benchmark table" >&2; exit 1; }
n=1
while grep -q -E "stopped|pending|planned" "$WORK/out$n/runbook.log" && [ "$n" -lt 8 ]; do
  n=$((n + 1))
  call "$n" --graph on --budget 150 --reserve 5
done
echo "== rehearsal: $n calls"
grep -q "cuda_graph on" "$WORK"/out*/runbook.log || { echo "no call trained through the graph-ready step" >&2; exit 1; }

# 3. the same grid straight through, in one process per ensemble, must give the same weights bit for bit
mkdir -p "$WORK/final" && "$WORK/env/bin/python" "$REPO/bench/gpu_pack.py" unpack "$WORK/out$n" "$WORK/final"
"$WORK/env/bin/python" -m pip install -q --no-index --no-deps --python-version 3.12 --target "$WORK/site" wheels/*.whl
(cd "$WORK/tree$n" && PYTHONPATH="$WORK/site:$PWD" OMP_NUM_THREADS=1 \
  "$WORK/env/bin/python" - "$WORK" <<'PY'
import sys
from pathlib import Path

import torch
import yaml

from latentcode.rundir.checkpoint import load_run
from latentcode.training.sweep import expand_grid, group_points, load_grid, train_group

work = Path(sys.argv[1])
torch.set_num_threads(1)
data = yaml.safe_load(Path("sweeps/rehearsal.yaml").read_text())
data["train"]["cuda_graph"] = True  # the step form the calls trained with
(work / "rehearsal-graphed.yaml").write_text(yaml.safe_dump(data))
grid = load_grid(work / "rehearsal-graphed.yaml")
straight_root = work / "straight"
for group in group_points(expand_grid(grid)):
    points = [type(p).from_dict({**p.to_dict(), "run_dir": str(straight_root / p.name)}) for p in group]
    train_group(points)
for point in expand_grid(grid):
    chunked = load_run(work / "final" / "rehearsal" / point.name)
    straight = load_run(straight_root / point.name)
    assert chunked.finished and chunked.step == straight.step, point.name
    same = all(torch.equal(a, b) for a, b in zip(chunked.model.state_dict().values(),
                                                   straight.model.state_dict().values(), strict=True))
    assert same, f"{point.name}: chunked weights differ from the straight run"
    print(f"{point.name}: step {chunked.step}, weights bitwise equal to the straight run, "
          f"ood acc {chunked.eval_metrics('ood')['acc']:.3f}")
PY
)
echo "== rehearsal passed ($WORK)"
