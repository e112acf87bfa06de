#!/usr/bin/env bash
# Conditional, MDL and baseline probes on every shipped checkpoint: results/probing/<checkpoint>/ (docs/probing-controls.md).
# Run from the repository root: bash sweeps/probing.sh [NAME ...]  (default: all twelve shipped checkpoints)
set -euo pipefail
PY=${PYTHON:-python}
runs=("$@")
if [ ${#runs[@]} -eq 0 ]; then
  runs=(sraven-softmax sraven-linear sraven-hyla)
  for v in softmax linear hyla; do runs+=("fuzzy_logic-$v" "fuzzy_logic-$v-s1" "fuzzy_logic-$v-s2"); done
fi
for name in "${runs[@]}"; do
  if [[ $name =~ ^(.*)-s([0-9]+)$ ]]; then base=${BASH_REMATCH[1]}; seed=(--seed "${BASH_REMATCH[2]}"); else base=$name; seed=(); fi
  nice -n 10 "$PY" -m latentcode.pipelines.probe_suite "$base" "${seed[@]}" --out "results/probing/$name" \
    --n-samples 2048 --no-progress
done
