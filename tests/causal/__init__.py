"""Tests of latentcode/causal/: interventions, experiments, alignment search and erasure."""
