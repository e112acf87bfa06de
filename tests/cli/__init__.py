"""Tests of latentcode/cli/: the `latentcode` command, its errors and bad input."""
