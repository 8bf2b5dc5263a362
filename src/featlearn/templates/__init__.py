"""Boix-Adserà, Saremi, Abbe, Bengio, Littwin, Susskind 2023, "When can transformers reason with abstract
symbols?".

Modules: ``tasks`` (template tasks T1-T8 with disjoint train/validation/test alphabets, Def. 2.1-2.3,
App. A/B/J), ``models`` (pre-LN transformer with trainable KQ/VO identity scalings, MLP, MLP + vec(XX^T),
RNN, LSTM), ``sweep`` (many independent runs trained at once with stacked parameters and ``torch.func``),
``bench`` (throughput of the sweep engine against one run at a time), ``kernels`` (transformer and MLP
random-features kernels, the N matrix, kernel ridge regression on unseen symbols, Sec. 3).
"""
