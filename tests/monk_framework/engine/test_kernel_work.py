"""The engine answers the core's kernel methods: Kernel.gram, Kernel.features and an embedding's sums."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

from monk_framework import get_registry
from monk_framework.core import protocols
from monk_framework.core.protocols import KernelWork, install_kernel_work, kernel_work
from monk_framework.engine import kernel_work as engine_work

REG = get_registry()


def _rbf(a: np.ndarray, b: np.ndarray, sigma: float) -> float:
    return math.exp(-float(np.sum((a - b) ** 2)) / (2.0 * sigma**2))


class Recording:
    """The engine's work, with every call it answers written down."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str):
        answer = getattr(engine_work, name)

        def recorded(*args, **kwargs):
            self.calls.append(name)
            return answer(*args, **kwargs)

        return recorded


_WORK = [name for name, value in vars(KernelWork).items() if inspect.isfunction(value) and not name.startswith("_")]


@pytest.fixture
def recording():
    work = Recording()
    install_kernel_work(work)
    try:
        yield work
    finally:
        install_kernel_work(engine_work)


def test_importing_the_library_installs_the_engines_work():
    assert kernel_work() is engine_work


def test_the_engines_work_has_every_method_of_the_protocol_with_its_parameters():
    assert set(_WORK) == {"symmetric_gram", "rectangular_gram", "check_feature_matrix", "weighted_gram", "bilinear"}
    for name in _WORK:
        declared = list(inspect.signature(getattr(KernelWork, name)).parameters.values())[1:]  # without self
        given = list(inspect.signature(getattr(engine_work, name)).parameters.values())
        assert [(p.name, p.kind, p.default) for p in given] == [(p.name, p.kind, p.default) for p in declared], name


def test_the_cores_kernel_methods_ask_the_installed_work_and_get_the_definitions_values(recording):
    gen = np.random.default_rng(11)
    X, Y = gen.normal(size=(9, 2)), gen.normal(size=(5, 2))
    kernel = REG.get_kernel("rbf", sigma=0.8)
    K, R = kernel.gram(X), kernel.gram(X, Y)
    brute = np.array([[_rbf(a, b, 0.8) for b in X] for a in X])
    np.testing.assert_allclose(K, brute, rtol=1e-13)
    np.testing.assert_allclose(R, [[_rbf(a, b, 0.8) for b in Y] for a in X], rtol=1e-13)
    assert np.array_equal(K, K.T)
    REG.get_kernel("quadratic").features(X)
    assert recording.calls == ["symmetric_gram", "rectangular_gram", "check_feature_matrix"]


def test_an_embeddings_norm_witness_and_distance_are_the_engines_sums(recording):
    gen = np.random.default_rng(12)
    X, Y, Z = gen.normal(size=(8, 2)), gen.normal(1.0, 1.0, size=(6, 2)), gen.normal(size=(3, 2))
    kernel = REG.get_kernel("rbf", sigma=1.1)
    mean = REG.get_estimator("mean")
    ex, ey = mean.embed(kernel, X), mean.embed(kernel, Y)
    recording.calls.clear()
    kxx = np.mean([[_rbf(a, b, 1.1) for b in X] for a in X])
    kyy = np.mean([[_rbf(a, b, 1.1) for b in Y] for a in Y])
    kxy = np.mean([[_rbf(a, b, 1.1) for b in Y] for a in X])
    assert ex.norm() == pytest.approx(math.sqrt(kxx), rel=1e-12)
    assert ex.distance(ey) == pytest.approx(math.sqrt(kxx + kyy - 2 * kxy), rel=1e-10)
    np.testing.assert_allclose(ex.evaluate(Z), [np.mean([_rbf(z, x, 1.1) for x in X]) for z in Z], rtol=1e-12)
    # the witness values read K(Z, X) whole when it fits: the engine asks the kernel, which asks the engine
    assert recording.calls == ["bilinear", "bilinear", "bilinear", "bilinear", "weighted_gram", "rectangular_gram"]


def test_kernel_values_without_the_engine_are_refused_with_what_to_do(monkeypatch):
    monkeypatch.setattr(protocols, "_installed", [])
    with pytest.raises(RuntimeError, match="import monk_framework"):
        REG.get_kernel("rbf", sigma=1.0).gram(np.zeros((3, 1)))
