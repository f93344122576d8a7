"""The paper's experiments, reproduced as resumable Monte-Carlo runs.

* :mod:`.exp1`: Figure 1, the error of MMD estimators on Gaussian, contaminated and
  Pareto data (quadratic and RBF kernels).
* :mod:`.exp2`: Figure 2, the three-way split test on splice-junction DNA.
* :mod:`.base`: the experiment interface and :func:`run_experiment`;
* :mod:`.runner`: cells, the journal, resuming; :mod:`monk_framework.engine.backends` runs the
  cells here or on Dask.

Experiments name kernels and estimators through the registry ("name:key=value,..."),
like the command line, so they know no concrete plugin.
"""

from __future__ import annotations

from typing import Any

from monk_framework.app.experiments.base import Experiment, ExperimentRun, run_experiment
from monk_framework.app.experiments.exp1 import Exp1
from monk_framework.app.experiments.exp2 import Exp2
from monk_framework.core.errors import UnknownNameError

__all__ = ["Experiment", "ExperimentRun", "get_experiment", "run_experiment"]


def _experiments() -> dict[str, type[Experiment]]:
    return {Exp1.name: Exp1, Exp2.name: Exp2}


def get_experiment(name: str, *, quick: bool = False, **overrides: Any) -> Experiment:
    """An experiment by name, with the full (paper) or the ``quick`` configuration, and
    any field overridden (``runs=10``, ``sizes=(200, 400)``, ...)."""
    table = _experiments()
    if name not in table:
        raise UnknownNameError("experiment", name, table)
    cls = table[name]
    base: dict[str, Any] = dict(cls.QUICK) if quick else {}
    base.update({k: v for k, v in overrides.items() if v is not None})
    return cls(**base)
