"""Tian, Wang, Chen, Du 2023, "Scan and Snap: Understanding Training Dynamics and Token Composition in
1-layer Transformer".

Modules: ``data`` (sequence-class generator, Sec. 3.2), ``model`` (reparameterised 1-layer transformer,
Sec. 3.1), ``train`` (many runs trained at once), ``metrics`` (attention composition, entropy, recall),
``theory`` (decoder mean-field h_t, speed control, snapping B_n(t)), ``figures``.
"""
