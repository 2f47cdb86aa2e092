"""Compiled Cython kernels (private): import them through kafkastore._kernels."""
