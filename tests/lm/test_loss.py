"""The LM training steps' cross-entropy (featlearn.lm.loss): the blocked bfloat16 path computes what
F.cross_entropy under CPU autocast computes, and every other input goes to F.cross_entropy unchanged."""

import copy

import pytest
import torch
import torch.nn.functional as F

from featlearn.lm import loss as lm_loss
from featlearn.lm.loss import block_rows, blocked, next_token_loss


def _reference(logits: torch.Tensor, targets: torch.Tensor):
    """F.cross_entropy as a CPU bf16 job ran it before: inside autocast, which takes it in float32."""
    x = logits.detach().clone().requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False):
        loss = F.cross_entropy(x.reshape(-1, x.shape[-1]), targets.reshape(-1))
    loss.backward()
    return loss.detach(), x.grad


def _blocked(logits: torch.Tensor, targets: torch.Tensor):
    x = logits.detach().clone().requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False):
        loss = next_token_loss(x, targets)
    loss.backward()
    return loss.detach(), x.grad


@pytest.mark.parametrize("block_elements", [1 << 19, 64, 7])  # one block; several with a ragged last one; one row each
def test_blocked_bf16_loss_and_gradient_match_autocast_cross_entropy(monkeypatch, block_elements):
    monkeypatch.setattr(lm_loss, "BLOCK_ELEMENTS", block_elements)
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(4, 9, 50, generator=g) * 3).to(torch.bfloat16)  # [batch, tokens, vocabulary]
    targets = torch.randint(0, 50, (4, 9), generator=g)
    ref_loss, ref_grad = _reference(logits, targets)
    loss, grad = _blocked(logits, targets)
    assert loss.dtype == torch.float32 and grad.dtype == torch.bfloat16 and grad.shape == logits.shape
    assert abs(loss.item() - ref_loss.item()) <= 1e-6 * abs(ref_loss.item())
    # the float32 gradients agree to float32 rounding, so after rounding to bfloat16 at most one bfloat16 step apart
    step = ref_grad.float().abs().clamp_min(1e-30) * 2.0**-7
    assert ((grad.float() - ref_grad.float()).abs() <= step).all()
    assert (grad.float() == ref_grad.float()).float().mean() > 0.95


def test_blocked_loss_sees_each_rows_own_target():
    """Planted: targets moved by one row change the loss, so a block that read its neighbour's targets would show."""
    logits = torch.zeros(6, 5, dtype=torch.bfloat16)
    logits[torch.arange(6), torch.arange(6) % 5] = 8.0  # each row's largest logit is its target
    right = next_token_loss(logits, torch.arange(6) % 5)
    wrong = next_token_loss(logits, (torch.arange(6) + 1) % 5)
    assert right.item() < 0.01 < 7.0 < wrong.item()
    assert right.item() == pytest.approx(F.cross_entropy(logits.float(), torch.arange(6) % 5).item(), rel=1e-6)


def test_float32_logits_take_f_cross_entropy_bit_for_bit():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 7, 40, generator=g, requires_grad=True)
    targets = torch.randint(0, 40, (3, 7), generator=g)
    a = next_token_loss(logits, targets)
    (ga,) = torch.autograd.grad(a, logits)
    b = F.cross_entropy(logits.reshape(-1, 40), targets.reshape(-1))
    (gb,) = torch.autograd.grad(b, logits)
    assert torch.equal(a, b) and torch.equal(ga, gb)


def test_only_bfloat16_cpu_logits_are_blocked():
    assert blocked(torch.zeros(2, 3, dtype=torch.bfloat16))
    assert not blocked(torch.zeros(2, 3))
    assert not blocked(torch.zeros(2, 3, dtype=torch.float16))
    assert not blocked(torch.zeros(2, 3, dtype=torch.bfloat16, device="meta"))  # any non-CPU device: F.cross_entropy
    assert block_rows(33_278) == 15 and block_rows(10**7) == 1


def test_a_bf16_lm_trains_as_with_autocast_cross_entropy():
    """A few bf16 steps of the tutorial LM with the blocked loss follow the steps with F.cross_entropy closely."""
    from featlearn.lm.model import LMConfig, TransformerLM
    from featlearn.lm.train import make_optimizer

    torch.manual_seed(0)
    net = TransformerLM(LMConfig(300, 16, 16, 1, 1, 0.0))
    x, y = torch.randint(0, 300, (12, 4)), torch.randint(0, 300, (12, 4))
    curves = []
    for loss_fn in (lambda logits: F.cross_entropy(logits.reshape(-1, 300), y.reshape(-1)),
                    lambda logits: next_token_loss(logits, y)):
        model = copy.deepcopy(net)
        opt = make_optimizer(model, "sgd", 1.0)
        curve = []
        for _ in range(5):
            with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False):
                loss = loss_fn(model(x)[0])
            opt.zero_grad()
            loss.backward()
            opt.step()
            curve.append(loss.item())
        curves.append(curve)
    assert curves[0][-1] < curves[0][0] - 0.1  # it learns
    assert curves[1] == pytest.approx(curves[0], abs=2e-3)
