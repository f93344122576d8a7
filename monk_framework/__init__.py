"""monk_framework: outlier-robust kernel mean embeddings and MMD by median-of-means.

Scripts start from the registry of installed plugins::

    from monk_framework import get_registry
    reg = get_registry()
    kernel = reg.get_kernel("rbf", sigma=1.0)
    result = reg.get_estimator("u-stat").estimate(kernel, X, Y, rng=0)
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .data import as_strings, as_vectors, load_sample
from .errors import (
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
from .estimators import EmbeddingEstimator, EmbeddingWeights, Estimate, Estimator, MMDEstimator
from .hookspecs import hookimpl
from .kernels import Kernel, check_squared_norm
from .params import parameter
from .registry import PluginEntry, PluginProblem, Provider, Registry, get_registry
from .results import Embedding, MMDResult, Result
from .splice import load_splice

try:
    __version__ = version("monk-framework")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

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
]


def __getattr__(name: str) -> object:
    # load_result knows every result class, tests included: loaded on first use, so that
    # importing the package stays light
    if name == "load_result":
        from .jobs import load_result

        return load_result
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
