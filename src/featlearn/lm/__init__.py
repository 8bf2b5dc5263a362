"""Word-level transformer language models on WikiText/PTB, shared by the scan_snap and joma papers:
model (``model``), batching (``data``), training with atomic checkpoints and resume (``train``) and
attention analysis (``attention``)."""
