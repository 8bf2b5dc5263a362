"""Word-level transformer language models on WikiText/PTB, shared by the scan_snap and joma papers:
model (``model``), batching (``data``), training with atomic checkpoints and resume (``train``) and
attention analysis (``attention``)."""


def epoch_budget(section: dict, dataset: str) -> dict:
    """``{"epochs": n}`` when ``section["epochs"]`` names ``dataset`` (the LM then trains for n epochs instead of
    ``iterations``), else nothing, so a run without an epoch budget keeps its settings."""
    epochs = (section.get("epochs") or {}).get(dataset)
    return {} if epochs is None else {"epochs": epochs}
