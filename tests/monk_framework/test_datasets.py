"""Built-in data sets: reproducible draws, the paper's outliers, true MMD values."""

from __future__ import annotations

import numpy as np
import pytest

from monk_framework import ParameterError, UnknownNameError, get_registry
from monk_framework.datasets import DATASETS, get_dataset


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_same_seed_same_samples(name):
    data = get_dataset(name, n=50, m=30, d=2)
    X1, Y1 = data.sample(4)
    X2, Y2 = data.sample(4)
    assert X1.shape == (50, 2) and Y1.shape == (30, 2)
    assert np.array_equal(X1, X2) and np.array_equal(Y1, Y2)
    assert not np.array_equal(X1, data.sample(5)[0])


def test_default_gauss_parameters_are_the_documented_draw():
    params = get_dataset("gauss").params()
    drawn = np.round(np.random.default_rng(2019).uniform(size=4), 4)
    assert [params[k] for k in ("mean_x", "std_x", "mean_y", "std_y")] == list(drawn)


def test_outliers_replace_the_last_points():
    clean_X, clean_Y = get_dataset("gauss", n=20).sample(1)
    X, Y = get_dataset("gauss-outliers", n=20).sample(1)
    assert np.array_equal(X[:15], clean_X[:15]) and np.all(X[15:] == 2000) and np.all(Y[15:] == 4000)
    assert np.array_equal(Y[:15], clean_Y[:15])
    with pytest.raises(ParameterError, match="'n_outliers' parameter .* at most the smaller sample size 3"):
        get_dataset("gauss-outliers", n=3)


def test_pareto_is_classical_pareto():
    X, _ = get_dataset("pareto", n=100_000).sample(0)
    assert X.min() >= 1.0
    # P(X > t) = t^-3 for classical Pareto(3)
    assert np.mean(X > 2.0) == pytest.approx(2.0**-3, abs=0.005)
    assert get_dataset("pareto").true_mmd(get_registry().get_kernel("quadratic")) == 0.0


def test_true_mmd_of_outlier_setting_is_the_clean_one():
    kernel = get_registry().get_kernel("rbf")
    assert get_dataset("gauss-outliers").true_mmd(kernel) == get_dataset("gauss").true_mmd(kernel) > 0


def test_unknown_dataset_and_parameter():
    with pytest.raises(UnknownNameError, match="Did you mean 'gauss'"):
        get_dataset("gaus")
    with pytest.raises(UnknownNameError, match="Did you mean 'shape'"):
        get_dataset("pareto", shap=2)
