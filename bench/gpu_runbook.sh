#!/usr/bin/env bash
# One call of the GPU machine (docs/gpu.md): install the carried wheels, unpack the run directories carried in,
# optionally run the CUDA tests, the benchmark table (bench/gpu_bench_table.py) and the reference timing of the
# authors' JAX code (when a checkout is carried in ref/), then train the grid's unfinished runs as ensembles, in the
# step form the table found fastest, until the call's budget is nearly spent (each process checkpoints and exits
# cleanly at its time limit), then pack every run directory, optimizer state included, into archives of at most
# 15.5 MiB in $OUT. Running it again with the archives carried back in continues every run exactly where it stopped.
#
# usage (repository root): bash bench/gpu_runbook.sh [options]
#   --grid FILE        sweep grid (default: sweeps/gpu_sraven_core.yaml; its `out` must lie under --runs)
#   --jobs K           ensemble processes at a time on the one GPU (default: 3)
#   --smoke            run bench/gpu_smoke.py first (<= 2 minutes on the GPU)
#   --smoke-only       run the smoke test and stop
#   --gpu-tests        first run the tests marked gpu of the ensemble and the graph-ready step (under a minute)
#   --bench            run bench/gpu_bench_table.py (about 2.5 minutes on the GPU) and train in its fastest form
#   --bench-args "..." extra arguments of the benchmark (the CPU rehearsal passes --device cpu --preset tiny ...)
#   --graph MODE       step form of the training: auto (the benchmark's fastest, else eager), on (cuda_graph) or off
#   --ref DIR          time the authors' JAX step if DIR holds ref_bench_harness.py and a checkout hyla-ref/
#                      (default: ref; skipped when absent)
#   --ref-steps N      timed steps of each reference configuration (default: 200)
#   --smoke-args "..." extra arguments of the smoke test (the CPU rehearsal passes --device cpu --steps 4 ...)
#   --budget SECONDS   wall clock of the whole call, packing included (default: 540, i.e. 9 minutes)
#   --reserve SECONDS  what is kept back for stopping and packing (default: 60)
#   --threads N        torch CPU threads per process (default: the cores shared among the jobs)
#   --carry DIR        archives of earlier calls to resume from (default: gpu_carry)
#   --from DIR         also resume the grid's runs from DIR/<run>/ where further on (e.g. checkpoints/in-progress, the
#                      CPU campaign's stash, which travels with the tree)
#   --solo             one process per run (`--jobs` at a time), not ensembles: for runs at different steps
#   --runs DIR         where run directories live during the call (default: gpu_runs)
#   --wheels DIR       wheels to install (default: wheels; skipped if absent)
#   --python PY        interpreter (default: python3, the one with torch on the GPU machine)
#   --pip-args "..."   extra arguments of the wheel install (the rehearsal on Python 3.11 passes --python-version 3.12)
# Files written to $OUT (default: gpu_out): runbook.log (the benchmark's markdown table too), bench_table.csv (with --bench),
# reference.jsonl (with a reference checkout), smoke.json (with --smoke), logs.tar.gz, runs-N.tar.gz[.partK]
# (at most 8 files in all).
set -euo pipefail

GRID=sweeps/gpu_sraven_core.yaml JOBS=3 SMOKE=0 SMOKE_ONLY=0 SMOKE_ARGS="" BUDGET=540 RESERVE=60 THREADS="" TESTS=0
BENCH=0 BENCH_ARGS="" GRAPH=auto REF=ref REF_STEPS=200 FROM="" ENSEMBLE=--ensemble
CARRY=gpu_carry RUNS=gpu_runs WHEELS=wheels PY=python3 PIP_ARGS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --grid) GRID=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --smoke) SMOKE=1; shift ;;
    --smoke-only) SMOKE=1; SMOKE_ONLY=1; shift ;;
    --smoke-args) SMOKE_ARGS=$2; shift 2 ;;
    --gpu-tests) TESTS=1; shift ;;
    --bench) BENCH=1; shift ;;
    --bench-args) BENCH_ARGS=$2; shift 2 ;;
    --graph) GRAPH=$2; shift 2 ;;
    --ref) REF=$2; shift 2 ;;
    --ref-steps) REF_STEPS=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --reserve) RESERVE=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --carry) CARRY=$2; shift 2 ;;
    --from) FROM=$2; shift 2 ;;
    --solo) ENSEMBLE=""; shift ;;
    --runs) RUNS=$2; shift 2 ;;
    --wheels) WHEELS=$2; shift 2 ;;
    --python) PY=$2; shift 2 ;;
    --pip-args) PIP_ARGS=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_runbook: unknown option $1 (see bash $0 --help)" >&2; exit 2 ;;
  esac
done
case "$GRAPH" in auto|on|off) ;; *) echo "gpu_runbook: --graph must be auto, on or off (got $GRAPH)" >&2; exit 2 ;; esac
START=$(date +%s)
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/runbook.log") 2>&1
export PYTHONUNBUFFERED=1
elapsed() { echo $(( $(date +%s) - START )); }
echo "== gpu_runbook $(date -u +%FT%TZ) grid=$GRID jobs=$JOBS budget=${BUDGET}s"
command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "(no nvidia-smi)"

# 1. the packages the machine lacks (bench/gpu_wheels.sh built them here)
SITE=$(mktemp -d /tmp/latentcode-site.XXXX)
SCRATCH=$(mktemp -d /tmp/latentcode-call.XXXX)  # the benchmark's choice, the reference's JSON, the graphed grid
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  # shellcheck disable=SC2086  # PIP_ARGS holds several arguments
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" $PIP_ARGS "$WHEELS"/*.whl
fi
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c "import sys, torch, transformer_lens, latentcode; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'latentcode', latentcode.__version__)"

# 2. the run directories of earlier calls
if ls "$CARRY"/runs-*.tar.gz* >/dev/null 2>&1; then
  "$PY" bench/gpu_pack.py unpack "$CARRY" "$RUNS"
fi
if [ -n "$FROM" ]; then
  "$PY" bench/gpu_pack.py seed "$GRID" "$FROM"
fi

# 3. GPU tests and smoke test
if [ "$TESTS" = 1 ]; then
  # the repository's addopts name plugins (nbmake) the machine lacks; the gpu tests need none of them
  timeout 90 "$PY" -m pytest -o addopts="" -p no:cacheprovider -q \
    tests/training/test_ensemble.py tests/training/test_graph_step.py -k "replayed or cuda" || status_tests=$?
  echo "== gpu tests done at $(elapsed) s (exit status ${status_tests:-0})"
fi
if [ "$BENCH" = 1 ]; then
  # shellcheck disable=SC2086  # BENCH_ARGS holds several arguments
  "$PY" bench/gpu_bench_table.py --csv "$OUT/bench_table.csv" --fastest "$SCRATCH/fastest.json" $BENCH_ARGS || echo "== benchmark table failed (exit status $?)"
  echo "== benchmark table done at $(elapsed) s"
fi
if [ -f "$REF/ref_bench_harness.py" ] && [ -d "$REF/hyla-ref" ]; then
  # the authors' jitted train step on the paper's SRAVEN model; their code stays in the git-ignored $REF
  for mixer in softmax_attention linear_attention linear_hypatt; do
    HYLA_REF="$REF/hyla-ref" timeout 60 "$PY" "$REF/ref_bench_harness.py" run --task raven --mixer "$mixer" \
      --steps "$REF_STEPS" --warmup 10 --eval-steps 5 --json-out "$SCRATCH/ref_$mixer.json" \
      && "$PY" -c "import json, sys; print(json.dumps(json.load(open(sys.argv[1]))))" "$SCRATCH/ref_$mixer.json" \
      >>"$OUT/reference.jsonl" || echo "== reference $mixer failed (exit status $?)"
  done
  echo "== reference timing done at $(elapsed) s"
else
  echo "== no reference checkout in $REF/ (ref_bench_harness.py and hyla-ref/); reference timing skipped"
fi
if [ "$SMOKE" = 1 ]; then
  # shellcheck disable=SC2086  # SMOKE_ARGS holds several arguments
  "$PY" bench/gpu_smoke.py --json "$OUT/smoke.json" $SMOKE_ARGS
  echo "== smoke test done at $(elapsed) s"
fi

# 4. a chunk of training, stopped by the time limit with a checkpoint
status=0
if [ "$SMOKE_ONLY" = 0 ]; then
  LEFT=$(( BUDGET - $(elapsed) - RESERVE ))
  if [ "$LEFT" -gt 5 ]; then
    if [ "$GRAPH" = auto ]; then
      GRAPH=$("$PY" -c "import json, sys; print('on' if json.load(open(sys.argv[1]))['cuda_graph'] else 'off')" \
        "$SCRATCH/fastest.json" 2>/dev/null || echo off)
    fi
    if [ "$GRAPH" = on ]; then  # the same grid, trained through the graph-ready step
      "$PY" -c "import sys, yaml; g = yaml.safe_load(open(sys.argv[1])); g.setdefault('train', {})['cuda_graph'] = True
yaml.safe_dump(g, open(sys.argv[2], 'w'))" "$GRID" "$SCRATCH/grid-graphed.yaml"
      GRID=$SCRATCH/grid-graphed.yaml
    fi
    echo "== training for at most ${LEFT} s (cuda_graph $GRAPH)"
    # shellcheck disable=SC2086  # ENSEMBLE is --ensemble or nothing
    "$PY" -m latentcode sweep "$GRID" $ENSEMBLE --jobs "$JOBS" --time-limit "$LEFT" \
      ${THREADS:+--threads "$THREADS"} || status=$?
  else
    echo "== no time left to train (${LEFT} s)"
    "$PY" -m latentcode -q sweep "$GRID" --dry-run || true
  fi
fi

# 5. everything back: logs and every run directory (weights, optimizer state, metrics)
if [ -d "$RUNS" ]; then
  find "$RUNS" -path '*/logs/*' -type f -print0 | tar -czf "$OUT/logs.tar.gz" --null -T -
  n_other=$(find "$OUT" -maxdepth 1 -type f | wc -l)
  "$PY" bench/gpu_pack.py pack "$RUNS" "$OUT" --max-files $(( 8 - n_other )) || status=$?
fi
echo "== done at $(elapsed) s (exit status $status); files in $OUT:"
ls -l "$OUT"
exit "$status"
