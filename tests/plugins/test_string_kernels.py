"""The string subsequence kernel against definitions written independently of the plugin.

Two references live here and share no code with ``monk_plugins.ssk_core``:

* ``enumerate_ssk``: the definition itself (every index tuple, its span), for tiny strings;
* ``lodhi_ssk``: Lodhi et al.'s recursion with the auxiliary K'' (JMLR 2002, §3.1),
  plain Python, O(n |s| |t|) per pair.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from monk_framework.core.errors import DataError, ParameterError
from monk_framework.engine import memory as engine_memory
from monk_framework.engine.memory import CHUNK_BYTES
from monk_framework.numerics.compiled import compiled_available, using_compiled
from monk_plugins import ssk_core as core
from monk_plugins import ssk_pairs
from monk_plugins.string_kernels import plan, ssk_levels


def enumerate_ssk(s: str, t: str, n: int, lam: float) -> float:
    def phi(x: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for idx in itertools.combinations(range(len(x)), n):
            u = "".join(x[i] for i in idx)
            out[u] = out.get(u, 0.0) + lam ** (idx[-1] - idx[0] + 1)
        return out

    a, b = phi(s), phi(t)
    return sum(v * b.get(u, 0.0) for u, v in a.items())


def lodhi_ssk(s: str, t: str, n: int, lam: float) -> list[float]:
    """K_1..K_n(s, t) by the recursion of Lodhi et al. (K'_i and K''_i over prefixes)."""
    ls, lt = len(s), len(t)
    # Kp[i][a][b] = K'_i(s[:a], t[:b]); K'_0 = 1
    Kp = [[[1.0] * (lt + 1) for _ in range(ls + 1)]]
    for i in range(1, n):
        cur = [[0.0] * (lt + 1) for _ in range(ls + 1)]
        for a in range(i, ls + 1):
            x = s[a - 1]
            kpp = 0.0  # K''_i(s[:a], t[:b]) built along b
            for b in range(i, lt + 1):
                kpp = lam * kpp + (lam * lam * Kp[i - 1][a - 1][b - 1] if t[b - 1] == x else 0.0)
                cur[a][b] = lam * cur[a - 1][b] + kpp
        Kp.append(cur)
    out = []
    for i in range(1, n + 1):
        # K_i(sx, t) = K_i(s, t) + Σ_{j: t_j = x} λ² K'_{i−1}(s, t[:j−1])
        total = 0.0
        for a in range(1, ls + 1):
            x = s[a - 1]
            for b in range(1, lt + 1):
                if t[b - 1] == x:
                    total += lam * lam * Kp[i - 1][a - 1][b - 1]
        out.append(total)
    return out


def random_strings(rng, alphabet: str, count: int, lengths: tuple[int, int]) -> list[str]:
    return ["".join(rng.choice(list(alphabet), rng.integers(lengths[0], lengths[1] + 1))) for _ in range(count)]


def reference_gram(S, T, n, lam, *, cumulative=False, normalize=False):
    levels = range(1, n + 1) if cumulative else [n]

    def value(s, t):
        ks = lodhi_ssk(s, t, n, lam)
        return sum(ks[k - 1] for k in levels)

    K = np.array([[value(s, t) for t in T] for s in S])
    if normalize:
        ds = np.array([value(s, s) for s in S])
        dt = np.array([value(t, t) for t in T])
        with np.errstate(divide="ignore", invalid="ignore"):
            K = np.where(np.outer(ds, dt) > 0, K / np.sqrt(np.outer(ds, dt)), 0.0)
    return K


def test_lodhi_reference_agrees_with_the_definition():
    rng = np.random.default_rng(0)
    for _ in range(30):
        s, t = random_strings(rng, "abc", 2, (0, 7))
        n = int(rng.integers(1, 5))
        lam = float(rng.uniform(0.1, 1.0))
        ref = lodhi_ssk(s, t, n, lam)
        assert ref[-1] == pytest.approx(enumerate_ssk(s, t, n, lam), rel=1e-12, abs=1e-300)


def test_lodhi_worked_example(registry):
    # Lodhi et al. 2002, §2: cat, car, bat, bar with n = 2; features c-a, c-t, a-t, b-a, ...
    lam = 0.7
    k = registry.get_kernel("ssk", n=2, lam=lam, normalize=False)
    K = k.gram(["cat", "car", "bat", "bar"])
    l4, l6 = lam**4, lam**6
    assert K[0, 0] == pytest.approx(2 * l4 + l6, rel=1e-14)
    assert K[0, 1] == pytest.approx(l4, rel=1e-14)  # only "ca" is shared
    assert K[0, 2] == pytest.approx(l4, rel=1e-14)  # only "at"
    assert K[0, 3] == 0.0
    kn = registry.get_kernel("ssk", n=2, lam=lam)
    assert kn.gram(["cat", "car"])[0, 1] == pytest.approx(1.0 / (2.0 + lam**2), rel=1e-14)


@pytest.mark.parametrize("alphabet", ["ab", "ACGT", "abcdefghijklmnopqrstuvwxyz"])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8])
def test_gram_equals_the_reference_recursion(registry, alphabet, n):
    rng = np.random.default_rng(len(alphabet) * 10 + n)
    S = random_strings(rng, alphabet, 5, (1, 40)) + ["", alphabet[0] * max(n - 1, 0)]
    T = random_strings(rng, alphabet, 3, (20, 80))
    for lam in (0.3, 1.0):
        for normalize in (False, True):
            k = registry.get_kernel("ssk", n=n, lam=lam, normalize=normalize)
            ref = reference_gram(S, S, n, lam, normalize=normalize)
            if normalize:
                np.fill_diagonal(ref, [1.0 if lodhi_ssk(s, s, n, lam)[-1] > 0 else 0.0 for s in S])
            np.testing.assert_allclose(k.gram(S), ref, rtol=1e-10, atol=1e-300)
            np.testing.assert_allclose(k.gram(S, T), reference_gram(S, T, n, lam, normalize=normalize), rtol=1e-10, atol=1e-300)


@pytest.mark.parametrize("size", [2, 4, 26])
@pytest.mark.parametrize("programme", ["sparse", "dense"])
@pytest.mark.parametrize("compiled_loops", [True, False], ids=["compiled", "plain-python"])
def test_both_paths_equal_the_reference_at_every_level(size, programme, compiled_loops, monkeypatch):
    # the feature path and the pair programme, forced, on the same strings
    rng = np.random.default_rng(size)
    alphabet = "abcdefghijklmnopqrstuvwxyz"[:size]
    S = random_strings(rng, alphabet, 4, (0, 30))
    letters = sorted(alphabet)
    codes = core.encode(S, letters)
    n = 6 if size < 26 else 3
    lam = 0.45
    ref = {k: np.array([[lodhi_ssk(s, t, n, lam)[k - 1] for t in S] for s in S]) for k in range(1, n + 1)}
    tables = core.FeatureTables(codes, size, range(1, n + 1), lam)
    feats = core.feature_gram_levels(tables, None, range(1, n + 1))
    if programme == "dense":  # the overflow guard sends every pair to the dense programme
        monkeypatch.setattr(ssk_pairs, "SCALED_EXPONENT_LIMIT", -1.0)
    rows, cols = np.divmod(np.arange(16), 4)
    with using_compiled(compiled_loops):
        pairs = ssk_pairs.pair_levels(codes, codes, rows, cols, n, lam)
    for k in range(1, n + 1):
        np.testing.assert_allclose(feats[k], ref[k], rtol=1e-10, atol=1e-300)
        np.testing.assert_allclose(pairs[:, k - 1].reshape(4, 4), ref[k], rtol=1e-10, atol=1e-300)


def test_long_strings_and_small_lambda_take_the_dense_programme_exactly(registry):
    # (|s| + |t|) ln(1/λ) > 600: λ^{−(i+j)} would overflow, so these pairs avoid the scaling
    rng = np.random.default_rng(12)
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    S = random_strings(rng, alphabet, 2, (150, 170)) + random_strings(rng, alphabet, 2, (5, 20))
    lam, n = 0.05, 3
    assert not ssk_pairs.uses_sparse(150, 150, lam) and ssk_pairs.uses_sparse(20, 20, lam)
    k = registry.get_kernel("ssk", n=n, lam=lam, normalize=False)
    ref = np.array([[lodhi_ssk(s, t, n, lam)[-1] for t in S] for s in S])
    np.testing.assert_allclose(k.gram(S), ref, rtol=1e-10, atol=1e-300)


def test_explicit_features_in_lexicographic_order():
    rng = np.random.default_rng(5)
    S = random_strings(rng, "ACG", 3, (3, 9))
    lam, n = 0.6, 3
    T = core.FeatureTables(core.encode(S, "ACG"), 3, [n], lam)
    F = T.features(n, slice(None))
    F = core.unsort(F, T.order, np.arange(F.shape[1]))[:, core.lexicographic_order(3, n)]
    for row, s in zip(F, S):
        expected = []
        for u in itertools.product("ACG", repeat=n):
            total = sum(lam ** (idx[-1] - idx[0] + 1) for idx in itertools.combinations(range(len(s)), n) if all(s[i] == c for i, c in zip(idx, u)))
            expected.append(total)
        np.testing.assert_allclose(row, expected, rtol=1e-12, atol=1e-300)


def test_edge_cases(registry):
    k = registry.get_kernel("ssk", n=3, lam=0.5)
    K = k.gram(["", "ab", "abc", "abc", "xyzxyz"])
    # the empty string and one shorter than n have no subsequence of length n: 0, also on the diagonal
    assert np.all(K[0] == 0.0) and np.all(K[1] == 0.0)
    assert K[2, 2] == 1.0 and K[2, 3] == pytest.approx(1.0, rel=1e-14)  # identical strings
    assert K[4, 4] == 1.0
    np.testing.assert_array_equal(k.diag(["", "ab", "abc"]), [0.0, 0.0, 1.0])
    # n = 1 is a weighted letter count: λ² Σ_a c_a(s) c_a(t)
    k1 = registry.get_kernel("ssk", n=1, lam=0.3, normalize=False)
    assert k1.gram(["aab", "abbb"])[0, 1] == pytest.approx(0.09 * (2 * 1 + 1 * 3), rel=1e-14)
    assert np.array_equal(K, K.T)


def test_a_sample_too_short_for_n_is_refused_and_an_empty_one_named(registry):
    from monk_framework import DataError, ParameterError

    k = registry.get_kernel("ssk", n=5)
    with pytest.raises(ParameterError, match=r"every string of X is shorter \(the longest has 3 characters\).* Use n <= 3\."):
        k.check_sample(["ACG", "AC"])
    # no n helps a sample of empty strings: it said "Use n <= 0", a value n refuses
    with pytest.raises(DataError, match=r"^Every string of Y is empty: they have no subsequences"):
        k.check_sample(["", ""], name="Y")


def test_strings_shorter_than_n_are_said_to_be_one_point_of_feature_0(registry):
    # some strings shorter than n: each has the feature 0 (k = 0 with every string, its
    # diagonal 0 too), which the kernel computes and a warning says
    import warnings

    from monk_framework import DataWarning

    k = registry.get_kernel("ssk", n=4)
    sample = ["ACGTAC", "AC", "GGTACA", "T"]
    with pytest.warns(
        DataWarning,
        match=r"^2 of the 4 strings of X are shorter than n = 4 \(the shortest has 1 character\)"
        r": .* they get the feature 0: the kernel sees them as one and the same point, orthogonal .* "
        r"cumulative=True .*, or drop them\.$",
    ):
        K = k.gram(sample)
    assert np.all(K[[1, 3]] == 0.0) and np.all(K[:, [1, 3]] == 0.0) and K[0, 0] == 1.0
    with pytest.warns(DataWarning, match=r"^1 of the 2 strings of Y is shorter than n = 4 .*: the kernel sees it as orthogonal"):
        k.check_sample(["ACG", "ACGT"], name="Y")
    # no warning where nothing is short: cumulative counts every length from 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        registry.get_kernel("ssk", n=4, cumulative=True).check_sample(sample)
        k.check_sample(["ACGT", "ACGTA"])


def test_cumulative_is_the_sum_of_levels_then_normalised(registry):
    rng = np.random.default_rng(9)
    S = random_strings(rng, "ACGT", 6, (2, 25))
    k = registry.get_kernel("ssk", n=4, lam=0.5, cumulative=True)
    np.testing.assert_allclose(k.gram(S), reference_gram(S, S, 4, 0.5, cumulative=True, normalize=True), rtol=1e-10)
    raw = registry.get_kernel("ssk", n=4, lam=0.5, cumulative=True, normalize=False)
    levels = sum(registry.get_kernel("ssk", n=m, lam=0.5, normalize=False).gram(S) for m in range(1, 5))
    np.testing.assert_allclose(raw.gram(S), levels, rtol=1e-12)


def test_shogun_convention_matches_strkernels_published_example(registry):
    # strkernels' README: SubsequenceStringKernel(maxlen=3, ssk_lambda=0.5) on these four
    S = ["ATCG", "ATGG", "TACG", "GCTA"]
    K = registry.get_kernel("ssk", n=3, lam=0.5, cumulative=True).gram(S)
    assert K[0, 1] == pytest.approx(0.74037191, abs=1e-8)
    assert K[0, 2] == pytest.approx(0.91640867, abs=1e-8)
    assert K[2, 3] == pytest.approx(0.84210526, abs=1e-8)


def test_rare_letters_take_the_pair_programme_only_where_shared(registry):
    rng = np.random.default_rng(3)
    S = random_strings(rng, "ACGT", 60, (20, 30))
    S[3] = S[3][:5] + "N" + S[3][6:]
    S[7] = S[7][:9] + "N" + S[7][10:]
    S[11] = S[11][:2] + "R" + S[11][3:]
    p = plan(S, None, [4], 0.5)
    if compiled_available():  # as plain Python the pair programme costs more than the features
        assert p.main == ["A", "C", "G", "T"] and set(p.rare) == {"N", "R"}
    grams, _ = ssk_levels(S, None, [4], 0.5)
    sub = [3, 7, 11, 0, 1]
    ref = np.array([[lodhi_ssk(S[i], S[j], 4, 0.5)[-1] for j in sub] for i in sub])
    np.testing.assert_allclose(grams[4][np.ix_(sub, sub)], ref, rtol=1e-10)
    assert np.array_equal(grams[4], grams[4].T)


@pytest.mark.parametrize("normalize", [False, True])
def test_a_rectangular_gram_with_rare_letters_takes_its_self_values_from_the_same_tables(registry, normalize):
    # X and Y hold rare letters, some shared across the samples and some not: the
    # normalisation's K(s, s) come from the cross plan's tables and pair programme
    rng = np.random.default_rng(13)
    X = random_strings(rng, "ACGT", 40, (15, 30))
    Y = random_strings(rng, "ACGT", 30, (15, 30))
    X[2] = X[2][:4] + "N" + X[2][5:]
    X[5] = X[5][:3] + "NN" + X[5][5:]
    Y[1] = Y[1][:6] + "N" + Y[1][7:]
    Y[4] = Y[4][:2] + "R" + Y[4][3:]
    k = registry.get_kernel("ssk", n=3, lam=0.6, normalize=normalize)
    K = k.gram(X, Y)
    rows, cols = [2, 5, 0, 9], [1, 4, 0, 7]
    ref = reference_gram([X[i] for i in rows], [Y[j] for j in cols], 3, 0.6, normalize=normalize)
    np.testing.assert_allclose(K[np.ix_(rows, cols)], ref, rtol=1e-12, atol=1e-300)
    # the same self-values as the kernel's own diagonal programme, to round-off
    if normalize:
        raw = registry.get_kernel("ssk", n=3, lam=0.6, normalize=False)
        whole = raw.gram(X, Y) / np.sqrt(np.outer(np.diag(raw.gram(X)), np.diag(raw.gram(Y))))
        np.testing.assert_allclose(K, whole, rtol=1e-13)


def test_the_gram_of_a_sample_with_itself_is_the_symmetric_gram(registry):
    rng = np.random.default_rng(14)
    S = random_strings(rng, "ACGT", 12, (5, 30)) + ["AC", ""]
    for normalize in (False, True):
        k = registry.get_kernel("ssk", n=3, lam=0.5, normalize=normalize)
        same = k.gram_tile(S, S)  # the contract check asks for k(Z, Z) as a tile
        assert np.array_equal(same, k.gram(S))
        assert np.array_equal(same, same.T)


@pytest.mark.parametrize("lam", [0.5, 0.37, 1.0])
@pytest.mark.parametrize("shape", [(40, 3, 16), (1, 2, 4), (0, 3, 4), (5000, 1, 1)])
def test_the_compiled_decayed_prefix_gives_the_reference_bits(lam, shape):
    X = np.random.default_rng(len(shape) + shape[0]).random(shape)
    got = core.decayed_prefix(X, lam)
    assert np.array_equal(got, core.decayed_prefix_reference(X, lam))
    if shape[0] > 1:  # and the definition R[j] = Σ_{j′<j} λ^{j−j′} X[j′]
        j = shape[0] - 1
        direct = sum(lam ** (j - i) * X[i] for i in range(j))
        np.testing.assert_allclose(got[j], direct, rtol=1e-10)
    with using_compiled(False):
        assert np.array_equal(core.decayed_prefix(X, lam), got)


def test_encoding_reads_every_code_point():
    letters = ["A", "C", "é", "\U0001f600"]
    S = ["", "ACGT", "é\U0001f600xA", "\ud800A", "a" * 3]
    index = {c: i for i, c in enumerate(letters)}
    for s, codes in zip(S, core.encode(S, letters)):
        assert codes.dtype == np.int64
        assert codes.tolist() == [index.get(c, -1) for c in s]
    assert [c.tolist() for c in core.encode(["AC"], [])] == [[-1, -1]]


@pytest.mark.skipif(not compiled_available(), reason="as plain Python the pair programme loses to the features")
def test_large_alphabet_uses_the_pair_programme():
    rng = np.random.default_rng(4)
    S = random_strings(rng, "abcdefghijklmnopqrstuvwxyz", 10, (30, 40))
    assert plan(S, None, [5], 0.5).path == "pairs"
    assert plan(random_strings(rng, "ACGT", 10, (30, 40)), None, [5], 0.5).path == "features"


def test_parameters_and_inputs_are_checked(registry):
    with pytest.raises(ParameterError, match="'n'"):
        registry.get_kernel("ssk", n=0)
    with pytest.raises(ParameterError, match="'lam'"):
        registry.get_kernel("ssk", lam=1.5)
    with pytest.raises(ParameterError, match="'lam'"):
        registry.get_kernel("ssk", lam=0.0)
    k = registry.get_kernel("ssk")
    with pytest.raises(DataError, match="needs strings"):
        k.gram(np.ones((3, 2)))
    with pytest.raises(DataError, match="needs strings"):
        k.gram(["ab", 3])


def test_memory_of_the_feature_tables_is_bounded(monkeypatch):
    # with too little memory for any feature alphabet, the pair programme is chosen
    import monk_plugins.string_kernels as sk

    monkeypatch.setattr(engine_memory, "available_memory", lambda: 1000)
    S = ["ACGTACGTAC", "GGTACCA"]
    assert sk.plan(S, None, [3], 0.5).path == "pairs"
    grams, _ = sk.ssk_levels(S, None, [3], 0.5)
    assert grams[3][0, 1] == pytest.approx(lodhi_ssk(S[0], S[1], 3, 0.5)[-1], rel=1e-12)
    assert math.isfinite(grams[3].sum())


def test_features_that_fit_are_built_batch_by_batch_and_the_tables_dropped(monkeypatch):
    rng = np.random.default_rng(21)
    S = random_strings(rng, "ACG", 9, (1, 60))
    codes = core.encode(S, "ACG")
    levels = [1, 2, 3, 4]
    T = core.FeatureTables(codes, 3, levels, 0.7)
    assert T.full is not None and T.batches == []  # no string's tables kept
    monkeypatch.setitem(CHUNK_BYTES, "feature-block", 64)  # too small: the tables are kept
    kept = core.FeatureTables(codes, 3, levels, 0.7)
    assert kept.full is None and kept.batches
    for k in levels:
        whole = T.features(k, slice(None))
        np.testing.assert_allclose(kept.features(k, slice(None)), whole, rtol=1e-14, atol=1e-300)
        width = 3 ** (k // 2)
        np.testing.assert_array_equal(T.features(k, slice(1, 2)), whole[:, width : 2 * width])
        np.testing.assert_allclose(core.feature_row_norms(kept, k), core.feature_row_norms(T, k), rtol=1e-13)


def test_many_long_strings_keep_the_feature_path_within_the_memory_budget(monkeypatch):
    # 300 strings of 1000 letters: every string's tables (192 MB) exceed a 120 MB budget,
    # one batch's tables and the features (82 MB) do not
    import monk_plugins.string_kernels as sk

    rng = np.random.default_rng(22)
    S = ["".join(rng.choice(list("ACGT"), 1000)) for _ in range(300)]
    assert core.feature_bytes_for_lengths([1000] * 300, 4, [5]) < 120e6 < 8.0 * 300 * 1000 * (64 + 16)
    monkeypatch.setattr(engine_memory, "available_memory", lambda: 480e6)
    assert sk.plan(S, None, [5], 0.5).path == "features"
    grams, _ = sk.ssk_levels(S, None, [5], 0.5)
    picked = [0, 150, 299]
    codes = core.encode([S[i] for i in picked], "ACGT")
    rows, cols = np.triu_indices(3)
    by_pairs = ssk_pairs.pair_levels(codes, codes, rows, cols, 5, 0.5)[:, 4]
    np.testing.assert_allclose(grams[5][np.ix_(picked, picked)][rows, cols], by_pairs, rtol=1e-10)


def test_the_pair_programme_of_a_symmetric_gram_runs_in_bands_the_engine_counts(registry, monkeypatch):
    # 26 letters: every pair goes through the pair programme, in bands of rows that the
    # engine's runner spreads over its threads and counts for the progress display
    import monk_plugins.string_kernels as sk
    from monk_framework.engine.kernel_values import gram_matrix

    rng = np.random.default_rng(23)
    S = random_strings(rng, "abcdefghijklmnopqrstuvwxyz", 60, (20, 40))
    k = registry.get_kernel("ssk", n=4, lam=0.6)
    monkeypatch.setattr(engine_memory, "available_memory", lambda: 1000)  # no feature tables fit: all pairs
    assert k.plan(S).path == "pairs"
    whole = k.gram(S)  # one band holds every pair
    monkeypatch.setattr(sk, "PAIRS_PER_BAND", 50)
    told: list[tuple[float, float, str]] = []
    banded = gram_matrix(k, S, report=lambda done, total, what: told.append((done, total, what)))
    assert np.array_equal(banded, whole)  # each pair's value does not depend on its band
    done = sorted(t[0] for t in told)
    assert len(told) >= 12 and done[-1] == told[0][1] == 60 * 61 / 2 and {t[2] for t in told} == {"Gram matrix"}
    ref = reference_gram(S[:4], S[:4], 4, 0.6, normalize=True)
    np.fill_diagonal(ref, 1.0)
    np.testing.assert_allclose(banded[:4, :4], ref, rtol=1e-10)


@pytest.mark.parametrize("normalize", [True, False])
def test_the_pair_programme_of_a_rectangular_gram_runs_in_bands_the_engine_counts(registry, monkeypatch, normalize):
    # k(X, Y) of an estimate is a third of its stored matrices: its pair programme runs in
    # bands of rows of X too, told as they finish, and the values do not depend on them
    import monk_plugins.string_kernels as sk
    from monk_framework.engine.kernel_values import gram_matrix

    rng = np.random.default_rng(25)
    S = random_strings(rng, "abcdefghijklmnopqrstuvwxyz", 70, (20, 40))
    X, Y = S[:40], S[40:]
    k = registry.get_kernel("ssk", n=4, lam=0.6, normalize=normalize)
    monkeypatch.setattr(engine_memory, "available_memory", lambda: 1000)  # no feature tables fit: all pairs
    assert k.plan(X, Y).path == "pairs"
    whole = k.gram(X, Y)
    monkeypatch.setattr(sk, "PAIRS_PER_BAND", 40)
    told: list[tuple[float, float, str]] = []
    banded = gram_matrix(k, X, Y, report=lambda done, total, what: told.append((done, total, what)))
    assert np.array_equal(banded, whole)
    done = [t[0] for t in told]
    assert len(told) >= 10 and done == sorted(done) and done[-1] == told[0][1] == 40 * 30
    ref = reference_gram(X[:3], Y[:3], 4, 0.6, normalize=normalize)
    np.testing.assert_allclose(banded[:3, :3], ref, rtol=1e-10)


def test_a_gram_matrix_from_features_alone_is_one_band(registry):
    from monk_framework.engine.kernel_values import gram_matrix

    S = random_strings(np.random.default_rng(24), "ACGT", 30, (10, 20))
    told: list[tuple[float, float, str]] = []
    K = gram_matrix(registry.get_kernel("ssk", n=3), S, report=lambda *t: told.append(t))
    assert told == [(30 * 31 / 2, 30 * 31 / 2, "Gram matrix")]
    assert np.array_equal(K, registry.get_kernel("ssk", n=3).gram(S))


def test_the_feature_tables_of_a_gram_matrix_are_counted_batch_by_batch(registry, monkeypatch):
    # long DNA strings spend seconds building their tables: each batch is a step of the
    # progress, in order, and the matrix is the one built without counting
    from monk_framework.engine.kernel_values import gram_matrix

    S = random_strings(np.random.default_rng(26), "ACGT", 40, (30, 60))
    k = registry.get_kernel("ssk", n=4, lam=0.7)
    whole = k.gram(S)
    monkeypatch.setattr(core, "TABLE_BATCH_CELLS", 60 * 16 * 3)  # batches of 3 strings
    told: list[tuple[float, float, str]] = []
    K = gram_matrix(k, S, report=lambda *t: told.append(t))
    np.testing.assert_allclose(K, whole, rtol=1e-13)
    done = [t[0] for t in told]
    assert len(told) == 14 and done == sorted(done) and done[-1] == told[0][1] == 40 * 41 / 2
    np.testing.assert_allclose(K[:3, :3], reference_gram(S[:3], S[:3], 4, 0.7, normalize=True), rtol=1e-10)


def test_shared_letter_pairs_are_counted_in_bands_without_the_full_mask(monkeypatch):
    import monk_plugins.string_kernels as sk

    rng = np.random.default_rng(0)
    for sym in (True, False):
        Hx = (rng.random((300, 4)) < 0.1).astype(float)
        Hy = Hx if sym else (rng.random((200, 4)) < 0.1).astype(float)
        brute = sum(bool(Hx[i] @ Hy[j] > 0) for i in range(len(Hx)) for j in range(len(Hy)) if not sym or i <= j)
        monkeypatch.setitem(CHUNK_BYTES, "count-band", 8 * 7 * len(Hy))  # bands of 7 rows
        assert sk._shared_count(Hx, Hy, sym) == brute


def test_a_decay_whose_weights_underflow_is_refused_not_turned_into_zeros(registry):
    from monk_framework import ParameterError

    with pytest.raises(ParameterError, match=r"n = 3 and lam = 1e-300: lam\^\(2n\) underflows.*Use lam >= 5.303437e-52"):
        registry.get_kernel("ssk", n=3, lam=1e-300)
    # a length n no string reaches is named as the cause too, with the largest n lam allows
    with pytest.raises(ParameterError, match=r"n = 1,000,000,000 and lam = 0.5: .*Use n <= 511 .* or lam >= 0.9999996"):
        registry.get_kernel("ssk", n=10**9, lam=0.5)
    # just above the bound every value is positive and the normalised diagonal is 1
    kernel = registry.get_kernel("ssk", n=3, lam=1e-51)
    K = kernel.gram(["ACGTAC", "GGTACA"])
    assert (np.diag(K) == 1.0).all() and K.min() >= 0.0


def test_an_ssk_whose_n_exceeds_every_string_of_a_sample_refuses_it(registry):
    # every feature vector would be 0: MMD^2 = 0 and p = 1 whatever the strings, a wrong answer
    kernel = registry.get_kernel("ssk", n=5)
    X, Y = ["ACG", "AC", "GT"], ["ACGTACG", "CGTTA"]
    for run in (lambda: registry.get_estimator("v-stat").estimate(kernel, X, Y), lambda: kernel.gram(X)):
        with pytest.raises(
            ParameterError,
            match=r"'n' parameter of SubsequenceKernel is 5, but every string of X is "
            r"shorter \(the longest has 3 characters\).*Use n <= 3",
        ):
            run()
    # one long enough string is a sample: the short ones are its zero vectors, as defined
    assert registry.get_estimator("v-stat").estimate(kernel, ["ACG", "ACGTA"], Y).mmd2 > 0
    # cumulative counts every length from 1: any nonempty string has features
    assert registry.get_kernel("ssk", n=5, cumulative=True).gram(X).diagonal().tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("cumulative", [False, True])
def test_the_normalised_diagonal_is_whether_a_string_is_long_enough_as_the_programme_says(registry, cumulative):
    # compute_diag of the normalised SSK ran the whole dynamic programme to learn k(s, s) > 0;
    # it is 1 exactly for strings with a subsequence of the shortest length counted
    strings = ["", "A", "AC", "ACG", "ACGT", "TTTTT", "GATTACA" * 40]
    for n in (1, 3, 5):
        for lam in (0.05, 0.5, 1.0):
            kernel = registry.get_kernel("ssk", n=n, lam=lam, cumulative=cumulative)
            by_programme = (kernel._self_values(strings) > 0).astype(float)
            np.testing.assert_array_equal(kernel.compute_diag(strings), by_programme)
            np.testing.assert_array_equal(np.diag(kernel.gram(strings)), by_programme)
