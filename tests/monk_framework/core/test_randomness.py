"""One seed, one tree of streams: each part of a computation draws from its own child."""

from __future__ import annotations

import numpy as np
import pytest

from monk_framework import ParameterError, get_registry
from monk_framework.app.datasets import get_dataset
from monk_framework.core.randomness import PART, child, generator, root, seed_of, stable_int, stream
from monk_framework.two_sample import permutation_test, split_test

REG = get_registry()


def test_an_int_seed_roots_a_tree_whose_parts_are_its_children():
    seq = root(7)
    assert seed_of(seq) == 7
    for name, keys in PART.items():
        part = stream(seq, name)
        assert part.spawn_key == keys and part.entropy == 7
    # the children are what SeedSequence.spawn gives, whatever was spawned before
    assert child(seq, 1).generate_state(4).tolist() == np.random.SeedSequence(7).spawn(2)[1].generate_state(4).tolist()
    assert len({tuple(stream(seq, name).generate_state(2)) for name in PART}) == len(PART)


def test_one_stream_functions_use_a_generator_as_given_and_record_its_entropy():
    g = np.random.default_rng(11)
    out, seed = generator(g)
    assert out is g and seed == 11
    out, seed = generator(5)
    assert seed == 5 and out.integers(1 << 40) == np.random.default_rng(stream(root(5), "estimate")).integers(1 << 40)
    # a spawned generator records its place in the tree
    assert seed_of(np.random.default_rng(np.random.SeedSequence(3, spawn_key=(1, 2)))) == [3, 1, 2]
    # None: fresh entropy, recorded
    assert isinstance(generator(None)[1], int)


def test_several_part_functions_draw_a_root_seed_from_a_generator():
    seq = root(np.random.default_rng(1))
    assert seq.spawn_key == () and seq.entropy == int(np.random.default_rng(1).integers(2**63))


@pytest.mark.parametrize("bad", [-1, True, "3", 1.5])
def test_bad_rng_is_refused_by_name(bad):
    with pytest.raises(ParameterError, match="rng|seed"):
        generator(bad)


def test_stable_int_is_a_sha256_prefix_of_the_name_or_the_canonical_json():
    import hashlib

    assert stable_int("gauss") == int.from_bytes(hashlib.sha256(b"gauss").digest()[:4], "little")
    assert stable_int({"b": 1, "a": 2}) == stable_int({"a": 2, "b": 1})


def test_the_same_seed_gives_the_same_monk_statistic_in_estimate_and_test():
    kernel = REG.get_kernel("rbf", sigma=1.0)
    X, Y = get_dataset("gauss-outliers", n=60).sample(3)
    for spec in ("monk-bcd", "monk-bcd-fast", "monk-embedding-mmd"):
        est = REG.get_estimator(spec, n_blocks=5)
        estimate = est.estimate(kernel, X, Y, rng=3)
        test = permutation_test(X, Y, kernel=kernel, estimator=est, n_permutations=9, rng=3, relabel="global")
        assert test.statistic == pytest.approx(np.sign(estimate.mmd2) * np.sqrt(abs(estimate.mmd2)), rel=1e-12)
        assert test.seed == estimate.seed == 3


def test_the_data_set_draw_is_the_data_part_of_the_seed():
    ds = get_dataset("gauss", n=5)
    X, _ = ds.sample(4)
    X2, _ = ds.sample(np.random.default_rng(stream(root(4), "data")))
    assert np.array_equal(X, X2)
    # and not the stream the estimate draws from
    X3, _ = ds.sample(np.random.default_rng(stream(root(4), "estimate")))
    assert not np.array_equal(X, X3)


def test_a_grid_point_statistic_does_not_depend_on_the_rest_of_the_grid():
    kernel = REG.get_kernel("rbf", sigma=1.0)
    est = REG.get_estimator("monk-bcd-fast", n_blocks=3)
    X, Y = get_dataset("gauss", n=60).sample(0)
    small = split_test(X, Y, kernel=kernel, estimator=est, grid={"sigma": [2.0]}, n_permutations=19, rng=1)
    large = split_test(X, Y, kernel=kernel, estimator=est, grid={"sigma": [0.5, 1.0, 2.0]}, n_permutations=19, rng=1)
    by_point = {item["params"]["sigma"]: item["statistic"] for item in large.tuning}
    assert small.tuning[0]["statistic"] == by_point[2.0]
    # the randomised estimator does draw: another seed moves the statistic
    other = split_test(X, Y, kernel=kernel, estimator=est, grid={"sigma": [2.0]}, n_permutations=19, rng=2)
    assert other.tuning[0]["statistic"] != small.tuning[0]["statistic"]


def test_child_streams_with_a_leading_stream():
    from monk_framework.core.randomness import ChildStreams

    seq, lead = np.random.SeedSequence(3), np.random.SeedSequence(99)
    both = ChildStreams(seq, 2, 5, first=lead)
    plain = ChildStreams(seq, 2, 5)
    assert len(both) == 4
    assert both[0].random() == np.random.default_rng(lead).random()
    assert [g.random() for g in both[1:]] == [g.random() for g in plain[:]]
    assert both[-1].random() == plain[-1].random()
