"""Checks on the whole project: docs, packaging, the import graph, file sizes, notebooks, parity with the
authors' code, and a new task run end to end."""
