"""Joint dynamics of attention logits and MLP weights (JoMA Sec. 2-3, Theorem 1; Figs. 2-3).

Model (Eq. 1), one query token m, orthonormal embeddings U = [U_C, u_q] (the first M_C + 1 columns
of the d x d identity, so U_C^T u_q = 0):
    b = sigma(z / tau) o x / A,   f = U_C b + u_q,   h_k = phi(w_k^T f),   v_k := U_C^T w_k
    linear:  sigma = id,  A = 1
    exp:     sigma = exp, A = const
    softmax: sigma = exp, A = 1^T (exp(z / tau) o x)
Data (Fig. 2 recipe [C]): X (M_C x K) holds one token-frequency vector x per column; sample k is
column k with label k. Rows are U[0, 0.5); in the "smooth" setting the M_distinct first rows are
replaced by exp(-(l - M_distinct k / K)^2 / width); columns are normalised to sum 1.
Training: full-batch gradient descent on (z, W) (and a readout Y where the model has one) of the
cross-entropy, z and W updated jointly with one learning rate (Eq. 2 is its gradient flow).

Theorem 1 (first integral of Eq. 2; squares element-wise, c fixed by the initial state):
    linear:  z^2 = sum_k v_k^2 + c
    exp:     z   = sum_k v_k^2 / (2 tau) + c                      (zero init: c = 0)
    softmax: z  ~= (sum_k v_k^2 - b_bar sum_k ||v_k||^2) / (2 tau) + c,  b_bar = E[b] ~= x_bar
  For softmax the estimate of Fig. 2 [C] is z_hat = z_hat_1 + z_hat_2 + c with
    z_hat_1 = sum_k v_k^2 / (2 tau),  z_hat_2 = -x_bar ||W||_F^2 / (2 tau),  x_bar = mean_k X[:, k];
  ||W||_F^2 differs from sum_k ||v_k||^2 only by the rows of W outside U_C, which the unused
  embedding rows keep constant (absorbed in c) up to the residual row u_q.
Discrete steps (exp case): for every sample, tau dL/dz = sum_k v_k o dL/dv_k, so one step of size
lr changes tau z - sum_k v_k^2 / 2 by exactly -lr^2 sum_k (dL/dv_k)^2 / 2: the invariant holds up to
a discretisation error that vanishes as lr -> 0 at fixed time lr * steps.
NC(a, b) (normalised correlation, [C]): cosine of a and b after subtracting their means.
"""

from __future__ import annotations

import itertools
import sys
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from featlearn.io import write_csv

SETTINGS = ("smooth", "random")


# ----------------------------------------------------------------------------- data and metrics


def token_frequencies(setting: str, rng: np.random.Generator, m_distinct: int, m_common: int, K: int,
                      noise_high: float = 0.5, width: float = 30.0) -> np.ndarray:
    """X (M_C x K), one frequency vector per class (column); the Fig. 2 recipe [C]."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown X setting {setting!r}; expected one of {SETTINGS}")
    X = rng.uniform(0.0, noise_high, size=(m_distinct + m_common, K))
    if setting == "smooth":  # distinct tokens drift smoothly with the class label [C]
        l, k = np.arange(m_distinct)[:, None], np.arange(K)[None, :]
        X[:m_distinct] = np.exp(-((l - m_distinct * k / K) ** 2) / width)
    return X / X.sum(axis=0, keepdims=True)


def nc(a, b) -> np.ndarray:
    """Normalised correlation along the last axis: cosine after mean-centring (NaN for a constant)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - b.mean(axis=-1, keepdims=True)
    den = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (a * b).sum(axis=-1) / np.where(den > 0, den, 1.0), np.nan)


# ----------------------------------------------------------------------------- model (Eq. 1)


@dataclass(frozen=True)
class Spec:
    """What the model is: attention kind, temperature tau, constant A (exp), MLP nonlinearity phi and
    whether the hidden nodes feed a trained readout Y (else node k is the logit of class k)."""

    attention: str = "softmax"
    tau: float = 0.5
    A: float = 1.0
    phi: str = "linear"
    readout: bool = False


_PHI = {"linear": lambda u: u, "tanh": torch.tanh}


def embeddings(d: int, m_c: int) -> torch.Tensor:
    """U = [U_C, u_q] (d x (M_C + 1)): orthonormal, the first columns of the identity [C]."""
    if d < m_c + 1:
        raise ValueError(f"embedding dimension d={d} must be at least M_C + 1 = {m_c + 1}")
    return torch.eye(d, dtype=torch.float64)[:, : m_c + 1]


def attention_scores(z: torch.Tensor, X: torch.Tensor, spec: Spec) -> torch.Tensor:
    """b = sigma(z / tau) o x / A for every sample: z [R, M_C], X [R, M_C, N] -> [R, M_C, N]."""
    if spec.attention == "linear":
        return (z / spec.tau)[:, :, None] * X
    if spec.attention == "exp":
        return torch.exp(z / spec.tau)[:, :, None] * X / spec.A
    if spec.attention == "softmax":
        e = torch.exp((z - z.max(dim=1, keepdim=True).values) / spec.tau)[:, :, None] * X  # shift-invariant
        return e / e.sum(dim=1, keepdim=True)
    raise ValueError(f"unknown attention {spec.attention!r}; expected linear, exp or softmax")


def logits(params: dict[str, torch.Tensor], X: torch.Tensor, U: torch.Tensor, spec: Spec) -> torch.Tensor:
    """Class logits [R, N, classes] of Eq. 1: f = U_C b + u_q, h_k = phi(w_k^T f) (then Y h)."""
    b = attention_scores(params["z"], X, spec)
    f = U[:, :-1] @ b + U[:, -1][:, None]  # [R, d, N]; residual u_q
    h = _PHI[spec.phi](torch.einsum("rdn,rdk->rnk", f, params["W"]))
    return torch.einsum("rnk,rck->rnc", h, params["Y"]) if spec.readout else h


def loss_per_run(params: dict[str, torch.Tensor], X: torch.Tensor, U: torch.Tensor, spec: Spec) -> torch.Tensor:
    """Mean cross-entropy of each run [R]; sample k (column k of X) has label k."""
    out = logits(params, X, U, spec)
    labels = torch.arange(out.shape[1])
    return -torch.log_softmax(out, dim=-1)[:, labels, labels].mean(dim=1)


def gd(params: dict[str, torch.Tensor], X: torch.Tensor, U: torch.Tensor, spec: Spec, lr: float, steps: int,
       log_every: int, log, tag: str = "") -> None:
    """Full-batch gradient descent on all params; runs are independent, so the gradient of the summed
    loss is each run's own gradient. Calls log(step, params, loss) at step 0, every log_every steps
    and at the end (state after `step` updates)."""
    t0 = time.time()
    for step in range(steps + 1):
        for p in params.values():
            p.grad = None
        loss = loss_per_run(params, X, U, spec)
        if step % log_every == 0 or step == steps:
            log(step, params, loss.detach())
        if step == steps:
            break
        loss.sum().backward()
        with torch.no_grad():
            for p in params.values():
                p -= lr * p.grad
        if (step + 1) % max(1, steps // 5) == 0:
            print(f"[joma] {tag} step {step + 1}/{steps} mean loss {loss.mean().item():.4f} ({time.time() - t0:.1f}s)",
                  file=sys.stderr, flush=True)


def _runs(cfg: dict) -> pd.DataFrame:
    grid = list(itertools.product(cfg["settings"], range(1, cfg["seeds"] + 1)))
    return pd.DataFrame({"setting": [s for s, _ in grid], "seed": [k for _, k in grid]})


def _data(cfg: dict, runs: pd.DataFrame) -> tuple[torch.Tensor, list[np.random.Generator]]:
    """X [R, M_C, K] and one generator per run (seeded by the seed, so both settings share noise)."""
    rngs = [np.random.default_rng(int(seed)) for seed in runs["seed"]]
    X = np.stack([
        token_frequencies(s, rng, cfg["m_distinct"], cfg["m_common"], cfg["K"], cfg["noise_high"], cfg["width"])
        for s, rng in zip(runs["setting"], rngs)
    ])
    return torch.from_numpy(X), rngs


def _grid_table(runs: pd.DataFrame, steps: list[int], values: np.ndarray, name: str, **extra) -> pd.DataFrame:
    """Tidy rows from values [S, R] (per logged step and run) or [S, R, J] (with a column `name` = j)."""
    S, R = values.shape[:2]
    J = values.shape[2] if values.ndim == 3 else 1
    s_idx, r_idx, j_idx = (a.ravel() for a in np.meshgrid(np.arange(S), np.arange(R), np.arange(J), indexing="ij"))
    cols = {"setting": runs["setting"].to_numpy()[r_idx], "seed": runs["seed"].to_numpy()[r_idx]}
    cols.update({k: (np.asarray(v)[s_idx] if np.ndim(v) else v) for k, v in extra.items()})
    cols["step"] = np.asarray(steps)[s_idx]
    if values.ndim == 3:
        cols[name] = j_idx
    return pd.DataFrame({**cols, "value": values.ravel()})


def _quantities(runs: pd.DataFrame, steps: list[int], series: dict[str, list[np.ndarray]], **extra) -> pd.DataFrame:
    """Long table setting, seed, [extra], step, quantity, value from {quantity: [per-step arrays [R]]}."""
    frames = []
    for q, vals in series.items():
        df = _grid_table(runs, steps, np.stack(vals), "", **extra)
        df.insert(len(df.columns) - 1, "quantity", q)
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


# ----------------------------------------------------------------------------- Figs. 2-3 (softmax)


def slope(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares slope of y regressed on x along the last axis (NaN for a constant x)."""
    x = x - x.mean(axis=-1, keepdims=True)
    y = y - y.mean(axis=-1, keepdims=True)
    den = (x * x).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (x * y).sum(axis=-1) / np.where(den > 0, den, 1.0), np.nan)


def softmax_invariant(V: torch.Tensor, W: torch.Tensor, x_bar: torch.Tensor, tau: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The two parts of Theorem 1's softmax estimate [C]: sum_k v_k^2 / (2 tau) and -x_bar ||W||^2 / (2 tau)."""
    part1 = (V**2).sum(dim=-1) / (2 * tau)
    part2 = -x_bar * (W**2).sum(dim=(-2, -1))[:, None] / (2 * tau)
    return part1, part2


def softmax_tables(cfg: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Fig. 2 and Fig. 3: linear MLP + softmax attention, joint GD on (z, W), both X settings x seeds
    (on the CPU, with the job's ``ctx.threads`` torch threads).

    steps:    setting, seed, step, quantity, value; quantity in loss, nc_full, nc_part1, nc_part2
                  (NC of z_hat, z_hat_1, z_hat_2 with z), rel_err (||z - z_hat|| / ||z||), slope (of z_hat
                  regressed on z: the scale NC does not see), and nc_path, slope_path: the same for the
                  estimate whose second part integrates the attention's sample mean b_bar(t) along the run
                  (trapezoids over the logged steps) instead of fixing it at x_bar [D: a diagnostic].
    matrices: setting, seed, matrix, row, col, value; matrix in X (token x class), V_init, V_final
                  (V = U_C^T W, token x node).
    v0:       setting, seed, step, component, value: the components of v_0 (column 0 of V).
    """
    runs = _runs(cfg)
    X, rngs = _data(cfg, runs)
    R, m_c, K = X.shape
    U = embeddings(cfg["d"], m_c)
    spec = Spec(attention="softmax", tau=cfg["tau"], phi="linear", readout=False)
    # W, z ~ N(0, 1) * init_std [C]
    W = torch.from_numpy(np.stack([rng.standard_normal((cfg["d"], K)) for rng in rngs]) * cfg["init_std"])
    z = torch.from_numpy(np.stack([rng.standard_normal(m_c) for rng in rngs]) * cfg["init_std"])
    params = {"z": z.requires_grad_(), "W": W.requires_grad_()}
    x_bar = X.mean(dim=2)  # b_bar at uniform logits, as in [C]
    p1, p2 = softmax_invariant(U[:, :-1].T @ params["W"].detach(), params["W"].detach(), x_bar, spec.tau)
    c = params["z"].detach() - p1 - p2  # so that z_hat(0) = z(0)

    logged: list[int] = []
    series: dict[str, list[np.ndarray]] = {
        q: [] for q in ("loss", "nc_full", "nc_part1", "nc_part2", "rel_err", "slope", "nc_path", "slope_path")
    }
    # the path estimate: z(0) + (sum_k v_k^2 |_0^t - int b_bar d ||W||^2) / (2 tau), b_bar(t) the attention's mean
    path = {"prev": None, "integral": torch.zeros_like(x_bar)}
    v0_hist: list[np.ndarray] = []
    V_init = U[:, :-1].T @ params["W"].detach()

    def log(step, prm, loss):
        zz, WW = prm["z"].detach(), prm["W"].detach()
        V = U[:, :-1].T @ WW  # [R, M_C, K]
        a, b = softmax_invariant(V, WW, x_bar, spec.tau)
        zn, an, bn, hn = zz.numpy(), a.numpy(), b.numpy(), (a + b + c).numpy()
        logged.append(step)
        series["loss"].append(loss.numpy())
        series["nc_full"].append(nc(hn, zn))
        series["nc_part1"].append(nc(an, zn))
        series["nc_part2"].append(nc(bn, zn))
        series["rel_err"].append(np.linalg.norm(zn - hn, axis=1) / np.linalg.norm(zn, axis=1))
        series["slope"].append(slope(zn, hn))
        b_bar, norm2 = attention_scores(zz, X, spec).mean(dim=2), (WW**2).sum(dim=(-2, -1))
        if path["prev"] is None:
            path["start"] = (zz.clone(), (V**2).sum(dim=-1))
        else:
            b0, n0 = path["prev"]
            path["integral"] += 0.5 * (b0 + b_bar) * (norm2 - n0)[:, None]
        path["prev"] = (b_bar, norm2)
        z0, v2_0 = path["start"]
        hp = (z0 + ((V**2).sum(dim=-1) - v2_0 - path["integral"]) / (2 * spec.tau)).numpy()
        series["nc_path"].append(nc(hp, zn))
        series["slope_path"].append(slope(zn, hp))
        v0_hist.append(V[:, :, 0].numpy().copy())

    gd(params, X, U, spec, cfg["lr"], cfg["steps"], cfg["log_every"], log, tag=f"softmax sim ({R} runs)")
    V_final = U[:, :-1].T @ params["W"].detach()
    mats = []
    for name, M in (("X", X), ("V_init", V_init), ("V_final", V_final)):
        M = M.numpy()  # [R, rows, cols]: rows as "steps" of _grid_table, so transpose to [rows, R, cols]
        df = _grid_table(runs, list(range(M.shape[1])), M.transpose(1, 0, 2), "col", matrix=name).rename(columns={"step": "row"})
        mats.append(df[["setting", "seed", "matrix", "row", "col", "value"]])
    write_csv(_quantities(runs, logged, series), outputs["steps"])
    write_csv(pd.concat(mats, ignore_index=True), outputs["matrices"])
    write_csv(_grid_table(runs, logged, np.stack(v0_hist), "component"), outputs["v0"])


# ----------------------------------------------------------------------------- claim 1 (exp attention)


def exp_invariant_error(z: torch.Tensor, V: torch.Tensor, tau: float) -> torch.Tensor:
    """||z - sum_k v_k^2 / (2 tau)|| / ||z|| per run (Theorem 1, exp attention, zero init so c = 0)."""
    return (z - (V**2).sum(dim=-1) / (2 * tau)).norm(dim=-1) / z.norm(dim=-1)


def exp_tables(cfg: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Claim 1: exp attention, zero init of (z, W), joint GD on (z, W, Y) with a nonlinear MLP
    h = tanh(W^T f) feeding a trained readout Y [D] (tanh because phi'(0) != 0 lets a zero-initialised
    W move; the readout makes the backpropagated gradient g_h non-stationary, so nothing of
    Assumption 1 is used). A = cfg["A"] (1 / M_C makes b = M_C exp(z / tau) o x average 1 at z = 0 [D]),
    so the run leaves the linear regime: the loss falls far below ln K and z / tau reaches O(1).
    Every lr in cfg["lrs"] runs to the same time lrs[0] * steps, logging every log_every * lrs[0] / lr
    steps (claim 1 reads step 100 at lr 0.01, so log_every should divide 100).

    Output ``steps``: setting, seed, lr, step, time, quantity, value; quantity in loss, rel_err
    (||z - sum_k v_k^2/(2 tau)|| / ||z||, NaN while z = 0), nc (NC of sum_k v_k^2/(2 tau) with z), z_norm.
    """
    runs = _runs(cfg)
    X, rngs = _data(cfg, runs)
    R, m_c, K = X.shape
    U = embeddings(cfg["d"], m_c)
    spec = Spec(attention="exp", tau=cfg["tau"], A=cfg["A"], phi="tanh", readout=True)
    # readout Y ~ N(0, readout_std^2) [D]: it cannot start at zero, or no gradient would ever reach W
    Y0 = np.stack([rng.standard_normal((K, cfg["hidden"])) for rng in rngs]) * cfg["readout_std"]
    lr0, frames = cfg["lrs"][0], []
    for lr in cfg["lrs"]:
        ratio = lr0 / lr
        if abs(ratio - round(ratio)) > 1e-9:
            raise ValueError(f"exp lrs must divide the first one ({lr0}) a whole number of times; got {lr}")
        steps, log_every = cfg["steps"] * round(ratio), cfg["log_every"] * round(ratio)
        params = {
            "z": torch.zeros(R, m_c, dtype=torch.float64, requires_grad=True),  # zero init: c = 0
            "W": torch.zeros(R, cfg["d"], cfg["hidden"], dtype=torch.float64, requires_grad=True),
            "Y": torch.from_numpy(Y0.copy()).requires_grad_(),
        }
        logged: list[int] = []
        series: dict[str, list[np.ndarray]] = {q: [] for q in ("loss", "rel_err", "nc", "z_norm")}

        def log(step, prm, loss):
            zz, V = prm["z"].detach(), U[:, :-1].T @ prm["W"].detach()
            zn = zz.numpy()
            norm = np.linalg.norm(zn, axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                rel = exp_invariant_error(zz, V, spec.tau).numpy()
            logged.append(step)
            series["loss"].append(loss.numpy())
            series["rel_err"].append(np.where(norm > 0, rel, np.nan))
            series["nc"].append(nc((V**2).sum(dim=-1).numpy() / (2 * spec.tau), zn))
            series["z_norm"].append(norm)

        gd(params, X, U, spec, lr, steps, log_every, log, tag=f"exp sim lr={lr:g} ({R} runs)")
        frames.append(_quantities(runs, logged, series, lr=lr, time=np.asarray(logged) * lr))
    write_csv(pd.concat(frames, ignore_index=True), outputs["steps"])
