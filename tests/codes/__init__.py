"""Tests of latentcode/codes/: latent codes read out of a model."""
