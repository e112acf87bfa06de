"""Tests of latentcode/rundir/: the run directory on disk, checkpoints and shipped runs."""
