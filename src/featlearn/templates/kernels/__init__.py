"""Sec. 3 of the paper: ``theory`` (transformer and MLP random-features kernels, the N matrix, kernel
ridge regression on unseen symbols) and ``figures`` (its tables, figure and claims)."""
