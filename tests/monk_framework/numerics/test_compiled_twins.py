"""Every compiled loop has a plain numpy twin, a switch, and a fallback.

* each public routine of :mod:`monk_framework.numerics.exp_loops` and :mod:`~monk_framework.numerics.product_loops` against its reference in
  :mod:`monk_framework.numerics.reference`, on random inputs, within the round-off its
  docstring states;
* ``using_compiled(False)`` (``MONK_COMPILED=0``) runs the references: seeded tests give
  the same p-values and statistics within 1e-9;
* without numba (its import made to fail) and when a loop fails to compile, the library
  computes with the references after one warning.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

from monk_framework.numerics import compiled, exp_loops, reference
from monk_framework.numerics.compiled import CompiledLoopsWarning, compiled_available, using_compiled
from monk_framework.numerics.exp_loops import exp_nonpositive, exp_squared_distance_form, exp_squared_distance_tile, finish_squared_distances
from monk_framework.numerics.product_loops import add_indicator_product, add_tile_product, pack_patterns

needs_compiled = pytest.mark.skipif(not compiled_available(), reason="the compiled loops are off or cannot run here")


def both(call):
    """call() with the compiled loops, then with the references."""
    with using_compiled(True):
        fast = call()
    with using_compiled(False):
        plain = call()
    return fast, plain


@needs_compiled
@pytest.mark.parametrize("seed", range(4))
def test_the_finishing_pass_is_the_references_bits(seed):
    # the same operations in the same order, no contraction: equal on every processor
    g = np.random.default_rng(seed)
    n, m = g.integers(1, 40, 2)
    nx, ny = g.random(n) * 10, g.random(m) * 10
    prod = -(nx[:, None] + ny[None, :]) * (1.0 + g.normal(0, 1e-15, (n, m)))
    fast, plain = both(lambda: finish_squared_distances(prod.copy(), nx, ny, -0.37))
    assert fast.tobytes() == plain.tobytes()


@needs_compiled
def test_the_exponential_is_within_one_ulp_of_numpys():
    x = -np.geomspace(1e-12, 745.0, 20_000)
    fast, plain = both(lambda: exp_nonpositive(x))
    np.testing.assert_array_max_ulp(fast, plain, maxulp=1)


@needs_compiled
@pytest.mark.parametrize("d", [1, 3, 5, 12, 13, 30])
@pytest.mark.parametrize("direct", [False, True])
def test_a_gaussian_tile_agrees_with_the_reference(d, direct):
    # the loops' exponential is within 1 ulp; the identity's sums of fused multiply-adds
    # differ from the reference's by round-off of ‖x‖² + ‖y‖² (about 1e-15 of it)
    g = np.random.default_rng(d)
    X, Y = g.normal(size=(29, d)), g.normal(0.5, 1.0, size=(17, d))
    scale = -0.5 / d
    fast, plain = both(lambda: exp_squared_distance_tile(X, Y, scale, direct=direct))
    norms = (np.square(X - Y.mean(0)).sum(1)[:, None] + np.square(Y - Y.mean(0)).sum(1)[None, :]) * abs(scale)
    assert (np.abs(fast - plain) <= plain * (4e-16 + 4e-15 * norms)).all()


@needs_compiled
@pytest.mark.parametrize("d", [1, 4, 11, 32])
def test_the_direct_block_gram_agrees_with_the_reference(d):
    g = np.random.default_rng(10 + d)
    Z, W = g.normal(size=(203, d)), g.normal(size=(203, 5))
    diag = np.full(203, 1.0)
    fast, plain = both(lambda: exp_squared_distance_form(Z, W, -0.5, diag))
    scale = np.abs(W).T @ np.abs(W)  # the size of the terms each entry sums
    assert np.abs(fast - plain).max() <= 1e-13 * scale.max()
    assert np.array_equal(fast, fast.T) and np.array_equal(plain, plain.T)


@needs_compiled
@pytest.mark.parametrize("shape", [(6, 40, 4), (7, 33, 9), (1, 5, 1), (13, 64, 3)])
def test_the_tile_product_agrees_with_the_reference(shape):
    rows, m, q = shape
    g = np.random.default_rng(rows * m)
    T, WT = g.random((rows, m)), g.normal(size=(q, m + 7))
    fast, plain = both(lambda: _added(add_tile_product, (rows, q), T, WT, 5))
    np.testing.assert_allclose(fast, plain, rtol=0, atol=1e-13 * m)


@needs_compiled
@pytest.mark.parametrize("offset, points, lanes, q", [(0, 64, 16, 9), (3, 50, 13, 8), (1, 7, 8, 1), (8, 120, 40, 17)])
def test_the_subset_sums_agree_with_the_reference(offset, points, lanes, q):
    g = np.random.default_rng(points + lanes)
    KT = g.random((points, lanes))
    size = offset + points + 3
    E = g.random((size, q)) < 0.5
    patterns = np.zeros((-(-size // 4), q), dtype=np.uint8)
    for b in range(q):
        chosen = np.flatnonzero(E[:, b])
        np.bitwise_or.at(patterns[:, b], chosen >> 2, (1 << (chosen & 3)).astype(np.uint8))
    fast, plain = both(lambda: _added(add_indicator_product, (q, lanes), KT, patterns, offset))
    want = E[offset : offset + points].T.astype(float) @ KT
    np.testing.assert_allclose(fast, want, rtol=0, atol=1e-13 * points)
    np.testing.assert_allclose(plain, want, rtol=0, atol=1e-13 * points)


def _added(routine, shape, *args):
    out = np.zeros(shape)
    assert routine(out, *args)
    return out


@needs_compiled
def test_packed_patterns_are_the_same_bytes():
    g = np.random.default_rng(5)
    perms = np.array([g.permutation(37) for _ in range(11)])
    fast, plain = both(lambda: _packed(perms))
    assert np.array_equal(fast, plain)
    assert np.array_equal(reference.unpack_patterns(plain, 0, 37).sum(0), np.full(11, 14.0))


def _packed(perms):
    P = np.zeros((10, 11), dtype=np.uint8)
    pack_patterns(P, perms, 14)
    return P


def _seeded_tests(registry):
    from monk_framework.two_sample import permutation_test

    g = np.random.default_rng(2)
    X, Y = g.normal(size=(150, 3)), g.normal(0.25, 1.0, size=(130, 3))
    rbf = registry.get_kernel("rbf", sigma="median")
    cases = [
        ("u-stat", {}),
        ("u-stat", {"max_memory": "200KB"}),  # matrix-free tiles
        ("monk-bcd-fast", {}),  # the direct block Gram matrices
        ("v-stat", {"max_memory": "200KB"}),
    ]
    out = []
    for name, options in cases:
        result = permutation_test(X, Y, kernel=rbf, estimator=registry.get_estimator(name), n_permutations=99, rng=7, **options)
        out.append((result.statistic, result.pvalue))
    return out


def test_the_references_give_the_seeded_tests_numbers(registry):
    fast, plain = both(lambda: _seeded_tests(registry))
    for (t_fast, p_fast), (t_plain, p_plain) in zip(fast, plain):
        assert p_fast == p_plain
        assert t_plain == pytest.approx(t_fast, rel=1e-9, abs=1e-12)


def test_set_compiled_takes_a_bool_or_none():
    with pytest.raises(TypeError, match="True, False or None"):
        compiled.set_compiled("no")  # type: ignore[arg-type]


def test_the_environment_variable_switches_the_loops_off(monkeypatch):
    monkeypatch.setitem(compiled._STATE, "switch", None)
    for text, on in (("0", False), ("off", False), ("False", False), ("1", True), ("", True)):
        monkeypatch.setenv("MONK_COMPILED", text)
        assert compiled.compiled_enabled() is on


@needs_compiled
def test_a_loop_that_fails_to_compile_falls_back_with_one_warning(monkeypatch):
    from numba.core.errors import TypingError

    def broken(*args):
        raise TypingError("a loop this processor cannot compile")

    # the process-wide state is restored after the test
    monkeypatch.setitem(compiled._STATE, "numba", compiled._numba())
    monkeypatch.setitem(compiled._STATE, "warned", False)
    monkeypatch.setattr(exp_loops, "_finish", broken)
    g = np.random.default_rng(0)
    nx, ny = g.random(5), g.random(4)
    prod = -np.add.outer(nx, ny) * 0.5
    with pytest.warns(CompiledLoopsWarning, match="failed to compile.*numpy references") as caught:
        got = finish_squared_distances(prod.copy(), nx, ny, -1.0)
        again = finish_squared_distances(prod.copy(), nx, ny, -1.0)
    assert len([w for w in caught if w.category is CompiledLoopsWarning]) == 1
    want = reference.finish_squared_distances(prod.copy(), nx, ny, -1.0)
    assert got.tobytes() == want.tobytes() == again.tobytes()
    assert not compiled.compiled_available()


NO_NUMBA = """
import json, sys, warnings
sys.modules["numba"] = None  # `import numba` now fails
warnings.simplefilter("always")
import numpy as np
from monk_framework import get_registry
from monk_framework.two_sample import permutation_test
reg = get_registry()
g = np.random.default_rng(2)
X, Y = g.normal(size=(150, 3)), g.normal(0.25, 1.0, size=(130, 3))
with warnings.catch_warnings(record=True) as caught:
    r = permutation_test(reg.get_kernel("rbf", sigma="median"), reg.get_estimator("u-stat"), X, Y, n_permutations=99, rng=7,
                         max_memory="200KB")
    r2 = permutation_test(reg.get_kernel("rbf", sigma="median"), reg.get_estimator("monk-bcd-fast"), X, Y, n_permutations=99, rng=7)
print(json.dumps({"t": [r.statistic, r2.statistic], "p": [r.pvalue, r2.pvalue], "numba": "numba" in sys.modules and sys.modules["numba"] is not None,
                  "warnings": [str(w.message) for w in caught if w.category.__name__ == "CompiledLoopsWarning"]}))
"""


def _seeded_run(registry, code, extra_env=None):
    """Run ``code`` (NO_NUMBA or a variant) in a fresh process, check its two seeded tests
    against this process's, and return the JSON lines it printed (the last is NO_NUMBA's)."""
    env = {k: v for k, v in __import__("os").environ.items() if k != "MONK_COMPILED"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**env, **(extra_env or {})}, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.strip().splitlines()]
    out = next(line for line in reversed(lines) if isinstance(line, dict))
    want = _seeded_tests(registry)
    for t, p, (t_want, p_want) in zip(out["t"], out["p"], [want[1], want[2]]):
        assert p == p_want and t == pytest.approx(t_want, rel=1e-9, abs=1e-12)
    return lines


def test_without_numba_the_library_computes_with_the_references(registry):
    out = _seeded_run(registry, NO_NUMBA)[-1]
    assert not out["numba"]
    assert len(out["warnings"]) == 1 and "numba cannot be imported" in out["warnings"][0]


def test_with_numbas_compiler_switched_off_the_library_computes_with_the_references(registry):
    # NUMBA_DISABLE_JIT=1 (numba's own switch, for debugging) made njit return plain
    # functions: "kernel 'rbf' ...: compute_gram failed: AttributeError: 'function' object
    # has no attribute 'compile'"
    code = NO_NUMBA.replace('sys.modules["numba"] = None  # `import numba` now fails', "")
    out = _seeded_run(registry, code, {"NUMBA_DISABLE_JIT": "1"})[-1]
    assert len(out["warnings"]) == 1 and "numba's compiler is switched off (NUMBA_DISABLE_JIT=1)" in out["warnings"][0]


@pytest.mark.slow  # a process compiling every loop it runs without the cache: about 2.5 s
def test_where_numba_cannot_cache_the_loops_they_compile_without_the_cache(registry):
    # a read-only installation with no writable home: numba refused to compile at all
    # ("RuntimeError: cannot cache function '_clipped': no locator available"), and every
    # vector kernel failed with it. Simulated by leaving numba no cache locator.
    code = NO_NUMBA.replace(
        'sys.modules["numba"] = None  # `import numba` now fails', "import numba.core.caching\nnumba.core.caching.CacheImpl._locator_classes = []"
    )
    code += "from monk_framework.numerics import compiled\nprint(json.dumps(compiled._STATE['no_cache'] and compiled._STATE['numba'] is not False))\n"
    out, compiled_ran = _seeded_run(registry, code)[-2:]
    assert compiled_ran is True  # the compiled loops ran, uncached; not the references
    assert len(out["warnings"]) == 1 and "numba finds no writable directory for its cache" in out["warnings"][0]
    assert "NUMBA_CACHE_DIR" in out["warnings"][0]


SSK_RUN = """
import json, warnings
warnings.simplefilter("always")
from monk_framework import estimate
from monk_framework.plugin import compiled_available
X = ["ACGTTGCA", "GGCATTAC", "TTACGGCA", "CAGTACGT"]
Y = ["ACGAACGT", "GCTAGCTA", "TTGCAATG", "GATTACAG"]
with warnings.catch_warnings(record=True) as caught:
    r = estimate("ssk:n=3", "v-stat", X, Y)
told = [str(w.message) for w in caught if w.category.__name__ == "CompiledLoopsWarning"]
print(json.dumps({"mmd2": r.mmd2, "compiled": compiled_available(), "warnings": told}))
"""


THREADS_ASKED = """
import json, warnings
warnings.simplefilter("always")
from monk_framework.plugin import compiled_available, compiled_threads
with warnings.catch_warnings(record=True) as caught:
    threads = compiled_threads()
print(json.dumps({"threads": threads, "compiled": compiled_available(), "warnings": [str(w.message) for w in caught]}))
"""


@pytest.mark.slow  # three real processes a layer: about 3 s each
@pytest.mark.parametrize("layer", ["nonsense", "tbb"])
def test_a_threading_layer_that_cannot_start_leaves_the_librarys_loops_compiled(layer):
    # NUMBA_THREADING_LAYER=tbb without tbb installed (or a typo) made every SSK fail as
    # "kernel 'ssk' ...: compute_gram failed: ValueError: No threading layer could be loaded."
    # No loop of the library is parallel now (the engine spreads bands over the cores), so
    # the layer is never loaded: the SSK runs compiled, without a warning. A plugin that asks
    # for numba's threads (compiled_threads, for its own prange loops) gets 1 and one warning.
    import importlib.util
    import os

    if layer == "tbb" and importlib.util.find_spec("tbb") is not None:
        pytest.skip("tbb is installed here: its layer starts")
    env = {k: v for k, v in os.environ.items() if k != "MONK_COMPILED"}
    bad = {**env, "NUMBA_THREADING_LAYER": layer}
    done = subprocess.run([sys.executable, "-c", SSK_RUN], capture_output=True, text=True, timeout=300, env=bad)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["warnings"] == [] and out["compiled"] is True
    plain = subprocess.run([sys.executable, "-c", SSK_RUN], capture_output=True, text=True, timeout=300, env={**env, "MONK_COMPILED": "0"})
    assert out["mmd2"] == pytest.approx(json.loads(plain.stdout.strip().splitlines()[-1])["mmd2"], rel=1e-12)
    asked = subprocess.run([sys.executable, "-c", THREADS_ASKED], capture_output=True, text=True, timeout=300, env=bad)
    assert asked.returncode == 0, asked.stderr
    told = json.loads(asked.stdout.strip().splitlines()[-1])
    assert told["threads"] == 1 and told["compiled"] is False and len(told["warnings"]) == 1
    assert "numba cannot start its threads" in told["warnings"][0] and "check NUMBA_THREADING_LAYER" in told["warnings"][0]


def test_importing_the_library_does_not_import_numba():
    code = "import sys, monk_framework, monk_framework.app.cli; print('numba' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_no_warning_when_the_loops_are_switched_off(monkeypatch):
    monkeypatch.setitem(compiled._STATE, "warned", False)
    with using_compiled(False), warnings.catch_warnings():
        warnings.simplefilter("error", CompiledLoopsWarning)
        assert exp_nonpositive(np.array([-1.0]))[0] == np.exp(-1.0)
