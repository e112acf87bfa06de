"""Tests of latentcode/model/ and config.py: attention, the Transformer and its hooks, the hypernetwork."""
