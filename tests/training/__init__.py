"""Tests of latentcode/training/: building configs, the training loop, ensembles, DDP, sweeps."""
