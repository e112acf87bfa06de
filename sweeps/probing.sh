#!/usr/bin/env bash
# Conditional, MDL and baseline probes on every shipped checkpoint: results/probing/<checkpoint>/ (docs/probing-controls.md).
# Run from the repository root: bash sweeps/probing.sh [--mdl-only] [NAME ...]  (default: all twelve shipped checkpoints;
# --mdl-only reruns MDL alone on the train split and rewrites mdl.csv/.json, keeping the other files)
set -euo pipefail
PY=${PYTHON:-python}
extra=()
if [ "${1:-}" = "--mdl-only" ]; then extra=(--mdl-only); shift; fi
runs=("$@")
if [ ${#runs[@]} -eq 0 ]; then
  runs=(sraven-softmax sraven-linear sraven-hyla)
  for v in softmax linear hyla; do runs+=("fuzzy_logic-$v" "fuzzy_logic-$v-s1" "fuzzy_logic-$v-s2"); done
fi
for name in "${runs[@]}"; do
  if [[ $name =~ ^(.*)-s([0-9]+)$ ]]; then base=${BASH_REMATCH[1]}; seed=(--seed "${BASH_REMATCH[2]}"); else base=$name; seed=(); fi
  nice -n 10 "$PY" -m latentcode.pipelines.probe_suite "$base" "${seed[@]}" --out "results/probing/$name" \
    --n-samples 2048 --no-progress "${extra[@]}"
done
