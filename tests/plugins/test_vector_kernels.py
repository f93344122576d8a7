"""Every vector kernel against its definition: hand-checked values, brute force, closed forms."""

from __future__ import annotations

import math
import re

import attrs
import numpy as np
import pytest
from scipy.spatial.distance import cdist

from monk_framework import DataError, KernelOverflowError, MonkError, ParameterError, get_registry
from monk_framework.engine.memory import CHUNK_BYTES
from monk_framework.numerics import distances as distances_module

REG = get_registry()


def definition(name: str, params: dict):
    """k(x, y) written straight from each kernel's formula, one pair at a time."""
    if name == "linear":
        return lambda x, y: float(np.dot(x, y))
    if name in ("polynomial", "quadratic"):
        p = params.get("degree", 3 if name == "polynomial" else 2)
        s, c = params.get("scale", 1.0), params.get("offset", 1.0)
        return lambda x, y: (s * float(np.dot(x, y)) + c) ** p
    if name == "rbf":
        sig = params["sigma"]
        return lambda x, y: math.exp(-sum((a - b) ** 2 for a, b in zip(x, y)) / (2 * sig**2))
    if name == "laplace":
        sig = params["sigma"]
        return lambda x, y: math.exp(-math.dist(x, y) / sig)
    if name == "exponential":
        sig = params["sigma"]
        return lambda x, y: math.exp(float(np.dot(x, y)) / sig**2)
    if name == "energy":
        return lambda x, y: 0.5 * (math.hypot(*x) + math.hypot(*y) - math.dist(x, y))
    raise AssertionError(name)


CASES = [
    ("linear", {}),
    ("polynomial", {"degree": 3, "scale": 0.5, "offset": 2.0}),
    ("polynomial", {"degree": 1, "scale": 2.0, "offset": 0.0}),
    ("quadratic", {}),
    ("quadratic", {"scale": 0.3, "offset": 0.0}),
    ("rbf", {"sigma": 0.7}),
    ("laplace", {"sigma": 1.3}),
    ("exponential", {"sigma": 2.0}),
    ("energy", {}),
]


@pytest.mark.parametrize(("name", "params"), CASES)
@pytest.mark.parametrize("d", [1, 3, 7])
def test_gram_equals_pairwise_definition(name, params, d, rng):
    X, Y = rng.normal(size=(9, d)), rng.normal(size=(6, d)) + 0.5
    kernel = REG.get_kernel(name, **params)
    k = definition(name, params)
    want_xy = np.array([[k(x, y) for y in Y] for x in X])
    want_xx = np.array([[k(a, b) for b in X] for a in X])
    np.testing.assert_allclose(kernel.gram(X, Y), want_xy, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(kernel.gram(X), want_xx, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(kernel.diag(X), np.diag(want_xx), rtol=1e-12, atol=1e-13)


HAND = [
    # (name, params, x, y, value computed by hand)
    ("linear", {}, [1, 2], [3, -1], 1.0),
    ("polynomial", {"degree": 3, "scale": 0.5, "offset": 2.0}, [1, 2], [3, -1], 2.5**3),
    ("quadratic", {}, [2], [3], 49.0),
    ("rbf", {"sigma": 2.0}, [0, 0], [3, 4], math.exp(-25 / 8)),
    ("exponential", {"sigma": 2.0}, [1, 2], [3, -1], math.exp(0.25)),
    ("laplace", {"sigma": 2.0}, [0, 0], [3, 4], math.exp(-2.5)),
    ("energy", {}, [3, 4], [0, 1], 0.5 * (5 + 1 - math.sqrt(18))),
]


@pytest.mark.parametrize(("name", "params", "x", "y", "value"), HAND)
def test_hand_checked_values(name, params, x, y, value):
    kernel = REG.get_kernel(name, **params)
    assert kernel.gram(np.array([x], float), np.array([y], float))[0, 0] == pytest.approx(value, rel=1e-14)


def _energy_in_decimal(x, y) -> float:
    """½(‖x‖ + ‖y‖ − ‖x − y‖) in 500-digit decimal arithmetic: exact to float64 for the
    inputs below, whatever the difference cancels."""
    import decimal

    with decimal.localcontext() as ctx:
        ctx.prec = 500
        D = [decimal.Decimal(float(v)) for v in x], [decimal.Decimal(float(v)) for v in y]
        norm = lambda v: sum((c * c for c in v), decimal.Decimal(0)).sqrt()  # noqa: E731
        return float((norm(D[0]) + norm(D[1]) - norm([a - b for a, b in zip(*D)])) / 2)


@pytest.mark.parametrize("far", [1e8, 1e20, 1e60, 1e100, 1e160, 1e200])
def test_the_energy_kernel_keeps_its_digits_between_a_far_point_and_ordinary_ones(far):
    # ½(‖o‖ + ‖y‖ − ‖o − y‖) subtracts numbers near ‖o‖: at 1e20 the difference gave
    # k(o, (1, 2)) = 1.118 where it is 1.618, and k(o, (-3, 1)) = 1.58 where it is 0.081.
    # From 1e100 the data were divided by one power of two near the far point's size, and
    # the ordinary points' norms and distances underflowed: at 1e200 every value between
    # points was 0 (and an MMD_U^2 0.43 where it is 0.092)
    gen = np.random.default_rng(11)
    X = np.vstack([[far, 0.0, 0.0], [-far, far / 3, 0.0], gen.normal(size=(6, 3))])
    K = REG.get_kernel("energy").gram(X)
    np.testing.assert_allclose(REG.get_kernel("energy").diag(X), np.diag(K), rtol=1e-15)
    truth = np.array([[_energy_in_decimal(a, b) for b in X] for a in X])
    # about ε·min(‖x‖, ‖y‖) absolutely: the ordinary points' values to their own digits
    norms = np.array([math.hypot(*row) for row in X])  # without the squares that overflow at 1e160
    assert np.all(np.abs(K - truth) <= 1e-13 * np.abs(truth) + 1e-15 * np.minimum.outer(norms, norms))
    assert K[0, 2:] == pytest.approx(truth[0, 2:], rel=1e-12)


def _normalised_in_decimal(x, y, scale, offset, power) -> float:
    """b(x, y)^p / √(b(x, x)^p b(y, y)^p) for b = scale⟨x, y⟩ + offset, in 1500-digit decimals."""
    import decimal

    with decimal.localcontext() as ctx:
        ctx.prec = 1500
        s, c = decimal.Decimal(scale), decimal.Decimal(offset)
        u, v = [decimal.Decimal(float(t)) for t in x], [decimal.Decimal(float(t)) for t in y]
        b = lambda p, q: s * sum((i * j for i, j in zip(p, q)), decimal.Decimal(0)) + c  # noqa: E731
        bxx, byy = b(u, u), b(v, v)
        if bxx == 0 or byy == 0:
            return 0.0
        return float((b(u, v) / (bxx * byy).sqrt()) ** power)


@pytest.mark.parametrize(
    "spec, scale, offset, power",
    [
        ("linear:normalize=true", 1.0, 0.0, 1),
        ("quadratic:normalize=true", 1.0, 1.0, 2),
        ("polynomial:degree=3,scale=0.5,offset=2,normalize=true", 0.5, 2.0, 3),
        ("polynomial:degree=3,offset=0,normalize=true", 1.0, 0.0, 3),
    ],
)
@pytest.mark.parametrize("far", [1e50, 1e200, 1e300])
def test_normalised_kernels_keep_their_values_beside_a_far_point(spec, scale, offset, power, far):
    # the data had been divided by one power of two near the far point's size, and the
    # ordinary points' products underflowed: the built-in kernel then failed its own
    # contract check ("compute_diag gives k(x_1, x_1) = 1 but compute_gram gives 0")
    gen = np.random.default_rng(12)
    X = np.vstack([[far, -far / 3, 0.0], gen.normal(size=(5, 3)), np.zeros((1, 3))])
    kernel = REG.resolve_kernel(spec)
    K = kernel.gram(X)
    truth = np.array([[_normalised_in_decimal(a, b, scale, offset, power) for b in X] for a in X])
    np.testing.assert_allclose(K, truth, rtol=1e-13, atol=1e-15)
    F = kernel.features(X)
    assert F.shape[1] == kernel.feature_count(X)
    np.testing.assert_allclose(F @ F.T, truth, rtol=1e-12, atol=1e-14)
    # and a robust test on the bounded kernel gives the same answer with the point at 1e300
    from monk_framework import robust_test

    Y = gen.normal(0.5, 1.0, size=(30, 3))
    A = np.vstack([X[:1], gen.normal(size=(29, 3))])
    near = robust_test(np.vstack([A[:1] / far * 1e3, A[1:]]), Y, kernel=kernel, contamination=1, n_permutations=49, rng=0)
    anywhere = robust_test(A, Y, kernel=kernel, contamination=1, n_permutations=49, rng=0)
    assert anywhere.pvalue == near.pvalue


@pytest.mark.parametrize("spec", ["quadratic:scale=1e300", "polynomial:degree=5,offset=1e300"])
def test_extreme_polynomial_weights_are_values_beyond_float64_not_a_plugin_crash(spec):
    # C(p, k) c^(p-k) s^k overflowed Python's floats: "compute_features failed:
    # OverflowError", a built-in kernel reported as a failing plugin, even normalised
    X = np.random.default_rng(2).normal(size=(20, 3))
    with pytest.raises(KernelOverflowError, match=r"gives non-finite values on these data: inf"):
        REG.resolve_kernel(spec).features(X)
    normalised = REG.resolve_kernel(spec + ",normalize=true")
    F = normalised.features(X)
    assert F.shape[1] == normalised.feature_count(X)
    np.testing.assert_allclose(F @ F.T, normalised.gram(X), rtol=1e-12, atol=1e-14)


def test_one_dimensional_arrays_are_one_feature_per_point():
    kernel = REG.get_kernel("quadratic")
    K = kernel.gram(np.array([1.0, 2.0]), np.array([3.0]))
    np.testing.assert_array_equal(K, [[16.0], [49.0]])


@pytest.mark.parametrize(("name", "params"), [c for c in CASES if c[0] in ("linear", "polynomial", "quadratic")])
def test_explicit_feature_maps_reproduce_the_gram(name, params, rng):
    kernel = REG.get_kernel(name, **params)
    X, Y = rng.normal(size=(8, 3)), rng.normal(size=(5, 3))
    np.testing.assert_allclose(kernel.features(X) @ kernel.features(Y).T, kernel.gram(X, Y), rtol=1e-11, atol=1e-12)


def test_quadratic_feature_map_is_the_papers():
    # (xy + c)^2 has the feature map (x^2, sqrt(2c) x, c) in one dimension
    phi = REG.get_kernel("quadratic", offset=3.0).features(np.array([[2.0]]))
    np.testing.assert_allclose(sorted(phi.ravel()), sorted([4.0, math.sqrt(6) * 2, 3.0]))


def test_kernels_without_feature_map_say_so():
    with pytest.raises(MonkError, match="no explicit finite feature map"):
        REG.get_kernel("rbf", sigma=1.0).features(np.zeros((2, 1)))


def test_chunked_gram_is_exactly_symmetric_and_matches_unchunked(monkeypatch, rng):
    X = rng.normal(size=(301, 4)) * 3
    kernel = REG.get_kernel("rbf", sigma=2.0)
    whole = kernel.gram(X)
    monkeypatch.setitem(CHUNK_BYTES, "band", 8 * 301 * 7)  # 32-row chunks
    chunked = kernel.gram(X)
    assert np.array_equal(chunked, chunked.T)
    assert np.array_equal(np.diag(chunked), np.ones(301))
    np.testing.assert_allclose(chunked, whole, rtol=1e-13, atol=0)
    rect = kernel.gram(X, X[:50])
    np.testing.assert_allclose(rect, whole[:, :50], rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("d", [2, 12])
def test_distances_are_accurate_for_near_duplicates_far_from_the_origin(d, rng):
    base = 1000.0 + rng.normal(size=(40, d))
    X = np.vstack([base, base + 1e-7 * rng.normal(size=(40, d))])
    got = distances_module.distances(X, X)
    want = cdist(X, X)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    sq = distances_module.squared_distances(X, X)
    assert (sq >= 0).all()


@pytest.mark.parametrize("sizes, d", [((30, 20), 2), ((4, 3), 1), ((5, 3), 1), ((27, 14), 12)])
def test_median_heuristic_equals_brute_force_median(rng, monkeypatch, sizes, d):

    monkeypatch.setitem(CHUNK_BYTES, "band", 8 * 50 * 3)  # row bands of 3 rows
    X, Y = rng.normal(size=(sizes[0], d)), rng.normal(size=(sizes[1], d)) + 1
    Z = np.vstack([X, Y])
    n = len(Z)  # 7 points: 21 pairs (odd); 8 points: 28 pairs (even)
    want = float(np.median([math.dist(Z[i], Z[j]) for i in range(n) for j in range(i + 1, n)]))
    fitted = REG.get_kernel("rbf", sigma="median").fit(X, Y)
    assert fitted.sigma == pytest.approx(want, rel=1e-12)
    assert REG.get_kernel("laplace", sigma="median").fit(X, Y).sigma == pytest.approx(want, rel=1e-12)


def test_median_heuristic_is_recorded_and_required_before_gram(rng):
    X, Y = rng.normal(size=(30, 1)), rng.normal(size=(30, 1))
    kernel = REG.get_kernel("rbf", sigma="median")
    with pytest.raises(MonkError, match=r"kernel.fit\(X, Y\)"):
        kernel.gram(X)
    result = REG.get_estimator("v-stat").estimate(kernel, X, Y)
    assert result.kernel_params_requested == {"sigma": "median"}
    assert result.kernel_params["sigma"] == pytest.approx(kernel.fit(X, Y).sigma)


def test_median_heuristic_rejects_degenerate_samples_and_says_what_sigma_would_do():
    X = np.zeros((10, 1))
    with pytest.raises(
        DataError,
        match=r"sigma = 0: .* \(many repeated points: all pooled points are equal, so every "
        r"MMD is 0 whatever sigma\)\. Pass sigma explicitly\.$",
    ):
        REG.get_kernel("rbf", sigma="median").fit(X, X)
    # binary data: most pairs tie (here 8 zeros and 4 ones: 28 + 6 of the 66 pairs, 52 %);
    # the median of the others (1) is offered
    Z = np.array([0.0] * 8 + [1.0] * 4)[:, None]
    for name, metric in (("rbf", {}), ("laplace", {"norm": "l1"})):
        with pytest.raises(
            DataError,
            match=r"\(many repeated points: 52% of the pairs\)\. Pass sigma explicitly, for "
            r"instance the median of the nonzero distances: sigma=1\.$",
        ):
            REG.get_kernel(name, sigma="median", **metric).fit(Z[:6], Z[6:])


def test_exponential_kernel_overflow_is_detected_and_explained():
    kernel = REG.get_kernel("exponential", sigma=1.0)
    X = np.array([[30.0], [1.0]])
    with pytest.raises(KernelOverflowError, match=r"too large here: the largest <x, y>/sigma\^2 is 900 > 681.4.*sigma >= 1.149"):
        kernel.gram(X)
    # the suggested sigma works
    assert np.isfinite(REG.get_kernel("exponential", sigma=1.15).gram(X)).all()


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("rbf", {"sigma": -1.0}, "The 'sigma' parameter of RBFKernel must be a float > 0 or 'median'. Got -1.0 instead."),
        ("rbf", {"sigma": "mean"}, "Got 'mean' instead."),
        ("polynomial", {"degree": 0}, "The 'degree' parameter of PolynomialKernel must be an int >= 1. Got 0 instead."),
        ("polynomial", {"degree": 2.5}, "must be an int >= 1"),
        ("polynomial", {"offset": -1.0}, "must be a float >= 0"),
        ("laplace", {"sigma": float("nan")}, "must be a float > 0"),
        ("exponential", {"sigma": 0}, "must be a float > 0"),
    ],
)
def test_invalid_hyperparameters_cannot_be_constructed(name, params, message):
    with pytest.raises(ParameterError) as info:
        REG.get_kernel(name, **params)
    assert message in str(info.value)


GAUSSIANS = [
    # mean_x, cov_x, mean_y, cov_y
    ([0.1447], [[0.4422**2]], [0.3403], [[0.9687**2]]),
    ([0.0, 1.0], [[1.0, 0.3], [0.3, 0.5]], [0.5, 0.0], [[0.6, -0.1], [-0.1, 1.2]]),
]


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("rbf", {"sigma": 1.0}),
        ("rbf", {"sigma": 0.6}),
        ("quadratic", {}),
        ("quadratic", {"offset": 2.0, "scale": 0.5}),
        ("linear", {}),
        ("polynomial", {"degree": 1, "offset": 3.0}),
    ],
)  # noqa: E501 - one case per line
@pytest.mark.parametrize("gaussians", GAUSSIANS)
def test_closed_form_expectations_match_monte_carlo(name, params, gaussians):
    """E k(x, y) in closed form against 400 000 independent pairs (5 standard errors)."""
    m1, c1, m2, c2 = (np.asarray(a, float) for a in gaussians)
    kernel = REG.get_kernel(name, **params)
    gen = np.random.default_rng(7)
    n = 400_000
    x = gen.multivariate_normal(m1, c1, size=n)
    y = gen.multivariate_normal(m2, c2, size=n)
    if name == "rbf":
        values = np.exp(-((x - y) ** 2).sum(1) / (2 * params["sigma"] ** 2))
    elif name == "linear":
        values = (x * y).sum(1)
    else:
        power = params.get("degree", 2)
        values = (params.get("scale", 1.0) * (x * y).sum(1) + params.get("offset", 1.0)) ** power
    want = kernel.gaussian_expectation(m1, c1, m2, c2)
    assert abs(values.mean() - want) < 5 * values.std() / math.sqrt(n)


def test_closed_form_mmd_matches_design_formula_in_one_dimension():
    m1, s1, m2, s2, sig = 0.1447, 0.4422, 0.3403, 0.9687, 1.0
    rbf = (
        sig / math.sqrt(sig**2 + 2 * s1**2)
        + sig / math.sqrt(sig**2 + 2 * s2**2)
        - 2 * sig / math.sqrt(sig**2 + s1**2 + s2**2) * math.exp(-((m1 - m2) ** 2) / (2 * (sig**2 + s1**2 + s2**2)))
    )
    assert REG.get_kernel("rbf", sigma=sig).gaussian_mmd2(m1, s1**2, m2, s2**2) == pytest.approx(rbf, rel=1e-12)
    quad = ((m1**2 + s1**2) - (m2**2 + s2**2)) ** 2 + 2 * 1.0 * (m1 - m2) ** 2
    assert REG.get_kernel("quadratic").gaussian_mmd2(m1, s1**2, m2, s2**2) == pytest.approx(quad, rel=1e-12)


def test_kernels_without_closed_form_say_so():
    with pytest.raises(MonkError, match="no closed-form"):
        REG.get_kernel("laplace", sigma=1.0).gaussian_mmd2(0.0, 1.0, 0.0, 1.0)


# -- extreme scales: a finite value or a clear error, never inf, NaN or 0 from overflow --

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

#: decimal exponents of the data's scale, 1e-300 to 1e300
EXPONENTS = st.integers(min_value=-300, max_value=300)
#: (kernel, params as a function of the data scale c, how k(cx, cy) relates to k(x, y))
SCALED = [
    ("rbf", lambda c: {"sigma": 1.5 * c}, "invariant"),
    ("rbf", lambda c: {"sigma": "median"}, "invariant"),
    ("laplace", lambda c: {"sigma": 1.5 * c}, "invariant"),
    ("laplace", lambda c: {"sigma": "median"}, "invariant"),
    ("exponential", lambda c: {"sigma": 3.0 * c}, "invariant"),
    ("energy", lambda c: {}, "degree 1"),
    ("linear", lambda c: {"normalize": True}, "invariant"),  # the cosine
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(exponent=EXPONENTS, case=st.sampled_from(SCALED), d=st.sampled_from([1, 3, 8]))
def test_kernels_are_exact_at_any_scale_when_their_bandwidth_follows_it(exponent, case, d):
    # a bandwidth kernel with sigma = c * sigma_1 on data c * X is the same kernel as on X:
    # every value must match the unit-scale Gram matrix, not overflow to 0 or NaN
    name, params, law = case
    c = 10.0**exponent
    X = np.random.default_rng(d).normal(size=(12, d))
    unit = REG.get_kernel(name, **params(1.0)).fit(X).gram(X)
    got = REG.get_kernel(name, **params(c)).fit(X * c).gram(X * c)
    expected = unit * c if law == "degree 1" else unit
    if law == "degree 1" and not np.isfinite(expected).all():
        return  # the values themselves exceed float64 (c ~ 1e300)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * float(np.abs(expected).max()))


@settings(max_examples=60, deadline=None)
@given(data_exp=EXPONENTS, sigma_exp=EXPONENTS, name=st.sampled_from(["rbf", "laplace", "exponential"]))
def test_a_bandwidth_kernel_gives_a_finite_gram_or_a_clear_error_for_any_sigma(data_exp, sigma_exp, name):
    X = np.random.default_rng(0).normal(size=(6, 2)) * 10.0**data_exp
    kernel = REG.get_kernel(name, sigma=10.0**sigma_exp)
    try:
        K = kernel.gram(X)
    except KernelOverflowError as err:
        assert name == "exponential" and "Use sigma >=" in str(err) and "inf" not in str(err).split("Use sigma >=")[1]
        return
    assert np.isfinite(K).all()
    assert np.array_equal(np.diag(K), np.ones(6)) or name == "exponential"
    if name != "exponential":
        # the distance ratio decides: off-diagonal values are exp(-r) for r = dist / sigma
        r = data_exp - sigma_exp
        if r <= -20:
            assert (K > 1 - 1e-12).all()  # sigma far above the spread: all ones, not 0
        if r >= 20:
            assert np.array_equal(K, np.eye(6))  # far below: the identity, not NaN


def test_the_suggested_sigma_of_the_exponential_kernel_is_finite_when_sigma_squared_underflows():
    X = np.array([[30.0], [1.0]])
    with pytest.raises(KernelOverflowError, match=r"Use sigma >= 1.149") as err:
        REG.get_kernel("exponential", sigma=1e-300).gram(X)
    assert "sigma^2 is inf" in str(err.value) or "e+" in str(err.value)


def test_the_median_heuristic_works_at_any_scale_and_says_when_distances_overflow():
    X = np.random.default_rng(3).normal(size=(30, 2))
    unit = REG.get_kernel("rbf", sigma="median").fit(X).sigma
    for c in (1e-300, 1e-200, 1e200, 1e300):
        assert REG.get_kernel("rbf", sigma="median").fit(X * c).sigma == pytest.approx(unit * c, rel=1e-13)
    # pairwise distances 0.1, 0.1, 2.8, 2.9, 2.9, 3 (x 1e308): the median 2.85e308 > max float
    huge = np.array([[-1.5e308], [1.5e308], [-1.4e308], [1.4e308]])
    with pytest.raises(KernelOverflowError, match="median heuristic overflows float64"):
        REG.get_kernel("rbf", sigma="median").fit(huge)


@pytest.mark.parametrize("name", ["linear", "polynomial", "quadratic", "energy"])
@pytest.mark.parametrize("exponent", [-300, -160, 160, 300])
def test_unbounded_kernels_give_finite_values_or_say_they_overflow(name, exponent):
    X = np.random.default_rng(4).normal(size=(8, 3)) * 10.0**exponent
    try:
        K = REG.get_kernel(name).gram(X)
    except KernelOverflowError as err:
        # the values exceed float64, or the limit below it that keeps their sums finite
        assert exponent > 0 and ("non-finite values" in str(err) or "sums would overflow float64" in str(err))
        return
    assert np.isfinite(K).all()
    # <x, y> ~ 1e-600 rounds to 0 correctly; every other kernel keeps nonzero values
    assert np.abs(K).max() > 0 or (name == "linear" and exponent < -160)


def test_bandwidth_kernels_default_to_the_median_heuristic_and_gaussian_names_rbf(registry):
    from monk_framework.engine.median_heuristic import median_distance

    X, Y = np.random.default_rng(0).normal(size=(30, 3)), np.random.default_rng(1).normal(size=(20, 3))
    for name in ("rbf", "laplace"):
        kernel = registry.get_kernel(name)
        assert kernel.sigma == "median" and not kernel.is_fitted
        assert kernel.fit(X, Y).sigma == median_distance(X, Y)
    assert registry.get_kernel("gaussian", sigma=2.0) == registry.get_kernel("rbf", sigma=2.0)
    assert registry.entry("kernel", "gaussian").name == "rbf"


def test_laplace_l1_is_scikit_learns_laplacian_kernel_and_its_median_is_l1(registry):
    from scipy.spatial.distance import cdist, pdist

    X, Y = np.random.default_rng(2).normal(size=(15, 4)), np.random.default_rng(3).normal(size=(9, 4))
    k = registry.get_kernel("laplace", sigma=1.7, norm="l1")
    np.testing.assert_allclose(k(X, Y), np.exp(-cdist(X, Y, "cityblock") / 1.7), rtol=1e-13)
    l2 = registry.get_kernel("laplace", sigma=1.7)
    np.testing.assert_allclose(l2(X, Y), np.exp(-cdist(X, Y) / 1.7), rtol=1e-12)
    fitted = registry.get_kernel("laplace", norm="l1").fit(X, Y)
    assert fitted.sigma == pytest.approx(np.median(pdist(np.vstack([X, Y]), "cityblock")), rel=1e-12)
    # huge data: the scaled L1 distances neither overflow nor lose the ratio
    big = registry.get_kernel("laplace", sigma=1e300, norm="l1")
    np.testing.assert_allclose(big(X * 1e300, Y * 1e300), k.__class__(sigma=1.0, norm="l1")(X, Y), rtol=1e-12)


# -- gross outliers: one point of any finite magnitude leaves the ordinary points exact --


def _pairwise_truth(name: str, X: np.ndarray, Y: np.ndarray, sigma: float) -> np.ndarray:
    """k(x, y) pair by pair from coordinate differences divided by σ first: no square of
    a raw coordinate, so no overflow or underflow that the kernel's value would notice."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        t = (X[:, None, :] - Y[None, :, :]) / sigma
        if name == "rbf":
            return np.exp(-0.5 * (t**2).sum(-1))
        if name == "laplace-l1":
            return np.exp(-np.abs(t).sum(-1))
        top = np.abs(t).max(-1, keepdims=True)  # a hypot without overflow
        safe = np.where(top > 0, top, 1.0)
        return np.exp(-(top[..., 0] * np.sqrt(((t / safe) ** 2).sum(-1))))


GROSS = [1e101, 1e154, 1e155, 1e200, 1e300, 1.7e308]


@pytest.mark.parametrize("outlier", GROSS)
@pytest.mark.parametrize("name", ["rbf", "laplace", "laplace-l1"])
@pytest.mark.parametrize("d", [2, 8])
def test_one_gross_outlier_leaves_the_ordinary_values_of_a_bounded_kernel_exact(name, outlier, d):
    gen = np.random.default_rng(d)
    X, Y = gen.normal(size=(30, d)), gen.normal(0.5, 1.0, size=(20, d))
    X[3] = outlier * gen.choice([-1.0, 1.0], size=d)
    kernel = REG.get_kernel("laplace", sigma=1.3, norm="l1") if name == "laplace-l1" else REG.get_kernel(name, sigma=1.3)
    for A, B in ((X, X), (X, Y), (Y, X)):
        np.testing.assert_allclose(kernel(A, B), _pairwise_truth(name, A, B, 1.3), rtol=1e-12, atol=1e-300)
    # the outlier sees nothing but itself; the others are as if it were not there
    K = kernel(X)
    assert K[3, 3] == 1.0 and np.count_nonzero(K[3]) == 1
    ordinary = np.delete(np.arange(30), 3)
    np.testing.assert_allclose(K[np.ix_(ordinary, ordinary)], kernel(X[ordinary]), rtol=1e-14)


@pytest.mark.parametrize("outlier", [1e120, 1e200, 1e300])
def test_a_tiny_bandwidth_and_outliers_of_many_magnitudes_keep_every_value(outlier):
    # points in four magnitude groups, and a σ far below all of them: every pair is
    # scaled by its own group block, none by the largest point's scale
    gen = np.random.default_rng(5)
    X = gen.normal(size=(24, 3)) * np.repeat([1e-200, 1e-60, 1.0, outlier], 6)[:, None]
    for sigma in (1e-250, 1e-61, 1.0, 1e250):
        kernel = REG.get_kernel("rbf", sigma=sigma)
        np.testing.assert_allclose(kernel(X), _pairwise_truth("rbf", X, X, sigma), rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("outlier", [1e120, 1e200, 1e300])
def test_the_median_heuristic_ignores_how_large_a_few_outliers_are(outlier):
    # 3 outliers among 80 points: the median pairwise distance is an ordinary one, the
    # same whatever the outliers' magnitude (it was 0 once: "more than half the
    # distances are zero")
    from scipy.spatial.distance import pdist

    gen = np.random.default_rng(8)
    Z = gen.normal(size=(80, 3))
    Z[:3] = gen.normal(size=(3, 3)) * outlier
    for metric, name in (("l2", "euclidean"), ("l1", "cityblock")):
        got = REG.get_kernel("rbf" if metric == "l2" else "laplace", **({} if metric == "l2" else {"norm": "l1"})).fit(Z).sigma
        scaled = Z / outlier  # the outliers' distances, in units where they are finite
        with np.errstate(over="ignore"):
            truth_big = pdist(scaled, name)[: 3 * 79 - 3] * outlier  # every pair touching an outlier
        ordinary = pdist(Z[3:], name)
        values = np.sort(np.concatenate([ordinary, truth_big[np.isfinite(truth_big)], np.full(np.count_nonzero(~np.isfinite(truth_big)), np.inf)]))
        assert len(values) == 80 * 79 // 2
        middle = values[len(values) // 2 - 1 : len(values) // 2 + 1]
        assert got == pytest.approx(middle.mean(), rel=1e-12)


def test_a_gross_outlier_changes_an_estimate_by_its_bounded_share_only():
    # the V-statistic with one point at 1e200 equals the brute-force value (it was 0.341
    # where the answer is 0.602), and a robust test still finds N(0, I) against N(3, I)
    from monk_framework.two_sample.robust import robust_test

    gen = np.random.default_rng(0)
    X, Y = gen.normal(size=(100, 3)), gen.normal(3.0, 1.0, size=(100, 3))
    X[0] = 1e200
    kernel = REG.get_kernel("rbf", sigma=2.0)
    Kxx, Kyy, Kxy = (_pairwise_truth("rbf", A, B, 2.0) for A, B in ((X, X), (Y, Y), (X, Y)))
    truth = Kxx.mean() + Kyy.mean() - 2 * Kxy.mean()
    assert REG.get_estimator("v-stat").estimate(kernel, X, Y).mmd2 == pytest.approx(truth, rel=1e-12)
    for method in ("dc", "mom"):
        assert robust_test(X, Y, kernel=kernel, contamination=1, method=method, n_permutations=199, rng=1).reject, method


def _on_a_grid(gen: np.random.Generator, shape: tuple[int, int], shift: float = 0.0) -> np.ndarray:
    """Normal draws rounded to multiples of 2^-20: adding 2^30 to them is exact."""
    return np.round((gen.normal(size=shape) + shift) * 2**20) / 2**20


@pytest.mark.parametrize("spec", ["linear", "energy", "linear + energy", "2 * energy", "linear + rbf"])
@pytest.mark.parametrize("estimator", ["v-stat", "u-stat", "monk-bcd:n_blocks=5", "monk-bcd-fast:n_blocks=5"])
def test_a_shift_free_mmd_keeps_its_digits_far_from_the_origin(spec, estimator):
    # <x, y> of data near 1e8 is about 1e16: the linear kernel's MMD^2 of order 0.3 came out
    # 30 times too large, the energy kernel's wrong in the third digit at 1e12. Data moved
    # by an exact 2^30 must give the same bits, and the classical statistics their
    # closed forms on the data as given.
    from monk_framework import estimate

    gen = np.random.default_rng(7)
    X, Y = _on_a_grid(gen, (60, 3)), _on_a_grid(gen, (50, 3), 0.4)
    linear, energy = REG.get_kernel("linear"), REG.get_kernel("energy")
    rbf = REG.get_kernel("rbf", sigma=1.0)
    kernel = {"linear": linear, "energy": energy, "linear + energy": linear + energy, "2 * energy": 2 * energy, "linear + rbf": linear + rbf}[spec]
    near = estimate(X, Y, kernel=kernel, estimator=estimator, rng=3).mmd2
    far = estimate(X + 2.0**30, Y + 2.0**30, kernel=kernel, estimator=estimator, rng=3).mmd2
    assert far == near
    if estimator == "v-stat":
        linear = float(np.sum((X.mean(0) - Y.mean(0)) ** 2))
        energy = (2 * cdist(X, Y).mean() - cdist(X, X).mean() - cdist(Y, Y).mean()) / 2
        gauss = float(
            np.mean(np.exp(-cdist(X, X, "sqeuclidean") / 2))
            + np.mean(np.exp(-cdist(Y, Y, "sqeuclidean") / 2))
            - 2 * np.mean(np.exp(-cdist(X, Y, "sqeuclidean") / 2))
        )
        truth = {"linear": linear, "energy": energy, "linear + energy": linear + energy, "2 * energy": 2 * energy, "linear + rbf": linear + gauss}[spec]
        assert far == pytest.approx(truth, rel=1e-12)


@pytest.mark.parametrize("spec", ["linear", "energy"])
def test_the_distance_of_two_mean_embeddings_keeps_its_digits_far_from_the_origin(spec):
    from monk_framework import embed, estimate

    gen = np.random.default_rng(9)
    X, Y = _on_a_grid(gen, (40, 2)), _on_a_grid(gen, (30, 2), 0.5)
    near = embed(X, kernel=spec, estimator="mean").distance(embed(Y, kernel=spec, estimator="mean"))
    far = embed(X + 2.0**30, kernel=spec, estimator="mean").distance(embed(Y + 2.0**30, kernel=spec, estimator="mean"))
    assert far == near == pytest.approx(estimate(X, Y, kernel=spec, estimator="v-stat").mmd, rel=1e-12)


def test_the_frame_of_a_shift_free_mmd_is_a_median_data_value_and_is_idempotent():
    kernel = REG.get_kernel("linear")
    gen = np.random.default_rng(8)
    X, Y = gen.normal(size=(9, 2)) + 1e6, gen.normal(size=(6, 2)) + 1e6
    X[0] = 1e300  # a gross outlier does not drag the frame away from the ordinary points
    _, Xc, Yc = kernel.mmd_view(X, Y)
    Z = np.vstack([Xc, Yc])
    assert np.count_nonzero(Z == 0.0, axis=0).min() >= 1  # the lower median is a data value, now 0
    assert np.abs(np.vstack([Xc[1:], Yc])).max() < 10  # the ordinary points sit near the origin
    again = kernel.mmd_view(Xc, Yc)
    assert again[0] is kernel and again[1] is Xc and again[2] is Yc  # a second call changes nothing
    assert not Xc.flags.writeable
    # a translation-invariant kernel is read as given
    view, Xv, _ = REG.get_kernel("rbf").mmd_view(X[1:], Y)
    np.testing.assert_array_equal(Xv, X[1:])
    assert view == REG.get_kernel("rbf")
    # a polynomial kernel is anchored at the same data value, the samples moved by it; its
    # parameters (what results report) are the kernel's
    median = np.sort(np.vstack([X[1:], Y])[:, 0])[(14 - 1) // 2]  # the lower median of 14 points
    for kernel in (REG.get_kernel("polynomial"), REG.get_kernel("quadratic")):
        view, Xv, Yv = kernel.mmd_view(X[1:], Y)
        assert type(view) is type(kernel) and view.params() == kernel.params() and view != kernel
        assert view._anchor[0] == median and np.count_nonzero(np.vstack([Xv, Yv]) == 0.0, axis=0).min() >= 1
        assert view.mmd_view(Xv, Yv)[0] is view  # near the origin now: not anchored twice
    # a kernel whose MMD depends on the origin with no anchored form is read as given, with
    # a word on the round-off of data 1e6 spreads from it
    from monk_framework import PrecisionWarning

    for kernel in (REG.get_kernel("linear", normalize=True), REG.get_kernel("quadratic", normalize=True)):
        with pytest.warns(PrecisionWarning, match=r"The data lie 1\.\d+e\+06 spreads from the origin"):
            view, Xv, _ = kernel.mmd_view(X[1:], Y)
        assert view is kernel
        np.testing.assert_array_equal(Xv, X[1:])


def _exact_polynomial(X: np.ndarray, Y: np.ndarray, scale: float = 1.0, offset: float = 1.0, p: int = 2) -> tuple[float, float]:
    """The V- and U-statistics of (scale <x, y> + offset)^p in rational arithmetic (the data
    are dyadic, so every value is exact)."""
    from fractions import Fraction

    Xf = [[Fraction(v) for v in row] for row in X.tolist()]
    Yf = [[Fraction(v) for v in row] for row in Y.tolist()]
    s, c = Fraction(scale), Fraction(offset)

    def k(a, b):
        return (s * sum(x * y for x, y in zip(a, b)) + c) ** p

    def total(A, B):
        return sum(k(a, b) for a in A for b in B)

    n, m = len(Xf), len(Yf)
    sxx, syy, sxy = total(Xf, Xf), total(Yf, Yf), total(Xf, Yf)
    txx, tyy = sum(k(a, a) for a in Xf), sum(k(b, b) for b in Yf)
    v = sxx / n**2 + syy / m**2 - 2 * sxy / (n * m)
    u = (sxx - txx) / (n * (n - 1)) + (syy - tyy) / (m * (m - 1)) - 2 * sxy / (n * m)
    return float(v), float(u)


@pytest.mark.parametrize("offset", [2.0**10, 2.0**20, 2.0**30, 2.0**40])
@pytest.mark.parametrize("params", [{}, {"degree": 3, "scale": 0.5, "offset": 2.0}, {"degree": 1}])
def test_a_polynomial_kernel_far_from_the_origin_keeps_every_digit(offset, params):
    # read as given, the quadratic kernel's MMD^2 of data near 2^30 came out 700 times too
    # large (with a warning); anchored at the data it is exact, without a word
    import warnings

    from monk_framework import PrecisionWarning, estimate, permutation_test
    from monk_framework.core.randomness import child, root, stream

    gen = np.random.default_rng(11)
    X, Y = _on_a_grid(gen, (20, 2)) + offset, _on_a_grid(gen, (16, 2), 0.5) + offset
    name = "polynomial" if params else "quadratic"
    kernel = REG.get_kernel(name, **params)
    v, u = _exact_polynomial(X, Y, kernel.scale, kernel.offset, kernel.power)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)
        assert estimate(X, Y, kernel=kernel, estimator="v-stat").mmd2 == pytest.approx(v, rel=1e-12)
        assert estimate(X, Y, kernel=kernel, estimator="u-stat").mmd2 == pytest.approx(u, rel=1e-12)
        for budget in (None, 4096):  # tiles, and features (the U-statistic's diagonal apart)
            test = permutation_test(X, Y, kernel=kernel, estimator="u-stat", n_permutations=9, rng=3, return_null=True, max_memory=budget)
            assert test.statistic_mmd2 == pytest.approx(u, rel=1e-12)
            # relabelled statistics, against exact arithmetic on the relabelled samples (the
            # b-th relabelling is the b-th permutation of the test's "relabel" stream)
            Z, n = np.vstack([X, Y]), len(X)
            drawn = np.random.default_rng(child(stream(root(3), "relabel"), 0))
            for T in test.null_distribution[:3]:
                P = Z[drawn.permutation(len(Z))]
                u_b = _exact_polynomial(P[:n], P[n:], kernel.scale, kernel.offset, kernel.power)[1]
                assert T == pytest.approx(math.copysign(math.sqrt(abs(u_b)), u_b), rel=1e-12)
        # the MONK estimators with one block and no ridge are the V-statistic, far from the origin too
        for monk in ("monk-bcd:n_blocks=1,ridge=0", "monk-bcd-fast:n_blocks=1,ridge=0", "monk-embedding-mmd:n_blocks=1"):
            assert estimate(X, Y, kernel=kernel, estimator=monk, rng=5).mmd2 == pytest.approx(v, rel=1e-12)
        # with blocks, MONK reads the kernel about the anchor: the same bits as the anchored
        # kernel given the moved data directly
        view, Xv, Yv = kernel.mmd_view(X, Y)
        got = estimate(X, Y, kernel=kernel, estimator="monk-bcd:n_blocks=3", rng=5).mmd2
        assert got == estimate(Xv, Yv, kernel=view, estimator="monk-bcd:n_blocks=3", rng=5).mmd2


def test_an_origin_dependent_kernel_with_no_anchored_form_warns_with_its_round_off():
    # a plugin quadratic kernel without the anchored form is read as given far from the
    # origin: its MMD^2 of data near 2^30 came out 700 times too large, so it is said
    import warnings

    from monk_framework import PrecisionWarning, estimate
    from monk_plugins.vector_kernels import QuadraticKernel

    @attrs.frozen(kw_only=True)
    class Unanchored(QuadraticKernel):
        name = "quadratic-unanchored"

        def anchored(self, anchor):
            return None

    kernel = Unanchored()
    gen = np.random.default_rng(11)
    X, Y = _on_a_grid(gen, (20, 2)), _on_a_grid(gen, (20, 2), 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)  # near the origin: not a word
        got = estimate(X + 1e3, Y + 1e3, kernel=kernel, estimator="v-stat").mmd2
        assert got == pytest.approx(_exact_polynomial(X + 1e3, Y + 1e3)[0], rel=1e-8)
    for offset in (2.0**20, 2.0**30):
        with pytest.warns(PrecisionWarning, match=r"relative round-off of about ([0-9.e+-]+)") as record:
            got = estimate(X + offset, Y + offset, kernel=kernel, estimator="v-stat").mmd2
        stated = float(re.search(r"round-off of about ([0-9.e+-]+), more when the two distributions are close\.", str(record[0].message)).group(1))
        exact = _exact_polynomial(X + offset, Y + offset)[0]
        assert abs(got - exact) / exact <= 100 * stated  # the stated round-off is the error's order, not a loose bound
    # two close distributions (one coordinate at 1e6 in both, the other N(0, 1) in both):
    # their MMD^2 is far below a spread's, and its round-off far above the figure, as said
    A = np.c_[np.full(40, 1e6), np.round(gen.normal(size=40) * 2**20) / 2**20]
    B = np.c_[np.full(40, 1e6), np.round(gen.normal(size=40) * 2**20) / 2**20]
    with pytest.warns(PrecisionWarning, match=r"round-off of about [0-9.e+-]+, more when the two distributions are close") as record:
        got = estimate(A, B, kernel=kernel, estimator="v-stat").mmd2
    stated = float(re.search(r"round-off of about ([0-9.e+-]+),", str(record[0].message)).group(1))
    assert abs(got - _exact_polynomial(A, B)[0]) / _exact_polynomial(A, B)[0] > 10 * stated
    # the built-in kernel, anchored, gets it right
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)
        assert estimate(A, B, kernel="quadratic", estimator="v-stat").mmd2 == pytest.approx(_exact_polynomial(A, B)[0], rel=1e-10)


def test_a_translation_invariant_kernel_that_does_not_say_so_gets_no_warning():
    import warnings

    from monk_framework import Kernel, PrecisionWarning, estimate

    class Cauchy(Kernel):  # translation_invariant left False
        name = "cauchy-undeclared"

        def compute_gram(self, A, B):
            return 1.0 / (1.0 + ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))

        def compute_diag(self, A):
            return np.ones(len(A))

    gen = np.random.default_rng(12)
    X, Y = gen.normal(size=(20, 2)), gen.normal(size=(20, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)
        got = estimate(X + 1e9, Y + 1e9, kernel=Cauchy(), estimator="v-stat").mmd2
    Xs, Ys = (X + 1e9) - 1e9, (Y + 1e9) - 1e9  # the data as float64 holds them, moved back exactly
    cauchy = lambda A, B: 1.0 / (1.0 + cdist(A, B, "sqeuclidean"))  # noqa: E731
    assert got == pytest.approx(cauchy(Xs, Xs).mean() + cauchy(Ys, Ys).mean() - 2 * cauchy(Xs, Ys).mean(), rel=1e-9)
