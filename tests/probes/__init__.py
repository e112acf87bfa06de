"""Tests of probes/: what the codes say, on synthetic codes with planted structure."""
