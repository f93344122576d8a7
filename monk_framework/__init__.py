"""monk_framework: outlier-robust kernel mean embeddings and MMD by median-of-means.

Scripts start from the registry of installed plugins::

    from monk_framework import get_registry
    reg = get_registry()
    kernel = reg.get_kernel("rbf", sigma=1.0)
    result = reg.get_estimator("u-stat").estimate(kernel, X, Y, rng=0)
"""

from monk_framework.app.jobs import load_result
from monk_framework.app.loading import load_sample
from monk_framework.app.splice import load_splice
from monk_framework.core.errors import (
    DataError,
    DataFileError,
    DuplicateNameError,
    KernelContractError,
    KernelOverflowError,
    MonkError,
    ParameterError,
    PluginError,
    ResourceError,
    UnknownNameError,
)
from monk_framework.core.estimators import EmbeddingEstimator, EmbeddingWeights, Estimate, Estimator, MMDEstimator
from monk_framework.core.hookspecs import hookimpl
from monk_framework.core.kernels import Kernel, check_squared_norm
from monk_framework.core.params import parameter
from monk_framework.core.registry import PluginEntry, PluginProblem, Provider, Registry, get_registry
from monk_framework.core.resources import Resources
from monk_framework.core.results import Embedding, MMDResult, Result
from monk_framework.core.samples import as_strings, as_vectors
from monk_framework.core.version import __version__
from monk_framework.numerics.compiled import set_compiled, using_compiled

__all__ = [
    "DataError",
    "DataFileError",
    "DuplicateNameError",
    "Embedding",
    "EmbeddingEstimator",
    "EmbeddingWeights",
    "Estimate",
    "Estimator",
    "Kernel",
    "KernelContractError",
    "KernelOverflowError",
    "MMDEstimator",
    "MMDResult",
    "MonkError",
    "ParameterError",
    "PluginEntry",
    "PluginError",
    "PluginProblem",
    "Provider",
    "Registry",
    "ResourceError",
    "Resources",
    "Result",
    "UnknownNameError",
    "__version__",
    "as_strings",
    "as_vectors",
    "check_squared_norm",
    "get_registry",
    "hookimpl",
    "load_result",
    "load_sample",
    "load_splice",
    "parameter",
    "set_compiled",
    "using_compiled",
]

