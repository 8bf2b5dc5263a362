"""Template tasks and their train/validation/test splits on disjoint alphabets.

Def. 2.1 [P]: a template is z ∈ (X ∪ W)^k over regular tokens X and wildcards W. A substitution map
s: W -> X is injective; sub(z, s)_i = z_i if z_i ∈ X, else s(z_i). A string x matches z if
x = sub(z, s) with s(W) ∩ {z_i} = ∅ (substituted tokens never occur among the template's own tokens).
Def. 2.2 [P]: a sample is (sub(z, s), f*(z) + ξ) with z ~ μ_tmplt, s ~ μ_sub,z, ξ ~ N(0, σ²).
App. J [P]: in next-token tasks the label is a symbol; the target token is sub(f*(z), s).

Splits [P App. A/B][C]: the n training samples fill their wildcards from a training alphabet of n tokens;
the validation and test sets have 100 samples each, each over its own alphabet of 100 tokens. Template
counts per split ~ Multinomial(N, p) (drawn here as N i.i.d. template indices, which has the same counts
law); wildcards are filled by sampling without replacement within a sample. Templates of one task have
the same length and are pairwise non-equivalent.

Vocabulary [C]: wildcard placeholders (ids that never occur in an input, kept as the authors' layout
does) + the task's regular tokens + A_train + A_val + A_test, in disjoint id ranges.

Everything is vectorised over samples (no per-sample Python loop) and deterministic given the seed:
each split draws from its own child of ``numpy.random.SeedSequence(seed)``.

Tasks (reference list): T1 ``program`` "α=1;β=-1;print(α)" -> +1 / print(β) -> -1; T2
``program_next_token`` 'α="γ";β="δ";print(α)' -> γ / print(β) -> δ; T3 ``copy`` α -> α; T4
``same_different`` αα -> +1, αβ -> -1; T5 ``aba_abb`` αβα -> +1, αββ -> -1; T6 ``abab_aabb`` αβαβ -> +1,
ααββ -> -1; T7 ``majority`` (k): α × {α, β}^(k-1), +1 iff α fills a strict majority of positions 2..k
(|{i : z_i = z_1}| > (k + 1)/2); T8 ``random``: r pairwise non-equivalent templates drawn uniformly from
(W ∪ X)^L with Gaussian labels centred and scaled so that the always-0 predictor has MSE 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

KINDS = ("regression", "next_token")
GREEK = ("α", "β", "γ", "δ", "ε", "ζ", "η", "θ", "ι", "κ", "λ", "μ", "ν", "ξ", "ο", "π", "ρ", "σ", "τ", "υ")
SPLITS = ("train", "val", "test")


def canonical(template: tuple[str, ...], wildcards) -> tuple:
    """Equivalence class of a template: regular tokens kept, wildcards renamed by first appearance.

    Two templates of the same length are equivalent (the authors' check, [C] facts) iff they have the same
    regular tokens at the same positions and the same equality pattern among wildcard positions.
    """
    names: dict[str, int] = {}
    out = []
    for sym in template:
        if sym in wildcards:
            out.append(("W", names.setdefault(sym, len(names))))
        else:
            out.append(("X", sym))
    return tuple(out)


@dataclass(frozen=True)
class TemplateTask:
    """A template distribution: templates (tuples of symbols), their labels, the wildcard alphabet.

    ``labels`` are floats (regression) or symbols (next-token: a wildcard of the template or a regular
    token). ``probs`` defaults to uniform over templates; ``noise`` is the label-noise sd σ.
    """

    name: str
    templates: tuple[tuple[str, ...], ...]
    labels: tuple
    wildcards: tuple[str, ...]
    kind: str = "regression"
    probs: tuple[float, ...] | None = None
    noise: float = 0.0
    params: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"task {self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        if not self.templates:
            raise ValueError(f"task {self.name}: no templates")
        if len(self.labels) != len(self.templates):
            raise ValueError(f"task {self.name}: {len(self.templates)} templates but {len(self.labels)} labels")
        if len({len(t) for t in self.templates}) != 1:
            raise ValueError(f"task {self.name}: templates must all have the same length")
        forms = [canonical(t, self.wildcards) for t in self.templates]
        for i in range(len(forms)):
            for j in range(i + 1, len(forms)):
                if forms[i] == forms[j]:
                    raise ValueError(f"task {self.name}: templates {self.templates[i]} and {self.templates[j]} are equivalent")
        if self.probs is not None:
            p = np.asarray(self.probs, dtype=float)
            if len(p) != len(self.templates) or (p < 0).any() or abs(p.sum() - 1) > 1e-9:
                raise ValueError(f"task {self.name}: probs must be a distribution over the {len(self.templates)} templates")
        if self.kind == "next_token":
            for t, lab in zip(self.templates, self.labels):
                if not isinstance(lab, str):
                    raise TypeError(f"task {self.name}: next-token labels are symbols, got {lab!r}")
                if lab in self.wildcards and lab not in t:
                    raise ValueError(f"task {self.name}: label wildcard {lab} does not occur in template {t}")
        else:
            for lab in self.labels:
                float(lab)
        if self.noise < 0:
            raise ValueError(f"task {self.name}: noise must be >= 0")

    @property
    def length(self) -> int:
        return len(self.templates[0])

    @property
    def r(self) -> int:
        return len(self.templates)

    @property
    def probabilities(self) -> np.ndarray:
        if self.probs is None:
            return np.full(self.r, 1.0 / self.r)
        return np.asarray(self.probs, dtype=float)

    @property
    def regular_tokens(self) -> tuple[str, ...]:
        """Regular tokens of the templates (and of next-token labels), in order of first appearance; a random
        task's (T8) are its whole alphabet X (``n_regular`` tokens X0, X1, ...), so that every draw of its
        templates has the same vocabulary."""
        seen: dict[str, None] = dict.fromkeys(f"X{i}" for i in range(int(self.params.get("n_regular", 0))))
        for t in self.templates:
            for sym in t:
                if sym not in self.wildcards:
                    seen.setdefault(sym)
        if self.kind == "next_token":
            for lab in self.labels:
                if lab not in self.wildcards:
                    seen.setdefault(lab)
        return tuple(seen)

    def template_wildcards(self, j: int) -> tuple[str, ...]:
        """Wildcards occurring in template j, in order of first appearance."""
        return tuple(dict.fromkeys(s for s in self.templates[j] if s in self.wildcards))

    @property
    def max_wildcards(self) -> int:
        """max_z |W_z|: the most wildcards any one template substitutes."""
        return max(len(self.template_wildcards(j)) for j in range(self.r))

    def trivial_mse(self) -> float:
        """Population MSE of the always-0 predictor: E[f*(z)^2] + σ² (regression only)."""
        if self.kind != "regression":
            raise ValueError("trivial_mse is defined for regression tasks")
        y = np.asarray(self.labels, dtype=float)
        return float(self.probabilities @ y**2 + self.noise**2)


def diversity(task: TemplateTask, alphabet_size: int) -> float:
    """Data diversity ρ (Def. 3.3) of the uniform substitution generator: each token of an alphabet of size
    A is substituted with probability |W_z| / A, so ρ = A / max_z |W_z| (A = n for training)."""
    return alphabet_size / task.max_wildcards


# --------------------------------------------------------------------------------------- the tasks


def program_regression() -> TemplateTask:
    """T1 [P Eq. 1]: "α=1;β=-1;print(α)" -> +1 and "α=1;β=-1;print(β)" -> -1, one token per symbol [D]."""
    body = ("α", "=", "1", ";", "β", "=", "-1", ";", "print", "(")
    return TemplateTask("program", (body + ("α", ")"), body + ("β", ")")), (1.0, -1.0), ("α", "β"))


def program_next_token() -> TemplateTask:
    """T2 [P Eq. 2]: 'α="γ";β="δ";print(α)' -> γ and 'α="γ";β="δ";print(β)' -> δ, one token per symbol [D]."""
    body = ("α", "=", '"', "γ", '"', ";", "β", "=", '"', "δ", '"', ";", "print", "(")
    return TemplateTask(
        "program_next_token", (body + ("α", ")"), body + ("β", ")")), ("γ", "δ"), ("α", "β", "γ", "δ"), kind="next_token"
    )


def copy_task() -> TemplateTask:
    """T3 [P Sec. 4]: template "α" labelled by α (next-token)."""
    return TemplateTask("copy", (("α",),), ("α",), ("α",), kind="next_token")


def same_different() -> TemplateTask:
    """T4 [P Sec. 1]: αα -> +1, αβ -> -1."""
    return TemplateTask("same_different", (("α", "α"), ("α", "β")), (1.0, -1.0), ("α", "β"))


def aba_abb() -> TemplateTask:
    """T5 [P App. B]: αβα -> +1, αββ -> -1."""
    return TemplateTask("aba_abb", (("α", "β", "α"), ("α", "β", "β")), (1.0, -1.0), ("α", "β"))


def abab_aabb() -> TemplateTask:
    """T6 [P App. B]: αβαβ -> +1, ααββ -> -1."""
    return TemplateTask("abab_aabb", (("α", "β", "α", "β"), ("α", "α", "β", "β")), (1.0, -1.0), ("α", "β"))


def majority(k: int) -> TemplateTask:
    """T7 [P App. B]: the 2^(k-1) templates α × {α, β}^(k-1); +1 iff |{i : z_i = z_1}| > (k + 1)/2, i.e. α
    occurs more often than β among positions 2..k (ties, possible for odd k, are -1)."""
    if k < 2:
        raise ValueError("majority needs k >= 2")
    templates, labels = [], []
    for bits in range(2 ** (k - 1)):
        rest = tuple("β" if (bits >> (k - 2 - i)) & 1 else "α" for i in range(k - 1))
        z = ("α",) + rest
        templates.append(z)
        labels.append(1.0 if sum(s == "α" for s in z) > (k + 1) / 2 else -1.0)
    return TemplateTask(f"majority_{k}", tuple(templates), tuple(labels), ("α", "β"), params={"k": k})


def random_templates(length: int, n_wildcards: int, n_regular: int, r: int, seed: int, max_tries: int = 100_000) -> TemplateTask:
    """T8 [P App. B]: r templates drawn uniformly from (W ∪ X)^L (|W| = n_wildcards, |X| = n_regular),
    conditioned on being pairwise non-equivalent; labels g ~ N(0, 1) per template, then centred and scaled
    so that the uniform mean of the labels' squares is 1 (r = 2 gives ±1)."""
    if r < 2:
        raise ValueError("random templates need r >= 2 (labels are centred)")
    if n_wildcards < 1 or n_wildcards > len(GREEK):
        raise ValueError(f"n_wildcards must be in 1..{len(GREEK)}")
    wild = GREEK[:n_wildcards]
    symbols = wild + tuple(f"X{i}" for i in range(n_regular))
    rng = np.random.default_rng(np.random.SeedSequence([seed, length, n_wildcards, n_regular, r]))
    templates: list[tuple[str, ...]] = []
    forms: set = set()
    for _ in range(max_tries):
        z = tuple(symbols[i] for i in rng.integers(0, len(symbols), size=length))
        form = canonical(z, wild)
        if form not in forms:
            forms.add(form)
            templates.append(z)
            if len(templates) == r:
                break
    else:
        raise ValueError(
            f"could not draw {r} non-equivalent templates of length {length} from |W|={n_wildcards}, |X|={n_regular}"
        )
    g = rng.standard_normal(r)
    y = g - g.mean()
    y = y / np.sqrt(np.mean(y**2))
    name = f"random_L{length}_W{n_wildcards}_X{n_regular}_r{r}_s{seed}"
    params = {"length": length, "n_wildcards": n_wildcards, "n_regular": n_regular, "r": r, "seed": seed}
    return TemplateTask(name, tuple(templates), tuple(float(v) for v in y), wild, params=params)


TASKS = {
    "program": program_regression,
    "program_next_token": program_next_token,
    "copy": copy_task,
    "same_different": same_different,
    "aba_abb": aba_abb,
    "abab_aabb": abab_aabb,
    "majority": majority,
    "random": random_templates,
}


def make_task(name: str, **params) -> TemplateTask:
    """Build a task by name (``TASKS``); ``params`` go to its constructor (``k`` for majority; ``length``,
    ``n_wildcards``, ``n_regular``, ``r``, ``seed`` for random), plus optional ``noise``."""
    if name not in TASKS:
        raise ValueError(f"unknown template task {name!r}; expected one of {sorted(TASKS)}")
    noise = params.pop("noise", 0.0)
    task = TASKS[name](**params)
    if noise:
        task = TemplateTask(
            task.name, task.templates, task.labels, task.wildcards, task.kind, task.probs, float(noise), task.params
        )
    return task


# --------------------------------------------------------------------------------------- vocabulary


@dataclass(frozen=True)
class Vocabulary:
    """Id layout: [wildcard placeholders | regular tokens | A_train | A_val | A_test]."""

    wildcards: tuple[str, ...]
    regular: tuple[str, ...]
    n_train: int
    n_val: int
    n_test: int

    @property
    def n_special(self) -> int:
        return len(self.wildcards)

    def ranges(self) -> dict[str, tuple[int, int]]:
        lo = self.n_special + len(self.regular)
        out = {}
        for split, size in zip(SPLITS, (self.n_train, self.n_val, self.n_test)):
            out[split] = (lo, lo + size)
            lo += size
        return out

    @property
    def size(self) -> int:
        return self.ranges()["test"][1]

    def regular_id(self, token: str) -> int:
        return self.n_special + self.regular.index(token)

    def regular_ids(self) -> np.ndarray:
        return np.arange(self.n_special, self.n_special + len(self.regular))


def encode(task: TemplateTask, vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
    """Codes of the templates [r, k] and of the labels [r]: a regular token's vocabulary id (>= 0) or
    -(j + 1) for the j-th distinct wildcard of that template (order of first appearance); regression labels
    are returned as floats."""

    def code(sym: str, j: int) -> int:
        if sym in task.wildcards:
            return -(task.template_wildcards(j).index(sym) + 1)
        return vocab.regular_id(sym)

    codes = np.array([[code(s, j) for s in t] for j, t in enumerate(task.templates)], dtype=np.int64)
    if task.kind == "next_token":
        labels = np.array([code(s, j) for j, s in enumerate(task.labels)], dtype=np.int64)
    else:
        labels = np.asarray(task.labels, dtype=float)
    return codes, labels


# --------------------------------------------------------------------------------------- sampling


def sample_injective(rng: np.random.Generator, N: int, m: int, lo: int, hi: int) -> np.ndarray:
    """[N, m] int64, each row m distinct tokens drawn uniformly without replacement from [lo, hi).

    Vectorised: the j-th draw is the u-th smallest token not yet drawn, u ~ U{0, ..., A - j - 1}, found by
    walking the earlier draws in increasing order and stepping over each one that is <= u.
    """
    A = hi - lo
    if m > A:
        raise ValueError(f"cannot substitute {m} distinct wildcards from an alphabet of {A} tokens")
    out = np.empty((N, m), dtype=np.int64)
    for j in range(m):
        u = rng.integers(0, A - j, size=N)
        for prev in np.sort(out[:, :j], axis=1).T:
            u += u >= prev
        out[:, j] = u
    return out + lo


@dataclass
class Split:
    """One split: tokens [N, k] int64, targets [N] (float32 regression, int64 next-token token id),
    the template of each sample [N] and its substitution [N, max_z |W_z|] (column j: the token of the
    template's j-th distinct wildcard; unused columns are still distinct draws)."""

    tokens: torch.Tensor
    targets: torch.Tensor
    template: torch.Tensor
    substitution: torch.Tensor

    def __len__(self) -> int:
        return self.tokens.shape[0]


@dataclass
class TaskData:
    task: TemplateTask
    vocab: Vocabulary
    train: Split
    val: Split
    test: Split
    seed: int

    def split(self, name: str) -> Split:
        return {"train": self.train, "val": self.val, "test": self.test}[name]


def sample_split(task: TemplateTask, vocab: Vocabulary, N: int, alphabet: tuple[int, int], rng: np.random.Generator) -> Split:
    """N samples of ``task`` whose wildcards are filled from the alphabet id range ``alphabet``."""
    codes, label_codes = encode(task, vocab)
    t = rng.choice(task.r, size=N, p=task.probabilities)
    subs = sample_injective(rng, N, task.max_wildcards, *alphabet)
    rows = np.arange(N)[:, None]
    c = codes[t]
    tokens = np.where(c >= 0, c, subs[rows, np.maximum(-c - 1, 0)])
    if task.kind == "next_token":
        lc = label_codes[t]
        targets = torch.from_numpy(np.where(lc >= 0, lc, subs[np.arange(N), np.maximum(-lc - 1, 0)]))
    else:
        y = label_codes[t]
        if task.noise > 0:
            y = y + task.noise * rng.standard_normal(N)
        targets = torch.from_numpy(y.astype(np.float32))
    return Split(torch.from_numpy(tokens), targets, torch.from_numpy(t.astype(np.int64)), torch.from_numpy(subs))


def make_datasets(
    task: TemplateTask,
    n: int,
    seed: int,
    n_val: int = 100,
    n_test: int = 100,
    val_alphabet: int = 100,
    test_alphabet: int = 100,
    train_alphabet: int | None = None,
) -> TaskData:
    """Train (n samples over an alphabet of ``train_alphabet`` = n tokens), validation and test splits
    [P App. A]. Each split has its own random stream, so the validation and test sets of a seed do not
    depend on n (their token ids shift with the vocabulary layout)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    A_train = n if train_alphabet is None else int(train_alphabet)
    vocab = Vocabulary(task.wildcards, task.regular_tokens, A_train, val_alphabet, test_alphabet)
    ranges = vocab.ranges()
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)]
    sizes = {"train": n, "val": n_val, "test": n_test}
    splits = {s: sample_split(task, vocab, sizes[s], ranges[s], rng) for s, rng in zip(SPLITS, rngs)}
    return TaskData(task, vocab, splits["train"], splits["val"], splits["test"], seed)


# --------------------------------------------------------------------------------------- checks


def matches_template(tokens: torch.Tensor, template: tuple[str, ...], task: TemplateTask, vocab: Vocabulary) -> torch.Tensor:
    """[N] bool: does each row match ``template`` (Def. 2.1)? Regular positions carry the template's
    token; two wildcard positions carry equal tokens iff they hold the same wildcard; no substituted token
    is one of the template's regular tokens."""
    tokens = torch.as_tensor(tokens)
    ok = torch.ones(tokens.shape[0], dtype=torch.bool)
    regular_ids = torch.tensor([vocab.regular_id(s) for s in template if s not in task.wildcards], dtype=torch.int64)
    for i, si in enumerate(template):
        if si not in task.wildcards:
            ok &= tokens[:, i] == vocab.regular_id(si)
            continue
        if regular_ids.numel():
            ok &= ~torch.isin(tokens[:, i], regular_ids)
        for j, sj in enumerate(template):
            if j > i and sj in task.wildcards:
                same = tokens[:, i] == tokens[:, j]
                ok &= same if si == sj else ~same
    return ok


def check_data(data: TaskData) -> dict:
    """Claim-1 measurements: fraction of samples matching their own template (and the label being the
    template's), whether the three alphabets are disjoint with the stated sizes, how many training inputs
    hold a validation or test token, and the always-0 predictor's MSE per split (regression)."""
    task, vocab = data.task, data.vocab
    codes, label_codes = encode(task, vocab)
    ranges = vocab.ranges()
    out: dict = {}
    n_match = 0
    n_total = 0
    for split in SPLITS:
        s = data.split(split)
        ok = torch.zeros(len(s), dtype=torch.bool)
        for j, z in enumerate(task.templates):
            sel = s.template == j
            ok[sel] = matches_template(s.tokens[sel], z, task, vocab)
        if task.kind == "next_token":
            lc = torch.from_numpy(label_codes)[s.template]
            want = torch.where(lc >= 0, lc, s.substitution[torch.arange(len(s)), (-lc - 1).clamp(min=0)])
            ok &= s.targets == want
        else:
            ok &= (s.targets - torch.from_numpy(label_codes).float()[s.template]).abs() <= 6 * task.noise + 1e-6
        lo, hi = ranges[split]
        wild = torch.from_numpy(codes)[s.template] < 0
        in_range = ((s.tokens >= lo) & (s.tokens < hi)) | ~wild
        out[f"{split}_match_fraction"] = float(ok.float().mean())
        out[f"{split}_in_own_alphabet"] = bool(in_range.all())
        out[f"{split}_alphabet_size"] = hi - lo
        n_match += int(ok.sum())
        n_total += len(s)
        if task.kind == "regression":
            out[f"{split}_trivial_mse"] = float((s.targets.double() ** 2).mean())
    spans = sorted(ranges.values())
    out["alphabets_disjoint"] = all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1)) and spans[0][
        0
    ] >= vocab.n_special + len(vocab.regular)
    used = {}
    for split in SPLITS:
        s = data.split(split)
        wild = torch.from_numpy(codes)[s.template] < 0
        used[split] = torch.unique(s.tokens[wild])
    out["used_tokens_disjoint"] = not any(
        bool(torch.isin(used[a], used[b]).any()) for a, b in (("train", "val"), ("train", "test"), ("val", "test"))
    )
    heldout = torch.arange(ranges["val"][0], ranges["test"][1])
    out["train_heldout_tokens"] = int(torch.isin(data.train.tokens, heldout).sum())
    out["match_fraction"] = n_match / n_total
    return out
