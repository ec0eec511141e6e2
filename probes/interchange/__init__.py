"""Interchange interventions for named variables (Geiger et al. 2021; distributed alignment
search, Geiger et al. 2023).

For a registered probe variable (``addition/carry_in`` ...) at one instance (``place 2``) and a
hook and position of the model, take pairs of inputs, a *base* and a *source*, whose variable
differs, and swap the variable's subspace: ``h' = h_b + U U^T (h_s - h_b)`` for an orthonormal
``U`` ``[d, k]``. The **interchange-intervention accuracy** (IIA) is the share of pairs on which
the intervened model gives the answer the variable's *causal model* predicts for the base input
with the source's value of the variable.

Subspaces compared on the same held-out pairs:

- ``probe``: the ridge probe of the variable at that hook and position, fitted on the training
  examples; its weight directions, orthonormalised (:meth:`LinearProbe.basis`); and
  ``probe_pattern``: its patterns (activation covariance times weights, as
  :func:`probes.causal.causal_check` steers along), orthonormalised;
- ``das``: a learned rotation (``torch.nn.utils.parametrizations.orthogonal`` on a ``d x d``
  map), its first ``k`` rotated dimensions swapped, trained with the cross-entropy of the
  intervened logits against the counterfactual targets on the training pairs;
- controls: ``random_direction`` (a random orthonormal ``U`` of the same ``k``),
  ``random_init`` (the same DAS training on a randomly initialised model of the same
  architecture, :func:`probes.controls.random_init_like`) and ``control_variable`` (the same
  DAS training, but the variable replaced by its Hewitt & Liang control labels, a random fixed
  label per input type, with the causal model applied as if they were the variable: can a
  subspace make the model behave as if a variable it does not use had been swapped?).

Every subspace has ``k`` dimensions (default ``n_classes - 1``, the probe's rank; 1 for a
carry). Pairs and splits. The examples are split by input group (:func:`probes.controls.group_split`);
training pairs (for DAS and the probe) and test pairs (every reported IIA) are each drawn inside
one side, so no input is in both. A pair is kept only if the variable differs *and* the
counterfactual answer differs from the base's answer, so that leaving the model alone scores 0.
Control-variable pairs additionally need the control's counterfactual to differ from the real
variable's (the source's real value applied to the base): on such a pair a subspace that swaps
the real variable scores 0, so the control measures faking alone, not the control labels'
chance agreement with the real variable.

The causal model of a variable is its own ``counterfactual`` rule and ``output_index``
(:class:`probes.variables.VariableLabels`, declared once with the variable in
:mod:`probes.task_variables`): which answer position the variable acts on and what it becomes.
The same variable is a mechanism variable (``circuits.mechanisms.Variable.from_probe``), and the
pairs of both come from one search (:func:`counterfactual_pairs`). For ``addition/carry_in`` at
place ``p``: the answer digit of place ``p`` becomes ``(a_p + b_p + c_src) % 10`` (at the top
place, the carry itself). Only that digit is scored: a changed carry out of ``p`` would also
move the digits above it, but with the answer written most significant first those are
predicted at earlier positions, which an intervention at ``p``'s position cannot reach.

Verdict (:func:`interchange_claim`, the rule :func:`interp_rand.verdicts.reaches` with these
numbers, which the mechanism cards use too): **holds** when the DAS IIA is >= 0.9 and every control is <= 0.3; **fails** when the
DAS IIA is below 0.9 on a model that answers the base inputs (base accuracy >= 0.9);
**inconclusive** otherwise (a control above 0.3, or a model that does not solve the task).
"""

from __future__ import annotations

from probes.interchange.analysis import (BASE_ACCURACY_MIN, CONTROL_MAX, IIA_HOLDS, VERDICT_RULE, InterchangeResult,
                                         interchange_accuracy, interchange_claim, verdict)
from probes.interchange.das import DASConfig, iia, intervened_logits, random_subspace, swap_hook, train_das
from probes.interchange.pairs import (Pairs, Split, counterfactual_pairs, interchange_pairs, make_pairs,
                                     variable_outputs)

__all__ = [
    "DASConfig",
    "InterchangeResult",
    "Pairs",
    "Split",
    "VERDICT_RULE",
    "counterfactual_pairs",
    "iia",
    "interchange_accuracy",
    "interchange_claim",
    "interchange_pairs",
    "make_pairs",
    "random_subspace",
    "swap_hook",
    "train_das",
    "variable_outputs",
    "verdict",
]
