"""Device choice: ``auto`` picks CUDA when PyTorch sees a GPU, else the CPU. Nothing requires a GPU."""

from __future__ import annotations


def resolve_device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device: cuda was asked for, but PyTorch sees no GPU; use device: auto or cpu")
    return name
