"""The Q-dimensional problems behind the MONK estimators, solved on a Q × Q block Gram.

For a fixed partition everything MONK computes lives in the span of Q RKHS points
(docs/estimators.md): the block differences d_q = μ_{S_q}(x) − μ_{T_q}(y) for the MMD, the block
means μ_{S_q} for the mean embedding. Only their Gram matrix G_qr = ⟨d_q, d_r⟩ enters;
a_q denotes row q of any factor A with AAᵀ = G, and f = Σ_q β_q d_q a candidate
witness, for which ⟨f, d_q⟩ = (Gβ)_q and ‖f‖² = βᵀGβ.

* :func:`sup_median_exact` solves max_{‖f‖≤1} med_q ⟨f, d_q⟩ (paper Eq. 6 on a fixed
  partition) exactly, by enumerating the faces of the majority hulls.
* :func:`sup_median_local` improves a starting witness (BCD's) by local search over
  majority subsets, each solved exactly by Wolfe's minimum-norm-point algorithm.
* :func:`bcd_fixed` is Algorithm 1 on a fixed partition, in these coordinates.
* :func:`minmax_center` solves the minmax mean-embedding problem (paper Eq. 3) by a
  cutting-plane method with a certified gap; :func:`weiszfeld` the geometric median.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
from scipy.optimize import linprog

from monk_framework.plugin import majority, median_position, median_value

__all__ = [
    "SupMedian",
    "bcd_fixed",
    "factor",
    "min_norm_point",
    "minmax_center",
    "objective",
    "sup_median_exact",
    "sup_median_local",
    "weiszfeld",
]

#: the largest Q solved by enumerating faces (Σ_{k≤(Q+1)/2} C(Q, k) ≈ 23 000 at Q = 15).
MAX_ENUMERATE_BLOCKS = 15


def objective(G: np.ndarray, beta: np.ndarray) -> float:
    """med_q ⟨f, d_q⟩ for f = Σ β_q d_q / ‖Σ β_q d_q‖ (0 for f = 0)."""
    norm2 = float(beta @ G @ beta)
    if norm2 <= 1e-300:
        return 0.0
    return float(median_value(G @ beta)) / math.sqrt(norm2)


@attrs.frozen
class SupMedian:
    """The solution of max_{‖f‖≤1} med_q ⟨f, d_q⟩ on a fixed partition.

    ``beta`` are the coefficients of the optimal f on the d_q (normalised:
    βᵀGβ = 1, or β = 0 when the optimum is f = 0). The certificate: ``active`` is the
    face whose minimum-norm point gives f (⟨f, d_q⟩ equals the value on it), and
    ``majority_blocks`` the strict majority of blocks with ⟨f, d_q⟩ ≥ value.
    """

    value: float
    beta: np.ndarray
    active: tuple[int, ...]
    majority_blocks: tuple[int, ...]
    method: str
    candidates: int

    def certificate(self) -> dict[str, Any]:
        return {
            "active_blocks": list(self.active),
            "majority_blocks": list(self.majority_blocks),
            "method": self.method,
            "candidates": self.candidates,
        }


def _finish(G: np.ndarray, beta: np.ndarray, active: tuple[int, ...], method: str, candidates: int) -> SupMedian:
    norm2 = float(beta @ G @ beta)
    if norm2 <= 1e-300:
        beta = np.zeros(len(G))
        value = 0.0
    else:
        beta = beta / math.sqrt(norm2)
        value = float(median_value(G @ beta))
        if value <= 0.0:  # f = 0 is always feasible and gives 0
            beta, value = np.zeros(len(G)), 0.0
    top = np.argsort(-(G @ beta), kind="stable")[: majority(len(G))]
    return SupMedian(value, beta, tuple(sorted(active)), tuple(sorted(int(q) for q in top)), method, candidates)


def _affine_min_norm(G: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """For each face F (rows of index arrays), λ minimising λᵀG_FFλ subject to Σλ = 1.

    Solves the KKT system [[G_FF, 1], [1ᵀ, 0]] [λ; ν] = [0; 1] for all faces at once;
    the pseudo-inverse covers affinely dependent faces (whose candidates are then
    merely feasible, never wrong: every candidate is scored by the true objective).
    """
    count, k = faces.shape
    kkt = np.zeros((count, k + 1, k + 1))
    kkt[:, :k, :k] = G[faces[:, :, None], faces[:, None, :]]
    kkt[:, :k, k] = 1.0
    kkt[:, k, :k] = 1.0
    rhs = np.zeros(k + 1)
    rhs[k] = 1.0
    try:
        sol = np.linalg.solve(kkt, np.broadcast_to(rhs, (count, k + 1))[..., None])[..., 0]
    except np.linalg.LinAlgError:
        # only the singular systems through the pseudo-inverse (an SVD each, ten times an
        # LU): one singular face no longer sends its whole batch there
        sign, _ = np.linalg.slogdet(kkt)
        singular = sign == 0
        sol = np.empty((count, k + 1))
        sol[singular] = np.linalg.pinv(kkt[singular]) @ rhs
        regular = ~singular
        if regular.any():
            sol[regular] = np.linalg.solve(kkt[regular], np.broadcast_to(rhs, (int(regular.sum()), k + 1))[..., None])[..., 0]
    return sol[:, :k]


#: a witness of the exact oracle must have ‖f‖² at least this fraction of the size of
#: the terms it is summed from (about five digits left after cancellation)
WITNESS_DIGITS = 1e-10


def sup_median_exact(G: np.ndarray, *, dimension: int | None = None) -> SupMedian:
    """max_{‖f‖≤1} med_q ⟨f, d_q⟩ exactly, for Q ≤ :data:`MAX_ENUMERATE_BLOCKS`.

    The median is ≥ t iff a strict majority S (|S| = m) has ⟨f, d_q⟩ ≥ t, so the optimum
    is max_S dist(0, conv{a_q : q ∈ S}) (minimax over the ball), or 0. The
    minimum-norm point of a hull lies in the relative interior of an affinely
    independent face F ⊆ S with |F| ≤ min(m, rank + 1), where it is the affine
    minimum-norm point. Every such face gives a feasible witness f ∝ Σ_{q∈F} λ_q a_q;
    scoring all of them by the true objective and keeping the best is exact.

    ``dimension``: that of the space the points live in, where the caller knows it (the
    minmax centre's block coordinates). Faces of more than dimension + 1 points are then
    affinely dependent, and their affine minimum-norm point is that of an independent
    subface, already enumerated: they are skipped (with a quadratic kernel on one
    feature, 924 of the 1485 faces at Q = 11, and the singular systems among them).
    """
    G = np.asarray(G, dtype=np.float64)
    Q = len(G)
    if Q > MAX_ENUMERATE_BLOCKS:
        raise ValueError(f"enumeration is limited to Q <= {MAX_ENUMERATE_BLOCKS}")
    diag = np.diag(G)
    scale = float(np.median(diag)) if np.median(diag) > 0 else float(diag.max())
    if scale <= 0.0:
        return _finish(G, np.zeros(Q), (), "enumerate", 0)
    # a scale-free system (the optimum scales as √scale); the median diagonal, not the
    # trace, so that one outlier block does not set the scale
    Gs = G / scale
    best_value, best_beta, count = 0.0, np.zeros(Q), 0
    best_face: tuple[int, ...] = ()
    largest = majority(Q) if dimension is None else min(majority(Q), dimension + 1)
    for k in range(1, largest + 1):
        faces = np.array(list(itertools.combinations(range(Q), k)), dtype=np.int64)
        lam = _affine_min_norm(Gs, faces)
        betas = np.zeros((len(faces), Q))
        np.put_along_axis(betas, faces, lam, axis=1)
        values = betas @ Gs  # row j: (G β_j)_q, G symmetric
        norm2 = np.einsum("jq,jq->j", values, betas)
        # βᵀGβ is a sum of terms up to |β|ᵀ|G||β|: where an outlier block's entries are
        # 10¹³ times the others and β cancels them, what is left is round-off, and a
        # witness scored on it can beat every true one (then be found worthless, leaving
        # D = 0 at a point of depth 8.6). Only witnesses whose norm keeps digits compete.
        size = np.einsum("jq,jq->j", np.abs(betas) @ np.abs(Gs), np.abs(betas))
        ok = norm2 > np.maximum(1e-24, WITNESS_DIGITS * size)
        scores = np.full(len(faces), -np.inf)
        scores[ok] = median_value(values[ok], axis=1) / np.sqrt(norm2[ok])
        count += len(faces)
        j = int(np.argmax(scores))
        if scores[j] > best_value:
            best_value, best_beta, best_face = float(scores[j]), betas[j], tuple(int(q) for q in faces[j])
    return _finish(G, best_beta, best_face, "enumerate", count)


def min_norm_point(G: np.ndarray, *, tol: float = 1e-12, max_iter: int = 1000) -> np.ndarray:
    """Wolfe's minimum-norm-point algorithm on points given by their Gram matrix.

    Returns λ in the simplex minimising λᵀGλ, i.e. the point of conv{a_q} nearest the
    origin. Finite and exact up to round-off (Wolfe 1976).
    """
    k = len(G)
    j = int(np.argmin(np.diag(G)))
    corral = [j]
    lam = np.zeros(k)
    lam[j] = 1.0
    scale = max(float(np.max(np.abs(np.diag(G)))), 1e-300)
    for _ in range(max_iter):
        g = G @ lam
        x2 = float(lam @ g)
        j = int(np.argmin(g))
        if x2 - g[j] <= tol * scale or j in corral:
            break
        corral.append(j)
        while True:
            sub = np.array(corral)
            mu = _affine_min_norm(G, sub[None, :])[0]
            if np.all(mu > 1e-15):
                lam[:] = 0.0
                lam[sub] = mu
                break
            cur = lam[sub]
            neg = mu <= 1e-15
            theta = float(np.min(cur[neg] / (cur[neg] - mu[neg])))
            new = cur + theta * (mu - cur)
            lam[:] = 0.0
            lam[sub] = new
            corral = [int(q) for q, v in zip(sub, new) if v > 1e-15]
            if len(corral) == 1:
                lam[:] = 0.0
                lam[corral[0]] = 1.0
                break
    return lam


def _majority_value(G: np.ndarray, subset: np.ndarray) -> tuple[float, np.ndarray]:
    lam = min_norm_point(G[np.ix_(subset, subset)])
    beta = np.zeros(len(G))
    beta[subset] = lam
    return objective(G, beta), beta


def sup_median_local(G: np.ndarray, beta0: np.ndarray, *, max_rounds: int = 100) -> SupMedian:
    """Local search for max_{‖f‖≤1} med_q ⟨f, d_q⟩ from the witness β0 (e.g. BCD's).

    A state is a strict majority S; its value is the objective of the minimum-norm
    point of conv{a_q : q ∈ S} (exact, Wolfe). Start from the m blocks where β0's
    witness is largest, then repeat: re-take the top m of the current witness, or
    swap one block in S for one outside, while the objective improves. The result is
    never below β0's objective (β0 is feasible for its own top-m subset).
    """
    G = np.asarray(G, dtype=np.float64)
    Q = len(G)
    m = majority(Q)
    start_value = objective(G, beta0)
    best_value, best_beta = _majority_value(G, np.argsort(-(G @ beta0), kind="stable")[:m])
    if start_value > best_value:
        best_value, best_beta = start_value, beta0.copy()
    evaluated = 1
    for _ in range(max_rounds):
        improved = False
        subset = np.sort(np.argsort(-(G @ best_beta), kind="stable")[:m])
        value, beta = _majority_value(G, subset)
        evaluated += 1
        if value > best_value * (1 + 1e-12):
            best_value, best_beta, improved = value, beta, True
            continue
        outside = np.setdiff1d(np.arange(Q), subset)
        for i, j in itertools.product(range(m), outside):
            trial = subset.copy()
            trial[i] = j
            value, beta = _majority_value(G, trial)
            evaluated += 1
            if value > best_value * (1 + 1e-12):
                best_value, best_beta, improved = value, beta, True
                break
        if not improved:
            break
    active = tuple(int(q) for q in np.flatnonzero(np.abs(best_beta) > 0))
    return _finish(G, best_beta, active, "local-search", evaluated)


def bcd_fixed(G: np.ndarray, n_iter: int, *, variant: str, beta0: np.ndarray, step_decay: float = 1e-3) -> tuple[np.ndarray, list[float]]:
    """Algorithm 1 on a fixed partition, in the coordinates β of f = Σ β_q d_q.

    Each iteration finds the median block q_m of (Gβ)_q and moves towards its
    normalised indicator e_{q_m}/√G_{q_m q_m}: replaces β ("paper") or takes the damped
    step β ← β + η_t(ẽ − β), η_t = 1/(1 + 10⁻³ t) ("authors"). Returns the final β and
    the objective at the start of each iteration, then at the end.
    """
    beta = np.asarray(beta0, dtype=np.float64).copy()
    trace = []
    for t in range(n_iter):
        values = G @ beta
        trace.append(float(median_value(values)))
        q = int(np.argsort(values, kind="stable")[median_position(len(G))])
        target = np.zeros(len(G))
        if G[q, q] > 0:
            target[q] = 1.0 / math.sqrt(G[q, q])
        eta = 1.0 if variant == "paper" else 1.0 / (1.0 + step_decay * t)
        beta += eta * (target - beta)
    trace.append(float(median_value(G @ beta)))
    return beta, trace


# -- the mean-embedding problems ------------------------------------------------------


def factor(M: np.ndarray, *, tol: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
    """A with AAᵀ = M (PSD), by a Cholesky factorisation in increasing order of ‖a_q‖.

    Row q of A depends only on the blocks factored before it, so the ordinary blocks,
    taken first, get coordinates computed from their own entries of M alone: an
    outlier block whose entries are 10³⁰ times larger cannot spoil them (an
    eigendecomposition would mix all scales). A block whose new coordinate is below
    ``tol`` times its own norm is dependent on the previous ones and adds no axis.
    Returns A (Q × r) and the pivots: the r blocks that add an axis, whose rows form a
    lower-triangular r × r matrix.
    """
    from scipy.linalg import solve_triangular

    Q = len(M)
    A = np.zeros((Q, Q))
    pivots: list[int] = []
    for q in np.argsort(np.diag(M), kind="stable"):
        r = len(pivots)
        if r:
            A[q, :r] = solve_triangular(A[pivots, :r], M[pivots, q], lower=True)
        rest = float(M[q, q] - A[q, :r] @ A[q, :r])
        if rest > tol * max(float(M[q, q]), 1e-300):
            A[q, r] = math.sqrt(rest)
            pivots.append(int(q))
    return A[:, : len(pivots)], np.array(pivots, dtype=np.int64)


def block_weights(A: np.ndarray, pivots: np.ndarray, u: np.ndarray) -> np.ndarray:
    """β with Aᵀβ = u, supported on the pivots (a triangular solve, scale-safe)."""
    from scipy.linalg import solve_triangular

    beta = np.zeros(len(A))
    if len(pivots):
        beta[pivots] = solve_triangular(A[pivots].T, u, lower=False)
    return beta


def _depth_oracle(points: np.ndarray, u: np.ndarray) -> tuple[float, np.ndarray]:
    """D(u) = max_{‖e‖≤1} med_q ⟨e, a_q − u⟩ and a maximising unit direction e."""
    B = points - u
    H = B @ B.T
    Q = len(points)
    if Q <= MAX_ENUMERATE_BLOCKS:
        sol = sup_median_exact(H, dimension=points.shape[1])
    else:
        sol = sup_median_local(H, np.ones(Q))
    direction = B.T @ sol.beta
    norm = float(np.linalg.norm(direction))
    if norm == 0.0 or sol.value <= 0.0:
        return 0.0, np.zeros(points.shape[1])
    return sol.value, direction / norm


@attrs.frozen
class MinmaxCenter:
    """The minmax median-of-means point u* of Q points a_q, with its certificate."""

    u: np.ndarray
    objective: float  # min_u max_w med_q(‖u − a_q‖² − ‖w − a_q‖²) = D(u*)²
    upper: float  # D at the returned point
    lower: float  # certified lower bound on min_u D(u)
    iterations: int
    converged: bool
    exact_oracle: bool


def minmax_center(points: np.ndarray, *, tol: float = 1e-6, max_iter: int = 300, report: Callable[[int, int], None] | None = None) -> MinmaxCenter:
    """Solve min_u max_w med_q(‖u − a_q‖² − ‖w − a_q‖²) (paper Eq. 3 in block coordinates).

    With h = w − u the inner maximum is D(u)², D(u) = max_{‖e‖≤1} med_q ⟨e, a_q − u⟩
    (optimise the step length along e). D is convex in u (a maximum of distances to
    convex hulls), and by the minimax theorem min_u D = max over measures π on the ball
    with E_π e = 0 of E_π φ(e), φ(e) = med_q ⟨e, a_q⟩. Kelley's cutting-plane method
    solves the restricted master LP min t s.t. t ≥ φ(e_j) − ⟨e_j, u⟩ over the cuts
    found so far (a lower bound) and calls the exact oracle D at its solution (an
    upper bound), stopping when the gap is below ``tol`` times the scale of the points.
    The master LP is solved by HiGHS to its default tolerances (about 1e-7), so smaller
    gaps stall: at tol = 1e-7 a 5-point problem ran 300 iterations without converging,
    at 1e-6 it converges in 30. ``report(iteration, max_iter)`` is told of each iteration
    (an exact oracle at Q = 15 blocks takes about 30 ms, and a solve up to 300 of them).
    """
    Q, r = points.shape
    exact = Q <= MAX_ENUMERATE_BLOCKS
    if Q == 1:
        return MinmaxCenter(points[0].copy(), 0.0, 0.0, 0.0, 0, True, True)
    # a box that must hold u*: with u0 the coordinate-wise median and S0 the majority
    # nearest to it, D(u*) <= D(u0) and u* is within D(u*) of conv(a_S0), hence within
    # D(u0) + max_{q∈S0} ‖a_q − u0‖ of u0. It ignores far outliers (unlike a bounding box).
    u = np.asarray(np.median(points, axis=0), dtype=np.float64)
    d0, _ = _depth_oracle(points, u)
    near = np.sort(np.linalg.norm(points - u, axis=1))[majority(Q) - 1]
    radius = 1.01 * (d0 + near) + 1e-300
    scale = radius
    cuts_e: list[np.ndarray] = []
    cuts_phi: list[float] = []
    center = u.copy()
    best_u, upper, lower = u.copy(), math.inf, 0.0
    iterations, converged = 0, False
    for iterations in range(1, max_iter + 1):  # noqa: B007 - the count is reported after the loop
        if report is not None:
            report(iterations, max_iter)
        value, e = _depth_oracle(points, u)
        if value < upper:
            best_u, upper = u.copy(), value
        if upper - lower <= tol * scale:
            # an exact oracle's value below the certified lower bound is round-off, not an
            # optimum: the gap certifies nothing then
            converged = not exact or lower - upper <= tol * scale
            break
        if not np.any(e):
            converged = True  # D(u) = 0: u is optimal
            lower = 0.0
            break
        cuts_e.append(e)
        cuts_phi.append(value + float(e @ u))  # φ(e) = D(u) + ⟨e, u⟩ (shift invariance)
        # master LP over (u, t): min t  s.t.  −⟨e_j, u⟩ − t ≤ −φ_j,  t ≥ 0,  |u_i| ≤ radius
        E = np.array(cuts_e)
        A_ub = np.hstack([-E, -np.ones((len(E), 1))])
        b_ub = -np.array(cuts_phi)
        cost = np.zeros(r + 1)
        cost[-1] = 1.0
        bounds = [(c - radius, c + radius) for c in center] + [(0.0, None)]
        res = linprog(cost, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs")
        if res.status != 0:
            break
        lower = max(lower, float(res.x[r]))
        # in-out stabilisation: query between the master's point and the best one
        # (Ben-Ameur & Neto), which avoids Kelley's zig-zag far from the optimum
        u = 0.5 * res.x[:r] + 0.5 * best_u
    return MinmaxCenter(best_u, upper**2, upper, lower, iterations, converged, exact)


def weiszfeld(M: np.ndarray, *, tol: float = 1e-12, max_iter: int = 10_000) -> tuple[np.ndarray, int, float]:
    """Geometric median of the Q points with Gram M, as simplex weights β (u = Σ β_q a_q).

    Weiszfeld's iteration β ← w / Σw with w_q = 1/‖u − a_q‖ needs only
    ‖u − a_q‖² = βᵀMβ − 2(Mβ)_q + M_qq. A point that lands on some a_q uses the
    Vardi–Zhang rule (stay there if the other points' pull is at most 1). Returns β,
    the iterations and the final relative step.
    """
    Q = len(M)
    beta = np.full(Q, 1.0 / Q)
    diag = np.diag(M)
    # the median block norm, not the largest: an outlier block must not set the
    # tolerance (it would make every step look converged)
    scale = max(float(np.median(diag)), 1e-300)
    step = math.inf
    for it in range(1, max_iter + 1):
        Mb = M @ beta
        d2 = np.maximum(beta @ Mb - 2.0 * Mb + diag, 0.0)
        d = np.sqrt(d2)
        at = d <= 1e-14 * math.sqrt(scale)
        if at.any():
            k = int(np.argmax(at))
            w = np.where(at, 0.0, 1.0 / np.where(at, 1.0, d))
            # pull of the other points at a_k: ‖Σ_{q≠k} (a_q − a_k)/‖a_q − a_k‖‖
            pull_w = w / max(w.sum(), 1e-300)
            dirs = pull_w @ M @ pull_w - 2 * pull_w @ M[:, k] + M[k, k]
            if w.sum() * math.sqrt(max(dirs, 0.0)) <= 1.0:
                beta = np.zeros(Q)
                beta[k] = 1.0
                return beta, it, 0.0
            new = pull_w
        else:
            w = 1.0 / d
            new = w / w.sum()
        delta = new - beta
        step = math.sqrt(max(float(delta @ M @ delta), 0.0)) / math.sqrt(scale)
        beta = new
        if step <= tol:
            return beta, it, step
    return beta, max_iter, step
