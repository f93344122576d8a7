"""The statistic and p-value of 84 seeded permutation tests, to compare two versions.

    python benchmarks/seeded_numbers.py > now.json
    MONK_COMPILED=0 python benchmarks/seeded_numbers.py > twins.json
    python benchmarks/seeded_numbers.py --compare now.json twins.json

The tests: u-stat, v-stat, MONK BCD (within blocks and globally), BCD-Fast (iterations,
and the exact solver), the embedding MMD; d = 1, 4, 10; N + M = 110 and 560 with three
outlying points; the RBF kernel with the median heuristic; stored and matrix-free
(``max_memory="1MB"``); B = 99. A change of the code that keeps the numbers gives the
same bits; the compiled loops against their numpy twins, the same p-values and
statistics within 1e-9 (the suite checks a few of these; this runs them all).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

import numpy as np

ESTIMATORS = (
    ("u-stat", "global"),
    ("v-stat", "global"),
    ("monk-bcd:n_blocks=5", "within-blocks"),
    ("monk-bcd:n_blocks=5", "global"),
    ("monk-bcd-fast:n_blocks=5", "within-blocks"),
    ("monk-embedding-mmd:n_blocks=5", "within-blocks"),
    ("monk-bcd-fast:n_blocks=5,solver=exact", "global"),
)


def cases() -> list[tuple[int, int, int, str, str, str | None]]:
    return [(d, n, m, est, relabel, mm) for d in (1, 4, 10) for n, m in ((60, 50), (300, 260)) for est, relabel in ESTIMATORS for mm in (None, "1MB")]


def run() -> list[list]:
    from monk_framework import get_registry
    from monk_framework.two_sample import permutation_test

    reg = get_registry()
    out = []
    for i, (d, n, m, est, relabel, mm) in enumerate(cases()):
        g = np.random.default_rng(i)
        X, Y = g.normal(size=(n, d)), g.normal(0.15, 1.0, size=(m, d))
        X[:3] *= 20.0
        r = permutation_test(
            X, Y, kernel=reg.get_kernel("rbf", sigma="median"), estimator=reg.resolve_estimator(est), n_permutations=99, rng=i, relabel=relabel, max_memory=mm
        )
        out.append([i, d, n, m, est, relabel, mm, r.statistic, r.pvalue])
    return out


def compare(a: list[list], b: list[list]) -> str:
    same = sum(x[7] == y[7] for x, y in zip(a, b))
    worst = max(abs(x[7] - y[7]) / max(abs(x[7]), 1e-300) for x, y in zip(a, b))
    changed = [(x, y) for x, y in zip(a, b) if x[8] != y[8]]
    lines = [f"{len(a)} tests: {same} statistics the same bits, the others within {worst:.3g} relative; {len(changed)} p-values changed"]
    lines += [f"  {x} -> p = {y[8]}" for x, y in changed]
    return "\n".join(lines)


def main(description: str = __doc__, run: Callable[[], list[list]] = run, compare: Callable[[list[list], list[list]], str] = compare) -> None:
    """Print ``run()``'s rows as JSON, or with ``--compare A B`` what two such files share
    (the command line of every seeded-numbers script)."""
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument("--compare", nargs=2, metavar="JSON")
    args = parser.parse_args()
    if args.compare:
        a, b = (json.load(open(path)) for path in args.compare)
        print(compare(a, b))
        return
    json.dump(run(), sys.stdout)


if __name__ == "__main__":
    main()
