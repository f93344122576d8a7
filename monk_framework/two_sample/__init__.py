"""Two-sample tests of P = Q with any kernel and any MMD estimator.

* :mod:`~monk_framework.two_sample.permutation`: the permutation test (globally or
  within the blocks of a median-of-means estimator), and what every test shares;
* :mod:`~monk_framework.two_sample.split`: the paper's three-way split test (Algorithm 3);
* :mod:`~monk_framework.two_sample.aggregated`: tests over a collection of kernels
  (MMDAgg and MMD-FUSE), calibrated by the same relabellings, robust with a budget;
* :mod:`~monk_framework.two_sample.robust`: tests whose level holds when up to r points
  are corrupted, with a certificate;
* :mod:`~monk_framework.two_sample.estimation`: ``estimate`` and ``embed`` with the
  same kernel and estimator arguments (objects or specs) as the tests.
"""

from __future__ import annotations

from monk_framework.core.results import TestResult
from monk_framework.core.test_results import AggregatedTestResult, PermutationTestResult, RobustTestResult, SplitTestResult
from monk_framework.two_sample.aggregated import aggregated_test
from monk_framework.two_sample.estimation import embed, estimate
from monk_framework.two_sample.permutation import permutation_test
from monk_framework.two_sample.robust import robust_test
from monk_framework.two_sample.split import split_test

__all__ = [
    "AggregatedTestResult",
    "PermutationTestResult",
    "RobustTestResult",
    "SplitTestResult",
    "TestResult",
    "aggregated_test",
    "embed",
    "estimate",
    "permutation_test",
    "robust_test",
    "split_test",
]
