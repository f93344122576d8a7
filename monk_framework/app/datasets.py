"""Built-in data sets generated from a seed: the MONK paper's Experiment-1 settings.

* ``gauss``: X ~ N(mean_x, std_x²) and Y ~ N(mean_y, std_y²) (isotropic in d
  dimensions). The paper draws the means and standard deviations once from [0, 1] and
  keeps them fixed; our defaults are such a draw, made once with
  ``numpy.random.default_rng(2019).uniform(size=4)`` and rounded to 4 digits.
* ``gauss-outliers``: the same, with the last ``n_outliers`` points of X replaced by
  ``outlier_x`` (2000) and of Y by ``outlier_y`` (4000) in every coordinate.
* ``pareto``: X and Y both i.i.d. classical Pareto(shape) = 1 + Lomax(shape) (numpy's
  ``pareto`` draws the Lomax law), so MMD = 0; shape 3 has an infinite fourth moment.

Each data set knows the true MMD of the distributions it samples from, for kernels
with a closed form (``Kernel.gaussian_mmd2``): for ``gauss-outliers`` that is the MMD
of the clean Gaussians, the quantity the paper's estimators target.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import attrs
import numpy as np

from monk_framework.core.errors import ParameterError, UnknownNameError
from monk_framework.core.kernels import Kernel
from monk_framework.core.params import Check, Configurable, integer, one_of, parameter, real
from monk_framework.core.randomness import RNGLike, generator
from monk_framework.core.resources import check_fits
from monk_framework.io.splice import load_splice

__all__ = ["Dataset", "VectorDataset", "SpliceDataset", "GaussDataset", "GaussOutliersDataset", "ParetoDataset", "DATASETS", "get_dataset", "default_dataset"]


def _optional_size(none_means: str) -> Check:
    """A sample size (an int >= 1, at most numpy's largest), or None for ``none_means``."""
    size = integer(ge=1)
    return Check(f"an int >= 1, or None for {none_means}", lambda v: v is None or size.test(v), size.hint)


_OPTIONAL_SIZE = _optional_size("the same size as n")


@attrs.frozen(kw_only=True)
class Dataset(Configurable):
    """A named generator of two samples (X, Y) from a seed."""

    plugin_type: ClassVar[str] = "dataset"
    input_kind: ClassVar[str] = "vector"

    n: int = parameter(200, doc="number of points in X", check=integer(ge=1), kind="int")
    m: int | None = parameter(None, doc="number of points in Y (default: n)", check=_OPTIONAL_SIZE, kind="int")

    @property
    def size_y(self) -> int:
        return self.n if self.m is None else self.m

    def sample(self, rng: RNGLike = None) -> tuple[np.ndarray, np.ndarray]:
        """Draw (X, Y); the same seed gives the same samples on any machine."""
        self._check_memory()
        stream, _ = generator(rng, "data")
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below, by name
            X, Y = self._sample(stream)
        if isinstance(X, np.ndarray) and isinstance(Y, np.ndarray):
            # the parameters', not the data's fault: "remove or impute them" would blame the user's data
            bad = int(np.count_nonzero(~np.isfinite(X))) + int(np.count_nonzero(~np.isfinite(Y)))
            if bad:
                raise ParameterError(
                    f"Data set {self.spec()} drew {bad:,} values beyond float64 (inf): its parameters make numbers too large to hold; change them."
                )
        return X, Y

    def _check_memory(self) -> None:
        """Refuse sizes whose samples cannot fit, before drawing (vector data sets)."""

    def _sample(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def true_mmd(self, kernel: Kernel) -> float:
        """MMD between the two distributions sampled, where the kernel has a closed form."""
        raise NotImplementedError


@attrs.frozen(kw_only=True)
class VectorDataset(Dataset):
    """A data set of points in R^d."""

    d: int = parameter(1, doc="dimension of each point", check=integer(ge=1), kind="int")

    def _check_memory(self) -> None:
        # X and Y, and one temporary of the larger while it is drawn
        check_fits(
            8 * self.d * (self.n + self.size_y + max(self.n, self.size_y)),
            lambda need, avail, _: (
                f"Data set {self.spec()}: drawing X and Y (n = {self.n:,}, m = {self.size_y:,}, d = {self.d:,}) needs "
                f"about {need}, but only {avail} of memory are available; use a smaller n, m or d."
            ),
        )


@attrs.frozen(kw_only=True)
class GaussDataset(VectorDataset):
    name: ClassVar[str] = "gauss"
    summary: ClassVar[str] = "Two Gaussians with fixed means and standard deviations (paper Exp. 1a)."
    formula: ClassVar[str] = "X ~ N(mean_x, std_x^2 I_d), Y ~ N(mean_y, std_y^2 I_d)"

    mean_x: float = parameter(0.1447, doc="mean of X in every coordinate", check=real(), kind="float")
    std_x: float = parameter(0.4422, doc="standard deviation of X", check=real(gt=0), kind="float")
    mean_y: float = parameter(0.3403, doc="mean of Y in every coordinate", check=real(), kind="float")
    std_y: float = parameter(0.9687, doc="standard deviation of Y", check=real(gt=0), kind="float")

    def _sample(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        X = self.mean_x + self.std_x * rng.standard_normal((self.n, self.d))
        Y = self.mean_y + self.std_y * rng.standard_normal((self.size_y, self.d))
        return X, Y

    def true_mmd(self, kernel: Kernel) -> float:
        eye = np.eye(self.d)
        mmd2 = kernel.gaussian_mmd2(
            np.full(self.d, self.mean_x),
            self.std_x**2 * eye,
            np.full(self.d, self.mean_y),
            self.std_y**2 * eye,
        )
        return math.sqrt(max(mmd2, 0.0))


@attrs.frozen(kw_only=True)
class GaussOutliersDataset(GaussDataset):
    name: ClassVar[str] = "gauss-outliers"
    summary: ClassVar[str] = "The two Gaussians with the last 5 points of X set to 2000 and of Y to 4000 (paper Exp. 1b)."
    formula: ClassVar[str] = "gauss, then X[-n_outliers:] = outlier_x, Y[-n_outliers:] = outlier_y"

    n_outliers: int = parameter(5, doc="points replaced at the end of each sample", check=integer(ge=0), kind="int")
    outlier_x: float = parameter(2000.0, doc="value of X's outliers (every coordinate)", check=real(), kind="float")
    outlier_y: float = parameter(4000.0, doc="value of Y's outliers (every coordinate)", check=real(), kind="float")

    def __attrs_post_init__(self) -> None:
        if self.n_outliers > min(self.n, self.size_y):
            raise ParameterError(
                f"The 'n_outliers' parameter of {type(self).__name__} must be at most the "
                f"smaller sample size {min(self.n, self.size_y)}. Got {self.n_outliers} instead."
            )

    def _sample(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        X, Y = super()._sample(rng)
        if self.n_outliers:
            X[-self.n_outliers :] = self.outlier_x
            Y[-self.n_outliers :] = self.outlier_y
        return X, Y


@attrs.frozen(kw_only=True)
class ParetoDataset(VectorDataset):
    name: ClassVar[str] = "pareto"
    summary: ClassVar[str] = "X and Y both classical Pareto(3), heavy-tailed, MMD = 0 (paper Exp. 1c)."
    formula: ClassVar[str] = "X, Y ~ 1 + Lomax(shape) i.i.d. in every coordinate"

    shape: float = parameter(3.0, doc="tail index a of Pareto(a)", check=real(gt=0), kind="float")

    def _sample(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        X = 1.0 + rng.pareto(self.shape, (self.n, self.d))
        Y = 1.0 + rng.pareto(self.shape, (self.size_y, self.d))
        return X, Y

    def true_mmd(self, kernel: Kernel) -> float:
        return 0.0


@attrs.frozen(kw_only=True)
class SpliceDataset(Dataset):
    """DNA sequences of two splice-junction classes (or two disjoint halves of one class)."""

    input_kind: ClassVar[str] = "string"
    #: the classes X and Y are drawn from (equal: two disjoint random halves of one class)
    classes: ClassVar[tuple[str, str]] = ("EI", "IE")

    n: int | None = parameter(  # type: ignore[assignment]
        None,
        doc="sequences in X (default: as many as the classes allow, equal sizes)",
        check=_optional_size("as many as the classes allow"),
        kind="int",
    )
    m: int | None = parameter(None, doc="sequences in Y (default: n)", check=_OPTIONAL_SIZE, kind="int")
    ambiguous: str = parameter(
        "drop",
        doc="sequences with IUPAC ambiguity codes (N, D, R, S; 15 in the file): 'drop' them, or 'keep' them as letters of their own",
        check=one_of("drop", "keep"),
    )

    def _pools(self) -> tuple[list[str], list[str]]:
        data = load_splice(classes=tuple(set(self.classes)), drop_ambiguous=self.ambiguous == "drop")
        a, b = self.classes
        if a != b:
            return data[a], data[b]
        return data[a], data[a]

    def _sizes(self) -> tuple[int, int]:
        """(n, m) with the defaults resolved, checked against the sequences available."""
        px, py = self._pools()
        a, b = self.classes
        if a == b:
            # disjoint halves of one class
            n = len(px) // 2 if self.n is None else self.n
            m = n if self.m is None else self.m
            if n + m > len(px):
                raise ParameterError(
                    f"Data set {self.name!r} splits the {len(px)} {a} sequences (ambiguous="
                    f"{self.ambiguous!r}) into disjoint X and Y: n + m must be at most {len(px)}. "
                    f"Got {n} + {m} instead."
                )
            return n, m
        n = min(len(px), len(py)) if self.n is None else self.n
        m = n if self.m is None else self.m
        for name, value, pool, cls in (("n", n, px, a), ("m", m, py, b)):
            if value > len(pool):
                raise ParameterError(
                    f"The {name!r} parameter of data set {self.name!r} must be at most {len(pool)} "
                    f"(the {cls} sequences with ambiguous={self.ambiguous!r}). Got {value} instead."
                )
        return n, m

    def __attrs_post_init__(self) -> None:
        self._sizes()

    @property
    def size_y(self) -> int:
        return self._sizes()[1]

    def _sample(self, rng: np.random.Generator) -> tuple[list[str], list[str]]:  # type: ignore[override]
        n, m = self._sizes()
        px, py = self._pools()
        if self.classes[0] == self.classes[1]:
            # two disjoint random subsets of one class: the null hypothesis holds
            perm = rng.permutation(len(px))
            return [px[i] for i in perm[:n]], [px[i] for i in perm[n : n + m]]
        ix = rng.choice(len(px), size=n, replace=False)
        iy = rng.choice(len(py), size=m, replace=False)
        return [px[i] for i in ix], [py[i] for i in iy]


@attrs.frozen(kw_only=True)
class SpliceEIIE(SpliceDataset):
    name: ClassVar[str] = "splice-ei-ie"
    summary: ClassVar[str] = "UCI splice junctions: EI (donor) vs IE (acceptor) DNA sequences (paper Exp. 2, inter-class)."
    formula: ClassVar[str] = "X: n random EI sequences, Y: m random IE sequences (60 letters each)"
    classes: ClassVar[tuple[str, str]] = ("EI", "IE")


@attrs.frozen(kw_only=True)
class SpliceEIEI(SpliceDataset):
    name: ClassVar[str] = "splice-ei-ei"
    summary: ClassVar[str] = "UCI splice junctions: two disjoint random halves of the EI sequences (intra-class, no difference)."
    formula: ClassVar[str] = "X, Y: disjoint random subsets of the EI sequences"
    classes: ClassVar[tuple[str, str]] = ("EI", "EI")


@attrs.frozen(kw_only=True)
class SpliceIEIE(SpliceDataset):
    name: ClassVar[str] = "splice-ie-ie"
    summary: ClassVar[str] = "UCI splice junctions: two disjoint random halves of the IE sequences (intra-class, no difference)."
    formula: ClassVar[str] = "X, Y: disjoint random subsets of the IE sequences"
    classes: ClassVar[tuple[str, str]] = ("IE", "IE")


DATASETS: dict[str, type[Dataset]] = {cls.name: cls for cls in (GaussDataset, GaussOutliersDataset, ParetoDataset, SpliceEIIE, SpliceEIEI, SpliceIEIE)}


def get_dataset(name: str, /, **params: Any) -> Dataset:
    """A built-in data set by name, e.g. ``get_dataset("gauss-outliers", n=400)``."""
    if name not in DATASETS:
        raise UnknownNameError("dataset", name, DATASETS)
    return DATASETS[name].from_params(params)


def default_dataset(input_kind: str) -> str | None:
    """The data set ``monkfw run`` uses when no data are given, for an input kind."""
    return {"vector": "gauss", "string": "splice-ei-ie"}.get(input_kind)
