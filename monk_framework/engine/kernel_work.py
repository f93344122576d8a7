"""The engine's side of the core's kernel methods: this module is the
:class:`~monk_framework.core.protocols.KernelWork` the engine installs on import.

``Kernel.gram``, ``Kernel.features`` and an embedding's norm, inner products and witness
values are the core's methods, but how their kernel values are cut in bands and tiles,
and what memory they may take, is the engine's policy: the functions here answer for
them (:mod:`~monk_framework.engine.gram_bands`, :mod:`~monk_framework.engine.kernel_sums`).
"""

from __future__ import annotations

from monk_framework.core.resources import check_memory
from monk_framework.engine.gram_bands import rectangular_in_bands as rectangular_gram
from monk_framework.engine.gram_bands import symmetric_in_bands as symmetric_gram
from monk_framework.engine.kernel_sums import bilinear, weighted_gram

__all__ = ["bilinear", "check_feature_matrix", "rectangular_gram", "symmetric_gram", "weighted_gram"]


def check_feature_matrix(n: int, count: int) -> None:
    """Refuse an n × ``count`` float64 feature matrix that memory cannot hold."""
    check_memory(n, count, what="feature matrix")
