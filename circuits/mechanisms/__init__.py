"""Mechanisms: a hypothesis about the algorithm a model runs, as an object that runs, and the
checks that test it (interchange per variable, causal scrubbing of the whole, predictions),
gathered on a :class:`MechanismCard` with a verdict per check, and the comparison of rival
mechanisms by decisive experiments (:func:`compare_mechanisms`).

    >>> from circuits.mechanisms import Mechanism, Variable, Site, Prediction, check_mechanism
    >>> card = check_mechanism(model, task, mechanism)
    >>> print("\\n".join(card.lines()))

Layer: above :mod:`circuits.analyses` (it uses the verdict rules) and below :mod:`circuits.draw`.
"""

from circuits.mechanisms.card import MechanismCard, check_mechanism
from circuits.mechanisms.compare import Comparison, compare_mechanisms
from circuits.mechanisms.decisive import Experiment
from circuits.mechanisms.hypothesis import Mechanism, Prediction, Site, Values, Variable
from circuits.mechanisms.interchange import VariableCheck
from circuits.mechanisms.predictions import PredictionCheck
from circuits.mechanisms.probe_variables import probe_mechanism, probe_variables
from circuits.mechanisms.scrubbing import Scrubbing

__all__ = ["Comparison", "Experiment", "Mechanism", "MechanismCard", "Prediction", "PredictionCheck", "Scrubbing", "Site", "Values", "Variable",
           "VariableCheck", "check_mechanism", "compare_mechanisms", "probe_mechanism", "probe_variables"]
