"""monk_framework: outlier-robust kernel mean embeddings and MMD by median-of-means.

Kernels and estimators are named by spec, or taken from the registry of installed
plugins; every entry point takes either::

    from monk_framework import estimate, get_registry, permutation_test
    estimate(X, Y, rng=0)                        # rbf at the median heuristic, u-stat
    permutation_test(X, Y, kernel="rbf:sigma=1", estimator="monk-bcd:n_blocks=11", rng=0)
    reg = get_registry()
    reg.get_estimator("u-stat").estimate(reg.get_kernel("rbf", sigma=1.0), X, Y, rng=0)
"""

from monk_framework.core.embedding import Embedding, EmbeddingsResult
from monk_framework.core.errors import (
    DataError,
    DataFileError,
    DataWarning,
    DuplicateNameError,
    KernelContractError,
    KernelOverflowError,
    MonkDeprecationWarning,
    MonkError,
    ParameterError,
    PluginError,
    PrecisionWarning,
    ReadWarning,
    ResourceError,
    UnknownNameError,
)
from monk_framework.core.estimators import EmbeddingEstimator, EmbeddingWeights, Estimate, Estimator, MMDEstimator
from monk_framework.core.hookspecs import hookimpl
from monk_framework.core.kernels import Kernel, check_squared_norm
from monk_framework.core.load import load_result
from monk_framework.core.params import parameter
from monk_framework.core.registry import PluginEntry, PluginProblem, Provider, Registry, get_registry
from monk_framework.core.resources import Resources
from monk_framework.core.results import MMDResult, Result, TestResult
from monk_framework.core.samples import as_strings, as_vectors
from monk_framework.core.test_results import AggregatedTestResult, PermutationTestResult, RobustTestResult, SplitTestResult
from monk_framework.core.version import __version__
from monk_framework.io.loading import load_sample
from monk_framework.io.splice import load_splice
from monk_framework.numerics.compiled import set_compiled, using_compiled
from monk_framework.two_sample import aggregated_test, embed, estimate, permutation_test, robust_test, split_test

__all__ = [
    "DataError",
    "DataFileError",
    "DataWarning",
    "DuplicateNameError",
    "AggregatedTestResult",
    "Embedding",
    "EmbeddingsResult",
    "EmbeddingEstimator",
    "EmbeddingWeights",
    "Estimate",
    "Estimator",
    "Kernel",
    "KernelContractError",
    "KernelOverflowError",
    "MMDEstimator",
    "MMDResult",
    "MonkDeprecationWarning",
    "MonkError",
    "ParameterError",
    "PluginEntry",
    "PluginError",
    "PrecisionWarning",
    "ReadWarning",
    "PermutationTestResult",
    "PluginProblem",
    "Provider",
    "Registry",
    "ResourceError",
    "Resources",
    "Result",
    "RobustTestResult",
    "SplitTestResult",
    "TestResult",
    "UnknownNameError",
    "__version__",
    "aggregated_test",
    "as_strings",
    "as_vectors",
    "check_squared_norm",
    "embed",
    "estimate",
    "get_registry",
    "hookimpl",
    "load_result",
    "load_sample",
    "load_splice",
    "parameter",
    "permutation_test",
    "robust_test",
    "set_compiled",
    "split_test",
    "using_compiled",
]
