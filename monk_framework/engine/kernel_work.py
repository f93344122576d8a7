"""The engine's side of the core's kernel methods (:class:`~monk_framework.core.protocols.KernelWork`).

``Kernel.gram``, ``Kernel.features`` and an embedding's norm, inner products and witness
values are the core's methods, but how their kernel values are cut in bands and tiles,
and what memory they may take, is the engine's policy: this module answers for them and
installs itself on import (``import monk_framework`` imports it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs
import numpy as np

from monk_framework.core.protocols import BandRunner, install_kernel_work
from monk_framework.core.resources import Resources, check_memory
from monk_framework.core.samples import Sample
from monk_framework.engine.gram_bands import rectangular_in_bands, symmetric_in_bands
from monk_framework.engine.kernel_sums import bilinear, weighted_gram

if TYPE_CHECKING:
    from monk_framework.core.kernels import Kernel

__all__ = ["ENGINE_KERNEL_WORK", "EngineKernelWork"]


@attrs.frozen
class EngineKernelWork:
    """:class:`~monk_framework.core.protocols.KernelWork` by the functions of
    :mod:`~monk_framework.engine.gram_bands` and :mod:`~monk_framework.engine.kernel_sums`."""

    def symmetric_gram(self, kernel: Kernel, X: Sample, run_bands: BandRunner | None) -> np.ndarray:
        return symmetric_in_bands(kernel, X, run_bands=run_bands)

    def rectangular_gram(self, kernel: Kernel, X: Sample, Y: Sample, run_bands: BandRunner | None) -> np.ndarray:
        return rectangular_in_bands(kernel, X, Y, run_bands=run_bands)

    def check_feature_matrix(self, kernel: Kernel, n: int, count: int) -> None:
        check_memory(n, count, what="feature matrix")

    def weighted_gram(self, kernel: Kernel, A: Sample, B: Sample, v: np.ndarray, resources: Resources, report: Callable[[float], None] | None) -> np.ndarray:
        return weighted_gram(kernel, A, B, v, resources=resources, report=report)

    def bilinear(
        self,
        kernel: Kernel,
        A: Sample,
        B: Sample | None,
        u: np.ndarray,
        v: np.ndarray,
        resources: Resources,
        report: Callable[[float], None] | None,
    ) -> float:
        return bilinear(kernel, A, B, u, v, resources=resources, report=report)


#: the engine's kernel work, installed for the core on import
ENGINE_KERNEL_WORK = EngineKernelWork()
install_kernel_work(ENGINE_KERNEL_WORK)
