"""Pure-Python twins of the compiled kernels (private): the fallback and the test oracle."""
