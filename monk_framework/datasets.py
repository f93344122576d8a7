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

from .errors import ParameterError, UnknownNameError
from .estimators import RNGLike, normalize_rng
from .kernels import Kernel
from .params import Check, Configurable, integer, parameter, real

__all__ = ["Dataset", "GaussDataset", "GaussOutliersDataset", "ParetoDataset", "DATASETS", "get_dataset", "default_dataset"]

_OPTIONAL_SIZE = Check(
    "an int >= 1, or None for the same size as n",
    lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1),
)


@attrs.frozen(kw_only=True)
class Dataset(Configurable):
    """A named generator of two samples (X, Y) from a seed."""

    plugin_type: ClassVar[str] = "dataset"
    input_kind: ClassVar[str] = "vector"

    n: int = parameter(200, doc="number of points in X", check=integer(ge=1), kind="int")
    m: int | None = parameter(None, doc="number of points in Y (default: n)", check=_OPTIONAL_SIZE, kind="int")
    d: int = parameter(1, doc="dimension of each point", check=integer(ge=1), kind="int")

    @property
    def size_y(self) -> int:
        return self.n if self.m is None else self.m

    def sample(self, rng: RNGLike = None) -> tuple[np.ndarray, np.ndarray]:
        """Draw (X, Y); the same seed gives the same samples on any machine."""
        generator, _ = normalize_rng(rng)
        return self._sample(generator)

    def _sample(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def true_mmd(self, kernel: Kernel) -> float:
        """MMD between the two distributions sampled, where the kernel has a closed form."""
        raise NotImplementedError


@attrs.frozen(kw_only=True)
class GaussDataset(Dataset):
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
            np.full(self.d, self.mean_x), self.std_x**2 * eye,
            np.full(self.d, self.mean_y), self.std_y**2 * eye,
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
class ParetoDataset(Dataset):
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


DATASETS: dict[str, type[Dataset]] = {
    cls.name: cls for cls in (GaussDataset, GaussOutliersDataset, ParetoDataset)
}


def get_dataset(name: str, /, **params: Any) -> Dataset:
    """A built-in data set by name, e.g. ``get_dataset("gauss-outliers", n=400)``."""
    if name not in DATASETS:
        raise UnknownNameError("dataset", name, DATASETS)
    return DATASETS[name].from_params(params)


def default_dataset(input_kind: str) -> str | None:
    """The data set ``monkfw run`` uses when no data are given, for an input kind."""
    return {"vector": "gauss"}.get(input_kind)
