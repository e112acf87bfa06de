"""Tests of latentcode/pipelines/: a run directory in, codes, reports, tables and the demo out."""
