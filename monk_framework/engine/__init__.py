"""The compute engine, asked for mathematics only.

Statistics and plugins ask it for Gram matrices and their reductions (kernel sums,
block Gram matrices WᵀKW, the quadratic forms of a batch of relabellings); it alone
decides stored or tiled, threads or Dask workers, within the memory budget of
:mod:`monk_framework.core.resources`.

* :mod:`~monk_framework.engine.backends`: where tasks run (here, threads, Dask);
* :mod:`~monk_framework.engine.kernel_values`: the one entrance for kernel values, and
  bands on the cores;
* :mod:`~monk_framework.engine.gram_bands`, :mod:`~monk_framework.engine.kernel_sums`:
  whole Gram matrices in bands, sums over features and tiles, which also answer the
  core's ``Kernel.gram`` and an embedding's sums (:mod:`~monk_framework.engine.kernel_work`);
* :mod:`~monk_framework.engine.median_heuristic`: the median pairwise distance;
* :mod:`~monk_framework.engine.partitions`, :mod:`~monk_framework.engine.lepski`:
  blocks, the median convention and Lepski's choice of Q;
* :mod:`~monk_framework.engine.gram_sources`, :mod:`~monk_framework.engine.reductions`,
  :mod:`~monk_framework.engine.spread`: Gram sources (stored, matrix-free, on workers)
  and their reductions;
* :mod:`~monk_framework.engine.pooled`, :mod:`~monk_framework.engine.within_blocks`:
  the pooled sample of a test and the within-block statistics;
* :mod:`~monk_framework.engine.relabelling`: a test's relabellings and the statistics
  on them (:func:`~monk_framework.engine.relabelling.relabelled_statistics`), drawn
  ahead, in batches here or on a backend's workers.
"""

from monk_framework.core.protocols import install_kernel_work
from monk_framework.engine import kernel_work as kernel_work

# the engine answers the core's kernel methods (Kernel.gram, an embedding's sums) from import on
install_kernel_work(kernel_work)
