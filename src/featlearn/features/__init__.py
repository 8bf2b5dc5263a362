"""Sun, Li, Lu 2023, "Unraveling Feature Extraction Mechanisms in Neural Networks".

Modules: ``models`` (MLP, CNN, SA, SA+MLP, MV, L-RNN and a one-layer transformer, with stacked parameters
for many independent runs), ``theory`` (the infinite-width NTK constants and the linear NTK flow),
``extract`` (token, bigram, adjective and position co-occurrence features; the synthetic position data),
``train`` (many small runs trained at once, label scores logged every epoch).
"""
