"""Training dynamics: analyses replayed over the checkpoints of a run (and over runs of a q
sweep), each giving named quantities per checkpoint, so a user sees when a circuit component,
a probe's selectivity or the use of the seed channel appears against the loss curve.

- :mod:`.view`: what an analysis receives for one checkpoint (:class:`CheckpointView`) and the
  registry of analyses (:data:`DYNAMICS_ANALYSES`, :data:`THRESHOLDS`), and
  :func:`open_view` (a checkpoint folder -> its view).
"""

from interp_rand.reports.dynamics.view import (DYNAMICS_ANALYSES, THRESHOLDS, CheckpointView, Measures,
                                               Threshold, open_view)

__all__ = ["DYNAMICS_ANALYSES", "THRESHOLDS", "CheckpointView", "Measures", "Threshold", "open_view"]
