"""Built-in data sets: reproducible draws, the paper's outliers, true MMD values."""

from __future__ import annotations

import numpy as np
import pytest

from monk_framework import ParameterError, UnknownNameError, get_registry
from monk_framework.app.datasets import DATASETS, get_dataset


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_same_seed_same_samples(name):
    vector = DATASETS[name].input_kind == "vector"
    data = get_dataset(name, n=50, m=30, **({"d": 2} if vector else {}))
    X1, Y1 = data.sample(4)
    X2, Y2 = data.sample(4)
    assert len(X1) == 50 and len(Y1) == 30
    if vector:
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
    kernel = get_registry().get_kernel("rbf", sigma=1.0)
    assert get_dataset("gauss-outliers").true_mmd(kernel) == get_dataset("gauss").true_mmd(kernel) > 0


def test_unknown_dataset_and_parameter():
    with pytest.raises(UnknownNameError, match="Did you mean 'gauss'"):
        get_dataset("gaus")
    with pytest.raises(UnknownNameError, match="Did you mean 'shape'"):
        get_dataset("pareto", shap=2)


def test_splice_loader_counts_and_checksum():
    from monk_framework import load_splice
    from monk_framework.io.splice import SPLICE_COUNTS

    everything = load_splice(("EI", "IE", "N"), drop_ambiguous=False)
    assert {c: len(v) for c, v in everything.items()} == SPLICE_COUNTS["all"] == {"EI": 767, "IE": 768, "N": 1655}
    clean = load_splice(("EI", "IE", "N"))
    assert {c: len(v) for c, v in clean.items()} == SPLICE_COUNTS["unambiguous"] == {"EI": 762, "IE": 765, "N": 1648}
    assert all(len(s) == 60 and set(s) <= set("ACGT") for v in clean.values() for s in v)
    ambiguous = [s for v in everything.values() for s in v if not set(s) <= set("ACGT")]
    assert len(ambiguous) == 15
    letters = "".join(sorted({c for s in ambiguous for c in s} - set("ACGT")))
    assert letters == "DNRS"
    with pytest.raises(ParameterError, match="Unknown splice class 'XX'"):
        load_splice(("XX",))


def test_splice_checksum_is_enforced(monkeypatch, tmp_path):
    from monk_framework import DataFileError
    from monk_framework.io import splice

    monkeypatch.setattr(splice, "SPLICE_SHA256", "0" * 64)
    splice._records.cache_clear()
    try:
        with pytest.raises(DataFileError, match="sha256"):
            splice.load_splice()
    finally:
        monkeypatch.undo()
        splice._records.cache_clear()


def test_splice_data_sets_sizes_and_disjoint_halves():
    X, Y = get_dataset("splice-ei-ie").sample(0)
    assert len(X) == len(Y) == 762
    X, Y = get_dataset("splice-ei-ie", n=766, ambiguous="keep").sample(0)
    assert len(X) == len(Y) == 766
    with pytest.raises(ParameterError, match="'n' parameter of data set 'splice-ei-ie' must be at most 762"):
        get_dataset("splice-ei-ie", n=766)
    data = get_dataset("splice-ie-ie")
    X, Y = data.sample(3)
    assert len(X) == len(Y) == 382
    # disjoint halves: X and Y together are distinct records of IE (duplicates in the file aside)
    from collections import Counter

    from monk_framework import load_splice

    pool = Counter(load_splice(("IE",))["IE"])
    assert not (Counter(X) + Counter(Y)) - pool
    with pytest.raises(ParameterError, match="n \\+ m must be at most 762"):
        get_dataset("splice-ei-ei", n=400)


def test_a_data_set_too_large_for_memory_is_refused_before_drawing(monkeypatch):
    from monk_framework import ResourceError
    from monk_framework.app import datasets

    monkeypatch.setattr("monk_framework.core.resources.available_memory", lambda: 2**30)
    with pytest.raises(ResourceError, match=r"gauss\(n=100000000.*n = 100,000,000, m = 100,000,000, d = 1.*use a smaller n"):
        datasets.get_dataset("gauss", n=10**8).sample(0)
    X, Y = datasets.get_dataset("gauss", n=1000, d=3).sample(0)  # within the budget
    assert X.shape == (1000, 3)


@pytest.mark.parametrize(
    ("name", "params"),
    [("pareto", {"shape": 1e-300}), ("gauss", {"mean_x": 1.7e308, "std_x": 1e308})],
)
def test_parameters_that_draw_beyond_float64_are_named_not_the_data(name, params):
    # the draws' infinities were reported as the user's data ("remove or impute them first")
    with pytest.raises(
        ParameterError,
        match=rf"Data set {name}\(.*\) drew [\d,]+ values beyond float64 \(inf\): its "
        r"parameters make numbers too large to hold",
    ):
        get_dataset(name, **params).sample(0)


def test_a_parameter_that_is_no_finite_number_says_so():
    # "must be a float. Got inf" was false: inf is a float to Python
    with pytest.raises(ParameterError, match=r"must be a float. Got inf instead. A parameter's number must be finite."):
        get_dataset("gauss-outliers", outlier_x=float("inf"))


def test_an_optional_size_says_what_none_means_and_how_large_it_may_be():
    # the splice sets' n said "or None for the same size as n", of n itself
    with pytest.raises(
        ParameterError,
        match=r"The 'n' parameter of SpliceEIIE must be an int >= 1, or None for as many "
        r"as the classes allow\. Got 0 instead\.$",
    ):
        get_dataset("splice-ei-ie", n=0)
    with pytest.raises(
        ParameterError,
        match=r"The 'm' parameter of GaussDataset must be an int >= 1, or None for the same "
        r"size as n\. Got 100000000000000000000 instead\. An int parameter is at most 2\^63 - 1",
    ):
        get_dataset("gauss", m=10**20)
    assert get_dataset("gauss", m=None).size_y == 200
