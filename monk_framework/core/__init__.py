"""The interfaces: what a plugin implements and what every layer above speaks.

Errors, parameter checks, randomness (SPEC 7), validated samples, the memory budget,
the :class:`~monk_framework.core.kernels.Kernel` and estimator interfaces with their
contract checks, results, the hook specifications and the plugin registry. Nothing
here imports from the layers above (numerics, engine, two_sample, app).
"""

# the kernels built from kernels fill Kernel's operators (COMPOSITES): loaded with the interfaces
from monk_framework.core import combinators as combinators
