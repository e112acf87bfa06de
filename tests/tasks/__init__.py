"""Tests of latentcode/tasks/, against independent checkers written from the paper."""
