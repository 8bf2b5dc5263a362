"""The linear NTK flow job next to Fig. 2: the MLP (every activation) and SA kernels on SST
(:mod:`featlearn.features.theory`); writes the predicted token scores, the shared bias and the flow's
training loss."""

from __future__ import annotations

import numpy as np
import pandas as pd

from featlearn.features.experiments import _log, load_splits
from featlearn.io import write_csv


def theory_job(cfg: dict, inputs: dict, outputs: dict, ctx) -> None:
    """Linear NTK flow on the (subsampled) SST training set for the MLP with every activation and for SA,
    at each sigma_v. All MLP flows share one step (from the largest kernel), as do the SA flows, so that
    the sigma_v settings are compared at equal flow time. Writes the flow curves (step, training loss,
    shared bias mu b) to ``outputs["curves"]`` and the predicted scores rho u_e + mu b of the extracted tokens
    at the logged steps to ``outputs["scores"]``. ``inputs``: the prepared SST ``train`` split, its ``vocab``
    and its ``extracted`` units (registry ``features_theory``)."""
    from featlearn.features import theory as T

    rows, vocab = load_splits({**cfg, "dataset": "sst", "max_eval": 0}, inputs)
    index = {w: i for i, w in enumerate(vocab)}
    train_rows = rows["train"]
    seqs = [[index.get(t, index.get("unk", 0)) for t in text.split()] or [index.get("unk", 0)] for _, text in train_rows]
    labels = np.array([y for y, _ in train_rows])
    lengths = np.array([len(s) for s in seqs], dtype=float)
    extracted = pd.read_csv(inputs["extracted"], keep_default_na=False, na_values=[""])
    units = [u for u in extracted.loc[extracted["kind"] == "token", "unit"] if u in index]
    probe_ids = np.array([index[u] for u in units])
    se, sw = cfg["sigma_e"], cfg["sigma_w"]
    C = T.count_matrix(seqs, len(vocab))
    d = cfg["d"]
    attn_cache: dict[int, np.ndarray] = {}

    def sa_weights(n: int) -> np.ndarray:  # column sums of E(alpha) at initialisation (Theorem 4.6)
        if n not in attn_cache:
            attn_cache[n] = T.sa_expected_attention(n, d, se, samples=cfg["sa_samples"], seed=cfg["seed"]).sum(0)
        return attn_cache[n]

    C_sa = T.count_matrix(seqs, len(vocab), position_weights=sa_weights)
    flows = []
    for model in cfg["models"]:
        act = "relu" if model == "sa" else model.split("-")[1]
        for sv in cfg["sigma_v"]:
            if model == "sa":
                rho, mu = T.sa_rho(se, sv), 0.0
            elif act == "relu":
                rho, mu = T.relu_mlp_constants(se, sw, sv)
            else:
                rho, mu = T.mlp_constants(act, se, sw, sv)
            flows.append((model, act, sv, rho, mu))
    # early steps on a geometric grid too: the fast modes (shared bias, SA) move before the first log_every
    log_steps = np.unique(np.geomspace(1, cfg["steps"], cfg["geometric_logs"]).astype(int)) if cfg["geometric_logs"] else []
    curve_frames, score_frames = [], []
    for family in ("mlp", "sa"):
        group = [f for f in flows if (f[0] == "sa") == (family == "sa")]
        if not group:
            continue
        Cf = C_sa if family == "sa" else C
        eta = min(T.stable_step(Cf, lengths, rho, mu) for _, _, _, rho, mu in group)
        for model, act, sv, rho, mu in group:
            out = T.ntk_flow(Cf, labels, lengths, rho, mu, eta, cfg["steps"], probe_ids, cfg["log_every"],
                             log_steps=log_steps)
            _log(f"theory {model} sigma_v={sv:g}: rho={rho:.4g} mu={mu:.4g} eta={eta:.4g}, "
                 f"loss {out['loss'][0]:.4f} -> {out['loss'][-1]:.4f}")
            meta = {"model": model, "activation": act, "sigma_v": sv, "rho": rho, "mu": mu, "eta": eta}
            curve_frames.append(pd.DataFrame({**meta, "step": out["step"], "flow_time": out["step"] * eta,
                                              "loss": out["loss"], "bias": out["bias"]}))
            n_logs = len(out["step"])
            score_frames.append(pd.DataFrame({
                "model": model, "activation": act, "sigma_v": sv,
                "step": np.repeat(out["step"], len(units)), "unit": np.tile(units, n_logs),
                "score": out["scores"].reshape(-1)}))
    write_csv(pd.concat(curve_frames, ignore_index=True), outputs["curves"])
    write_csv(pd.concat(score_frames, ignore_index=True), outputs["scores"])
