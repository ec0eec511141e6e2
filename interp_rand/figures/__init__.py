"""Figures (plotly). Drawing lives here, apart from the computations it shows."""

from interp_rand.figures.training_curves import training_curves

__all__ = ["training_curves"]
