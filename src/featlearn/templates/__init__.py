"""Boix-Adserà, Saremi, Abbe, Bengio, Littwin, Susskind 2023, "When can transformers reason with abstract
symbols?".

Modules: ``tasks`` (template tasks T1-T8 with disjoint train/validation/test alphabets, Def. 2.1-2.3,
App. A/B/J), ``models`` (pre-LN transformer with trainable KQ/VO identity scalings, MLP, MLP + vec(XX^T),
RNN, LSTM) and ``registry`` (every job and figure) are shared by the three parts of the paper, each a
subpackage: ``sweeps`` (many small trainings at once, Figs. 2c-25), ``kernels`` (the random-features
kernels of Sec. 3) and ``gpt2`` (GPT-2 with identity scalings, Figs. 6, 7, 24).
"""
