"""GPT-2 with trainable identity scalings (Figs. 6, 7, 24): ``experiments`` (the model, WikiText training
from scratch, T5 fine-tuning of pretrained checkpoints), ``checkpoints`` (which public checkpoints are
usable offline), ``figures`` (figures, tables and claims)."""
