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
from probes.controls import control_labels, group_split, random_init_like
from probes.linear_probe import LinearProbe, fit_ridge, probe_accuracy
from probes.suite import ProbeConfig, ProbeResult, probe_task
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
    "ReportConfig",
    "ReportData",
    "RoleScores",
    "SeedAttribution",
    "attention_patterns",
    "build_report",
    "conditional_patterns",
    "hook_attribution",
    "input_attribution",
    "mean_pattern",
    "register_condition",
    "register_role",
    "report_from_run",
    "role_names",
    "score_roles",
    "seed_attribution",
    "CausalEffect",
    "LinearProbe",
    "ProbeConfig",
    "ProbeResult",
    "ProbeVariable",
    "VariableLabels",
    "causal_check",
    "check_hooks",
    "collect_activations",
    "control_labels",
    "fit_ridge",
    "get_variable",
    "group_split",
    "hook_names",
    "input_groups",
    "probe_accuracy",
    "probe_task",
    "random_init_like",
    "register_groups",
    "register_variable",
    "residual_hooks",
    "variable_labels",
    "variable_names",
]
