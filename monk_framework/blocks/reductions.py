"""Block reductions that estimators share."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .gram_sources import GramSource

__all__ = ["block_trace_variances"]


def block_trace_variances(
    source: GramSource, labels: np.ndarray, n_blocks: int, diag: np.ndarray
) -> np.ndarray:
    """Per-block trace variance of φ: mean_{S_q} k(x, x) − ‖μ_{S_q}‖², made unbiased.

    ``labels`` gives the block of each point of the source's sample (blocks of X and Y
    may be told apart by distinct labels); the factor |S_q|/(|S_q| − 1) removes the
    within-block bias. Its median over blocks is a robust scale (Lepski's radii).
    """
    sizes = np.bincount(labels, minlength=n_blocks).astype(float)
    W = sp.csr_array((1.0 / sizes[labels], (np.arange(len(labels)), labels)), shape=(len(labels), n_blocks))
    M = source.block_gram(W)
    mean_diag = np.bincount(labels, weights=diag, minlength=n_blocks) / sizes
    return np.maximum(mean_diag - np.diag(M), 0.0) * sizes / np.maximum(sizes - 1, 1)
