"""Randomness, in one place (following SPEC 7).

Every public function that draws takes ``rng``: None, an int seed, a numpy
``SeedSequence`` or a ``Generator``.

**A seed names a family of streams.** An int seed s (or a SeedSequence) is the root
of a tree of SeedSequences; each independent part of a computation draws from its own
child, at a fixed place in the tree (:data:`PART`):

=========  ======  ===================================================================
part       key     what draws from it
=========  ======  ===================================================================
estimate   0       an estimator's own randomness (blocks, reshuffles) for the statistic
relabel    1       a test's relabellings (relabelling b: its child b)
partition  2       a within-block test's fixed partition
data       3       a data set's draw (``Dataset.sample``, ``monkfw run/test --dataset``)
second     4       the second sample's embedding (``monkfw run`` with an embedding)
split      5, 0    the split test's three-way cut
tune       5, 1    its part 1; grid point p draws from child ``stable_int(p)``
calibrate  5, 2    its part 2 relabellings
test       5, 3    its statistic on part 3
=========  ======  ===================================================================

So the same seed gives the same statistic wherever it is computed:
``estimator.estimate(k, X, Y, rng=s)``, the statistic of
``permutation_test(k, estimator, X, Y, rng=s, relabel="global")``, ``monkfw run --seed
s`` and ``monkfw test --seed s --relabel global`` (and ``Dataset.sample(s)`` is the draw
of ``--dataset … --seed s``). A grid point's tuning statistic in the split test depends
on the point, not on the rest of the grid; a relabelling's on its index, not on the
batch it lands in.

**A Generator is one stream, used as given**: a function that needs one stream
(an estimate, an embedding, a data set's draw) draws from it directly; one that needs
several draws a 63-bit root seed from it, recorded in the result, so that ``rng=seed``
reproduces the result. The seed entropy of a Generator is recorded either way.
``None`` draws fresh entropy from the operating system, recorded too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from monk_framework.core.errors import ParameterError

__all__ = ["RNGLike", "PART", "ChildStreams", "check_rng", "root", "stream", "child", "generator", "seed_of", "stable_int"]

RNGLike = None | int | np.integer | np.random.Generator | np.random.SeedSequence

#: the place of each part of a computation among a root's children (see the table above)
PART: dict[str, tuple[int, ...]] = {
    "estimate": (0,),
    "relabel": (1,),
    "partition": (2,),
    "data": (3,),
    "second": (4,),
    "split": (5, 0),
    "tune": (5, 1),
    "calibrate": (5, 2),
    "test": (5, 3),
}


def check_rng(rng: Any) -> None:
    """Refuse what is not an ``rng``: a bool, a negative seed, any other type."""
    if isinstance(rng, bool):
        raise ParameterError(f"rng must be None, an int seed, a SeedSequence or a numpy Generator; got {rng!r}.")
    if isinstance(rng, (int, np.integer)):
        if int(rng) < 0:
            raise ParameterError(f"A seed must be a non-negative int; got {rng}.")
        return
    if rng is None or isinstance(rng, (np.random.Generator, np.random.SeedSequence)):
        return
    raise ParameterError(f"rng must be None, an int seed, a SeedSequence or a numpy Generator; got {type(rng).__name__}.")


def root(rng: RNGLike) -> np.random.SeedSequence:
    """The root SeedSequence of a computation with several parts.

    An int seed s gives SeedSequence(s); a SeedSequence is the root itself; a Generator
    gives SeedSequence(e) for a 63-bit e drawn from it; None, fresh OS entropy.
    """
    check_rng(rng)
    if isinstance(rng, np.random.SeedSequence):
        return rng
    if isinstance(rng, np.random.Generator):
        return np.random.SeedSequence(int(rng.integers(2**63)))
    return np.random.SeedSequence(None if rng is None else int(rng))


def child(seq: np.random.SeedSequence, *keys: int) -> np.random.SeedSequence:
    """The descendant of ``seq`` at ``keys``, what ``seq.spawn`` would give at those places,
    but independent of how many children were spawned before."""
    return np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, *keys))


def stream(seq: np.random.SeedSequence, part: str, *keys: int) -> np.random.SeedSequence:
    """The SeedSequence of one part (a key of :data:`PART`) of the computation rooted at ``seq``."""
    return child(seq, *PART[part], *keys)


def generator(rng: RNGLike, part: str = "estimate") -> tuple[np.random.Generator, Any]:
    """The one stream of a computation with a single part, and the seed to record.

    An int, a SeedSequence or None roots a tree and the stream is its ``part`` child; a
    Generator is the stream itself.
    """
    check_rng(rng)
    if isinstance(rng, np.random.Generator):
        return rng, seed_of(rng)
    seq = root(rng)
    return np.random.default_rng(stream(seq, part)), seed_of(seq)


def seed_of(rng: np.random.SeedSequence | np.random.Generator) -> Any:
    """What a result records of its randomness: the seed entropy (an int), or
    [entropy, *spawn_key] for a SeedSequence below a root; None if unknown."""
    seq = rng.bit_generator.seed_seq if isinstance(rng, np.random.Generator) else rng
    if not isinstance(seq, np.random.SeedSequence):
        return None
    entropy = seq.entropy
    if not isinstance(entropy, int):  # a seed given as a list of ints
        entropy = [int(e) for e in np.atleast_1d(np.asarray(entropy))]
    return entropy if not seq.spawn_key else [entropy, *map(int, seq.spawn_key)]


def stable_int(value: Any) -> int:
    """A stable 32-bit integer for a name or a JSON-able value (seed material; Python's
    ``hash`` is salted per process)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


class ChildStreams(Sequence[np.random.Generator]):
    """Generators of children start..stop of ``seq`` (e.g. of relabellings), made only
    when asked for.

    Stream b is child b of ``seq``, so a relabelling's randomness does not depend on the
    batch it lands in; the classical statistics never draw, and never pay for making
    1000 generators.
    """

    def __init__(self, seq: np.random.SeedSequence, start: int, stop: int, *, first: np.random.SeedSequence | None = None):
        #: ``first``: an extra stream in front (e.g. the observed statistic's, computed with
        #: the first batch of relabellings)
        self.seq, self.start, self.stop, self.first = seq, start, stop, first

    def __len__(self) -> int:
        return self.stop - self.start + (self.first is not None)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        if self.first is not None:
            if i == 0:
                return np.random.default_rng(self.first)
            i -= 1
        return np.random.default_rng(child(self.seq, self.start + i))
