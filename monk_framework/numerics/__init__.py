"""Numerics on arrays: distances, order statistics and the compiled loops, each with
a plain numpy reference. No threads, no memory policy, no kernels."""
