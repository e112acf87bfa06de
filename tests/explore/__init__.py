"""Tests of latentcode/explore/: instance pictures and the explorer page."""
