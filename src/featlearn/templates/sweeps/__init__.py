"""Sweeps of small trainings (Figs. 2c, 3c, 5, 8-23, 25): ``engine`` (many independent runs trained at once
with stacked parameters and ``torch.func``), ``experiments`` (each figure's grid of curves, one compute job
per grid), ``figures`` (curves, learning-rate heatmaps and their claims), ``bench`` (throughput of the
engine against one run at a time)."""
