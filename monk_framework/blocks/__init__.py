"""Median-of-means machinery, one module per concept:

* :mod:`~monk_framework.blocks.partitions`: partitions into blocks and the median
  convention;
* :mod:`~monk_framework.blocks.gram_sources`: Gram sources (stored, matrix-free,
  permuted) and their block reductions;
* :mod:`~monk_framework.blocks.reductions`: block reductions estimators share;
* :mod:`~monk_framework.blocks.lepski`: the choice of Q (Lepski's method).

Every public name is offered here too (``from monk_framework.blocks import Partition``).
"""

from __future__ import annotations

from .gram_sources import GramSource, IndicatorColumns, MatrixFreeGram, PermutedGram, StoredGram, dense_columns, gram_source, one_row
from .lepski import LEPSKI_CONSTANT, LepskiChoice, choose_n_blocks, geometric_grid, lepski
from .partitions import (
    Partition,
    block_sizes,
    blocks_min_sample_size,
    check_n_blocks,
    majority,
    median_block,
    median_position,
    median_value,
    pair_partition,
    random_partition,
    take,
)
from .reductions import KernelSums, bilinear, block_trace_variances, kernel_sums, weighted_gram

__all__ = [
    "GramSource",
    "IndicatorColumns",
    "KernelSums",
    "LEPSKI_CONSTANT",
    "LepskiChoice",
    "MatrixFreeGram",
    "Partition",
    "PermutedGram",
    "StoredGram",
    "bilinear",
    "block_sizes",
    "block_trace_variances",
    "blocks_min_sample_size",
    "check_n_blocks",
    "choose_n_blocks",
    "dense_columns",
    "geometric_grid",
    "gram_source",
    "kernel_sums",
    "lepski",
    "majority",
    "median_block",
    "median_position",
    "median_value",
    "one_row",
    "pair_partition",
    "random_partition",
    "take",
    "weighted_gram",
]
