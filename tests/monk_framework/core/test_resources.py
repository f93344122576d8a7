"""One memory budget: parsed sizes, a budget per call, and tiles that give the stored numbers."""

from __future__ import annotations

import numpy as np
import pytest

from monk_framework import ParameterError, get_registry
from monk_framework.core.resources import DEFAULT_FRACTION, STORE_SHARE, Resources, format_bytes, parse_memory
from monk_framework.engine.reductions import kernel_sums
from monk_framework.two_sample import permutation_test, split_test
from monk_framework.two_sample.robust import robust_test

REG = get_registry()


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [
        (1024, 1024),
        ("64MB", 64 * 10**6),
        ("2GB", 2 * 10**9),
        ("512MiB", 512 * 2**20),
        ("1.5 GiB", int(1.5 * 2**30)),
        ("4k", 4000),
        ("1PB", 10**15),
        ("2 PiB", 2 * 2**50),
        ("+1", 1),
    ],
)
def test_sizes_are_read_in_decimal_and_binary_units(text, nbytes):
    assert parse_memory(text) == nbytes


@pytest.mark.parametrize("bad", ["lots", "-1GB", "0", 0, True, "2 parsecs", [1], "1e400", float("nan"), float("inf")])
def test_a_bad_size_is_refused_by_name(bad):
    with pytest.raises(ParameterError, match="max_memory"):
        parse_memory(bad)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("-2GB", r"more than 0 bytes; got '-2GB'"),
        ("-1", r"more than 0 bytes; got '-1'"),
        ("-0", r"more than 0 bytes; got '-0'"),
        # a unit it does not know is named, with the ones it knows ("cannot read '1XB'" said neither)
        ("3XB", r"unknown unit 'XB' in '3XB'; the units are B, KB, MB, GB, TB, PB \(powers of 1000\)"),
    ],
)
def test_a_negative_size_or_an_unknown_unit_is_told_what_is_wrong(bad, message):
    with pytest.raises(ParameterError, match=message):
        parse_memory(bad)


def test_sizes_beyond_float64_and_numpy_numbers_are_read_exactly():
    assert parse_memory(10**400) == 10**400  # an int count of bytes is never rounded through float
    assert parse_memory(np.int64(4096)) == 4096 and parse_memory(np.float32(1e9)) == 10**9
    # exact numbers are numbers ("must be a number of bytes ...; got Decimal" was false)
    from decimal import Decimal
    from fractions import Fraction

    assert parse_memory(Decimal("1e9")) == 10**9 and parse_memory(Fraction(3, 2) * 2**30) == int(1.5 * 2**30)
    with pytest.raises(ParameterError, match=r"max_memory must be a finite number of bytes; got Decimal\('NaN'\)"):
        parse_memory(Decimal("nan"))


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [
        (480, "480 bytes"),
        (1023, "1,023 bytes"),
        (3 * 2**10, "3.0 KiB"),
        (12 * 2**20, "12.0 MiB"),
        (2**31, "2.00 GiB"),
        (3 * 2**40, "3.00 TiB"),
        (int(2.5 * 2**50), "2.50 PiB"),
        (999 * 2**60, "999.00 EiB"),
        # from 1000 EiB on, an order of magnitude (a size from a count a user typed, -B 2**63)
        (2**71, "10^21 bytes"),
        (10**400, "10^400 bytes"),
        (float("inf"), "more bytes than float64 counts"),
    ],
)
def test_format_bytes_never_rounds_a_size_to_zero(nbytes, text):
    assert format_bytes(nbytes) == text


def test_the_budget_is_a_fraction_of_the_available_memory_unless_set_for_a_call(monkeypatch):
    monkeypatch.setattr("monk_framework.core.resources.available_memory", lambda: 10**9)
    assert Resources.of().budget == int(DEFAULT_FRACTION * 10**9)
    assert Resources.of("64MB").budget == 64 * 10**6 and Resources.of(1000).budget == 1000
    # beyond the machine ('1TB' on a 1 GB one) it would choose stored matrices that the
    # store's own check then refuses: cut to what one store may take
    assert Resources.of("1TB").budget == int(STORE_SHARE * 10**9)
    monkeypatch.setattr("monk_framework.core.resources.available_memory", lambda: None)
    assert Resources.of().budget is None and Resources.of().fits(1e30)
    assert Resources.of("1TB").budget == 10**12
    # a budget is stated in bytes, and nothing but bytes
    with pytest.raises(ParameterError, match="max_memory"):
        Resources.of("lots")
    for bad in (0, -5, 1.5, True, "64MB"):
        with pytest.raises(ParameterError, match="Resources.budget"):
            Resources(budget=bad)


class _Remote:
    remote = True

    def as_completed(self, fn, tasks, shared=None):  # pragma: no cover - never called here
        raise AssertionError


class _Here(_Remote):
    remote = False


def test_only_a_remote_backend_spreads_a_job_and_here_keeps_the_budget():
    remote = _Remote()
    spread = Resources.of("1MB", remote)
    assert spread.spread is remote and spread.budget == 10**6
    assert Resources.of("1MB", _Here()).spread is None and Resources.of("1MB").spread is None
    assert spread.here() == Resources(budget=10**6) and spread.here().spread is None
    assert Resources(budget=100).fits(100) and not Resources(budget=100).fits(101)


def test_the_engine_hears_of_the_budget_only_through_its_arguments():
    # one explicit channel: no context variable, global or thread-local carries a setting
    import ast
    from pathlib import Path

    import monk_framework

    root = Path(monk_framework.__file__).parent
    for path in [root / "core" / "resources.py", *sorted((root / "engine").glob("*.py"))]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert "ContextVar" not in names | imported, path
        assert not {"memory_budget", "spreading", "spread_over", "budgeted"} & (names | imported), path


def _calls():
    # every call whose engine chooses between stored and tiled (monk-bcd-fast and the
    # "mom" robust test hold only each block's Gram matrix, and choose nothing)
    gen = np.random.default_rng(11)
    X, Y = gen.normal(size=(40, 2)), gen.normal(0.4, 1.0, size=(36, 2))
    rbf = REG.get_kernel("rbf", sigma=1.0)
    mean, monk = REG.get_estimator("mean"), REG.get_estimator("monk-embedding", n_blocks=3)
    # (u-stat and v-stat choose nothing for rbf: its kernel sums are always tiles)
    calls = {
        f"estimate {name}": (lambda mm, name=name: REG.get_estimator(name).estimate(rbf, X, Y, rng=1, max_memory=mm))
        for name in ("monk-bcd", "monk-embedding-mmd")
    }
    ssk, S = REG.get_kernel("ssk", n=2), ["ACGT", "GATTACA", "CCGTA", "TTAG"] * 5
    calls["estimate u-stat, ssk"] = lambda mm: REG.get_estimator("u-stat").estimate(ssk, S, S[::-1], max_memory=mm)
    calls["embed"] = lambda mm: monk.embed(rbf, X, max_memory=mm)
    # (an embedding's norm and distance choose nothing: always row tiles, sized by the budget)
    calls["embedding witness"] = lambda mm: mean.embed(rbf, X).evaluate(Y, max_memory=mm)
    calls["permutation u-stat"] = lambda mm: permutation_test(X, Y, kernel=rbf, estimator="u-stat", n_permutations=20, rng=1, max_memory=mm)
    calls["permutation monk-bcd"] = lambda mm: permutation_test(
        X, Y, kernel=rbf, estimator=REG.get_estimator("monk-bcd", n_blocks=3, n_iter=5), n_permutations=5, rng=1, max_memory=mm
    )
    calls["split"] = lambda mm: split_test(X, Y, kernel=rbf, estimator="u-stat", n_permutations=20, rng=1, max_memory=mm)
    calls["robust dc"] = lambda mm: robust_test(X, Y, kernel=rbf, contamination=1, method="dc", n_permutations=20, rng=1, max_memory=mm)
    return calls


@pytest.mark.parametrize("call", sorted(_calls()))
def test_the_budget_of_a_call_reaches_every_choice_the_engine_makes(monkeypatch, call):
    # every stored-or-tiled choice asks the call's Resources: spy on them all, and find
    # the user's max_memory in each (and the default budget without it)
    seen: list[int | None] = []
    real_fits = Resources.fits

    def spy(self, nbytes):
        seen.append(self.budget)
        return real_fits(self, nbytes)

    monkeypatch.setattr(Resources, "fits", spy)
    monkeypatch.setattr("monk_framework.core.resources.available_memory", lambda: 4 * 10**9)
    run = _calls()[call]
    run(12345)
    assert seen and set(seen) == {12345}, call
    seen.clear()
    run(None)
    assert seen and set(seen) == {int(DEFAULT_FRACTION * 4 * 10**9)}, call


@pytest.mark.parametrize(("n", "m"), [(37, 23), (64, 64), (5, 90)])
@pytest.mark.parametrize("kernel", ["rbf:sigma=1.3", "quadratic", "ssk:n=2"])
def test_tiled_kernel_sums_equal_the_stored_ones(monkeypatch, n, m, kernel):
    # every kernel's sums from stored matrices (the path of a kernel computed whole, here
    # forced) and from tiles (every other kernel's, and any kernel's over the budget)
    from monk_framework import Kernel

    k = REG.resolve_kernel(kernel)
    gen = np.random.default_rng(n + m)
    if k.input_kind == "string":
        letters = np.array(list("ACGT"))
        X = ["".join(gen.choice(letters, size=int(gen.integers(3, 9)))) for _ in range(n)]
        Y = ["".join(gen.choice(letters, size=int(gen.integers(3, 9)))) for _ in range(m)]
    else:
        X, Y = gen.normal(size=(n, 3)), gen.normal(size=(m, 3))
    Xv, Yv = k.check_pair(X, Y)
    tiled = kernel_sums(k, Xv, Yv, resources=Resources(budget=64))
    assert kernel_sums(k, Xv, Yv, resources=Resources(budget=10**12)).tiled == (not k.computes_gram_whole())
    monkeypatch.setattr(Kernel, "computes_gram_whole", lambda self: True)
    stored = kernel_sums(k, Xv, Yv, resources=Resources(budget=10**12))
    assert not stored.tiled and tiled.tiled
    for field in ("xx", "yy", "xy", "trace_x", "trace_y", "max_diag"):
        assert getattr(tiled, field) == pytest.approx(getattr(stored, field), rel=1e-12, abs=1e-12), field
    # and the sums are the definitions'
    assert stored.xy == pytest.approx(k.gram(Xv, Yv).sum(), rel=1e-13)


@pytest.mark.parametrize("name", ["u-stat", "v-stat"])
def test_classical_estimates_over_the_budget_equal_the_stored_path(monkeypatch, name):
    from monk_framework import Kernel

    gen = np.random.default_rng(3)
    X, Y = gen.normal(size=(120, 4)), gen.normal(0.3, 1.0, size=(90, 4))
    est, kernel = REG.get_estimator(name), REG.get_kernel("rbf")
    tiled = est.estimate(kernel, X, Y, max_memory="4kB")
    assert est.estimate(kernel, X, Y).diagnostics["tiled"]  # rbf is summed in tiles within the budget too
    monkeypatch.setattr(Kernel, "computes_gram_whole", lambda self: True)  # as the SSK's
    stored = est.estimate(kernel, X, Y)
    assert tiled.diagnostics["tiled"] and not stored.diagnostics["tiled"]
    assert tiled.mmd2 == pytest.approx(stored.mmd2, rel=1e-10) and tiled.kernel_params == stored.kernel_params


@pytest.mark.parametrize(
    ("estimator", "relabel"),
    [("u-stat", "global"), ("monk-bcd-fast:n_blocks=5", "within-blocks"), ("monk-bcd-fast:n_blocks=5", "global"), ("monk-bcd:n_blocks=5,n_iter=20", "global")],
)
def test_a_forced_tiled_test_gives_the_stored_statistic_and_p_value(estimator, relabel):
    gen = np.random.default_rng(4)
    X, Y = gen.normal(size=(60, 2)), gen.normal(0.4, 1.0, size=(60, 2))
    args = dict(kernel="rbf:sigma=1", estimator=estimator)
    stored = permutation_test(X, Y, **args, n_permutations=99, rng=2, relabel=relabel)
    tiled = permutation_test(X, Y, **args, n_permutations=99, rng=2, relabel=relabel, max_memory="8kB")
    assert tiled.statistic == pytest.approx(stored.statistic, rel=1e-10)
    assert tiled.pvalue == stored.pvalue and tiled.reject == stored.reject


def test_split_and_robust_tests_take_the_budget_too():
    gen = np.random.default_rng(5)
    X, Y = gen.normal(size=(60, 2)), gen.normal(0.5, 1.0, size=(60, 2))
    a = split_test(X, Y, kernel="rbf:sigma=1", estimator="u-stat", n_permutations=49, rng=1)
    b = split_test(X, Y, kernel="rbf:sigma=1", estimator="u-stat", n_permutations=49, rng=1, max_memory="8kB")
    assert b.statistic == pytest.approx(a.statistic, rel=1e-10) and b.pvalue == a.pvalue
    c = robust_test(X, Y, kernel="rbf:sigma=1", contamination=2, n_permutations=49, rng=1)
    d = robust_test(X, Y, kernel="rbf:sigma=1", contamination=2, n_permutations=49, rng=1, max_memory="8kB")
    assert d.statistic == pytest.approx(c.statistic, rel=1e-10) and d.pvalue == c.pvalue


def test_monk_estimates_over_the_budget_run_matrix_free_with_the_same_value():
    gen = np.random.default_rng(6)
    X, Y = gen.normal(size=(80, 2)), gen.normal(0.4, 1.0, size=(80, 2))
    est = REG.get_estimator("monk-bcd", n_blocks=5, n_iter=30)
    kernel = REG.get_kernel("rbf", sigma=1.0)
    stored = est.estimate(kernel, X, Y, rng=1)
    tiled = est.estimate(kernel, X, Y, rng=1, max_memory="8kB")
    assert tiled.diagnostics["matrix_free"] and not stored.diagnostics["matrix_free"]
    assert tiled.mmd == pytest.approx(stored.mmd, rel=1e-10)


def test_reuse_freed_memory_keeps_every_number_and_says_whether_it_applied(registry):
    # an allocator setting: nothing computed may change, and it applies on glibc (Linux)
    import sys

    from monk_framework.core.resources import reuse_freed_memory

    g = np.random.default_rng(4)
    X, Y = g.normal(size=(60, 3)), g.normal(size=(50, 3))
    before = permutation_test(X, Y, kernel=registry.get_kernel("rbf"), estimator=registry.get_estimator("u-stat"), n_permutations=99, rng=1)
    applied = reuse_freed_memory()
    assert applied == sys.platform.startswith("linux")
    after = permutation_test(X, Y, kernel=registry.get_kernel("rbf"), estimator=registry.get_estimator("u-stat"), n_permutations=99, rng=1)
    assert (after.statistic, after.pvalue) == (before.statistic, before.pvalue)


def test_every_long_call_refuses_a_progress_that_is_not_callable_before_any_work(tmp_path):
    # else the first report, deep inside the work, fails with "'int' object is not callable"
    from monk_framework import aggregated_test, embed, estimate
    from monk_framework.app.experiments.base import run_experiment
    from monk_framework.app.experiments.exp1 import Exp1

    X = np.random.default_rng(0).normal(size=(20, 2))
    calls = {
        "permutation_test": lambda: permutation_test(X, X + 1, kernel="rbf", estimator="u-stat", n_permutations=9, progress=3),
        "split_test": lambda: split_test(X, X + 1, kernel="rbf", estimator="u-stat", n_permutations=9, progress=3),
        "robust_test": lambda: robust_test(X, X + 1, kernel="rbf:sigma=1", contamination=1, n_permutations=9, progress=3),
        "aggregated_test": lambda: aggregated_test(X, X + 1, n_permutations=9, progress=3),
        "estimate": lambda: estimate(X, X + 1, kernel="rbf", estimator="u-stat", progress=3),
        "embed": lambda: embed(X, kernel="rbf", estimator="mean", progress=3),
        "run_experiment": lambda: run_experiment(Exp1(), tmp_path / "out", progress=3),
    }
    for call in calls.values():
        with pytest.raises(ParameterError, match="progress must be None or a callable"):
            call()
    assert not (tmp_path / "out").exists()  # refused before the output folder was touched
    # a callable that cannot take the arguments it will be given fails there too, not at its first report
    with pytest.raises(ParameterError, match=r"progress must accept 3 arguments \(done, total, what\)"):
        estimate(X, X + 1, kernel="rbf", estimator="u-stat", progress=lambda done: None)
    with pytest.raises(ParameterError, match=r"progress must accept 3 arguments \(done, total, what\)"):
        permutation_test(X, X + 1, kernel="rbf", estimator="u-stat", n_permutations=9, progress=lambda: None)
    estimate(X, X + 1, kernel="rbf", estimator="u-stat", progress=lambda *args: None)  # any signature that binds them is taken
    estimate(X, X + 1, kernel="rbf", estimator="u-stat", progress=print)  # and a builtin


def test_check_fits_refuses_beyond_its_share_of_the_available_memory(monkeypatch):
    from monk_framework import ResourceError
    from monk_framework.core.resources import check_fits

    message = lambda need, avail, avail_bytes: f"wanted {need} of {avail} ({avail_bytes} bytes)"  # noqa: E731
    monkeypatch.setattr("monk_framework.core.resources.available_memory", lambda: 2**30)
    check_fits(2**29, message)  # exactly the share: fits
    with pytest.raises(ResourceError, match=r"^wanted 0.50 GiB of 0.50 GiB \(half of the 1.00 GiB free\) \(1073741824 bytes\)$"):
        check_fits(2**29 + 1, message)
    check_fits(0.9 * 2**30, message, share=0.9)
    monkeypatch.setattr("monk_framework.core.resources.available_memory", lambda: None)
    check_fits(2**60, message)  # unknown memory: nothing is refused


def test_the_memory_probe_is_read_again_once_its_reading_is_older_than_its_lifetime(monkeypatch):
    # one reading serves the checks of one small call; after MEMORY_READING_SECONDS the
    # machine is asked again, and a change in its answer is seen
    from monk_framework.core import resources

    answers = iter([2**30, 2**20])
    reads: list[int] = []
    monkeypatch.setattr(resources, "_mem_available", lambda: reads.append(1) or next(answers))
    monkeypatch.setattr(resources, "_rlimit_room", lambda: None)
    monkeypatch.setattr(resources, "_cgroup_room", lambda: None)
    clock = [100.0]
    monkeypatch.setattr(resources, "monotonic", lambda: clock[0])
    monkeypatch.setattr(resources, "_LAST_READING", [])
    assert resources.available_memory() == 2**30
    clock[0] += resources.MEMORY_READING_SECONDS / 2
    assert resources.available_memory() == 2**30 and len(reads) == 1
    clock[0] += resources.MEMORY_READING_SECONDS
    assert resources.available_memory() == 2**20 and len(reads) == 2
    clock[0] -= 1.0  # a clock that went back (it cannot, but) is a stale reading too
    monkeypatch.setattr(resources, "_mem_available", lambda: reads.append(1) or 2**25)
    assert resources.available_memory() == 2**25 and len(reads) == 3


def test_an_embedding_distance_tells_its_progress_and_checks_the_kernel_contract(registry):
    import attrs

    from monk_framework import Embedding, KernelContractError

    gen = np.random.default_rng(9)
    X, Y = gen.normal(size=(60, 2)), gen.normal(0.4, 1.0, size=(50, 2))
    kernel = REG.get_kernel("rbf", sigma=1.0)
    ex, ey = (Embedding(kernel=kernel, sample=S, weights=np.full(len(S), 1 / len(S)), estimator="custom") for S in (X, Y))
    told: list[tuple[float, float, str]] = []
    d = ex.distance(ey, max_memory="1kB", progress=lambda *t: told.append(t))
    assert d == pytest.approx(ex.distance(ey), rel=1e-12)
    total = 60 * 61 / 2 + 50 * 51 / 2 + 60 * 50
    assert {t[1:] for t in told} == {(total, "embedding distance")}
    assert [t[0] for t in told] == sorted(t[0] for t in told) and told[-1][0] == total
    # a kernel whose diagonal disagrees with its Gram matrix is named, as by symmetric_gram
    liar = attrs.evolve(kernel)
    object.__setattr__(liar, "compute_diag", lambda Z: 2.0 * np.ones(len(Z)))
    bad = Embedding(kernel=liar, sample=X, weights=np.full(60, 1 / 60), estimator="custom")
    with pytest.raises(KernelContractError, match="compute_diag gives k"):
        bad.norm()


def test_an_embedding_of_a_kernel_computed_whole_reads_its_whole_gram_matrices(monkeypatch):
    # the SSK's tiles would each rebuild its per-string tables: its distance comes from
    # whole matrices, the same number as from tiles
    from monk_framework import Kernel

    S = ["ACGTTGCA", "GATTACA", "CCGTACGG", "TTAGGCA", "ACGACGT"] * 3
    T = ["GGCATTA", "ACGTACGT", "TTTAGCA", "CAGTCAG"] * 3
    kernel = REG.get_kernel("ssk", n=3)
    mean = REG.get_estimator("mean")
    a, b = mean.embed(kernel, S), mean.embed(kernel, T)
    built: list[int] = []
    real = type(kernel).symmetric_gram
    monkeypatch.setattr(type(kernel), "symmetric_gram", lambda self, X, **kw: built.append(len(X)) or real(self, X, **kw))
    told: list[tuple[float, float, str]] = []
    whole = a.distance(b, progress=lambda *t: told.append(t))
    assert built == [15, 12] and told[-1][0] == told[-1][1] == 15 * 16 / 2 + 12 * 13 / 2 + 15 * 12
    monkeypatch.setattr(Kernel, "computes_gram_whole", lambda self: False)
    assert a.distance(b) == pytest.approx(whole, rel=1e-12)


@pytest.mark.parametrize("max_memory", [None, "1kB"])
def test_every_embedding_reduction_tells_its_progress_and_keeps_its_number(max_memory):
    from monk_framework import Embedding, MonkError

    gen = np.random.default_rng(10)
    X, Y, Z = gen.normal(size=(70, 2)), gen.normal(0.4, 1.0, size=(50, 2)), gen.normal(size=(90, 2))
    kernel = REG.get_kernel("rbf", sigma=1.0)
    ex, ey = (Embedding(kernel=kernel, sample=S, weights=gen.random(len(S)), estimator="custom") for S in (X, Y))
    K = lambda A, B: kernel(A, B)  # noqa: E731
    for call, value, total, what in [
        (lambda p: ex.evaluate(Z, max_memory=max_memory, progress=p), K(Z, X) @ ex.weights, 90 * 70, "witness values"),
        (lambda p: ex.inner(ey, max_memory=max_memory, progress=p), ex.weights @ K(X, Y) @ ey.weights, 70 * 50, "inner product"),
        (lambda p: ex.norm(max_memory=max_memory, progress=p), np.sqrt(ex.weights @ K(X, X) @ ex.weights), 70 * 71 / 2, "inner product"),
    ]:
        told: list[tuple[float, float, str]] = []
        np.testing.assert_allclose(call(lambda *t, told=told: told.append(t)), value, rtol=1e-12)
        assert told and {t[1:] for t in told} == {(total, what)} and told[-1][0] == total, what
        assert [t[0] for t in told] == sorted(t[0] for t in told)
        np.testing.assert_array_equal(call(None), call(lambda *t: None))  # telling changes nothing
    with pytest.raises(MonkError, match="progress must be None or a callable"):
        ex.norm(progress="yes")
