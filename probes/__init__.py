"""Probes, attribution and attention analysis on any model that speaks TransformerLens's
hook-name protocol (ours or a ``TransformerBridge``).

activations -> linear probes (with controls and a causal check) -> captum attribution (seed
channel included) -> attention patterns and head-role scores -> the attention-pattern report.
"""

from probes import task_variables as _task_variables  # noqa: F401  (registers the variables)
from probes.attention import attention_patterns, conditional_patterns, mean_pattern, register_condition
from probes.attribution import SeedAttribution, hook_attribution, input_attribution, seed_attribution
from probes.head_roles import RoleScores, register_role, role_names, score_roles
from probes.report import ReportConfig, ReportData, build_report, report_from_run
from probes.activations import Activations, check_hooks, collect_activations, hook_names, residual_hooks
from probes.causal import CausalEffect, causal_check
from probes.interchange import InterchangeResult, counterfactual_pairs, interchange_accuracy
from probes.qk_attribution import QKAttribution, QKPatchCheck, qk_attribution, qk_patching_check
from probes.controls import control_labels, group_split, random_init_like
from probes.linear_probe import LinearProbe, fit_ridge, probe_accuracy
from probes.suite import ProbeConfig, ProbeResult, probe_task
from probes.stored_set import StoredSetStats, stored_set_map, stored_set_stats
from probes.route_seed import RouteSeedDependence, route_seed_dependence
from probes.symmetry import ColourNoiseInformation, NoiseResampleEffect, colour_noise_information, noise_resample_effect
from probes.variables import (
    ProbeVariable,
    VariableLabels,
    get_variable,
    input_groups,
    register_groups,
    register_variable,
    variable_labels,
    variable_names,
)

__all__ = [
    "Activations",
    "CausalEffect",
    "ColourNoiseInformation",
    "LinearProbe",
    "NoiseResampleEffect",
    "ProbeConfig",
    "ProbeResult",
    "ProbeVariable",
    "ReportConfig",
    "ReportData",
    "RoleScores",
    "SeedAttribution",
    "StoredSetStats",
    "VariableLabels",
    "attention_patterns",
    "build_report",
    "causal_check",
    "check_hooks",
    "collect_activations",
    "colour_noise_information",
    "conditional_patterns",
    "control_labels",
    "fit_ridge",
    "get_variable",
    "group_split",
    "hook_attribution",
    "hook_names",
    "input_attribution",
    "input_groups",
    "mean_pattern",
    "noise_resample_effect",
    "probe_accuracy",
    "probe_task",
    "random_init_like",
    "register_condition",
    "register_groups",
    "register_role",
    "register_variable",
    "report_from_run",
    "residual_hooks",
    "role_names",
    "score_roles",
    "seed_attribution",
    "stored_set_map",
    "stored_set_stats",
    "RouteSeedDependence",
    "route_seed_dependence",
    "variable_labels",
    "variable_names",
    "InterchangeResult",
    "counterfactual_pairs",
    "interchange_accuracy",
    "QKAttribution",
    "QKPatchCheck",
    "qk_attribution",
    "qk_patching_check",
]
