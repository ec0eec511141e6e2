"""Circuits: position-aware computational graphs of TransformerLens-protocol models, ablations
(including seed-only resampling), activation and path patching, EAP / EAP-IG / ACDC discovery,
and the claims made about circuits (faithfulness, MIB's CPR/CMD, stability, claim cards, a
ground-truth suite). Works on ours and on a TransformerLens ``TransformerBridge``.

The subpackages are the layers, each importing only those before it (``tests/test_layers.py``):
:mod:`circuits.graph` (what a circuit is made of) → :mod:`circuits.interventions` (ablation,
patching, metrics) → :mod:`circuits.methods` (discovery) → :mod:`circuits.analyses` (claims
about circuits and the randomness channel) → :mod:`circuits.draw` (figures). The names below
are the public API.

    >>> from circuits import discover, faithfulness, select, claim_card
    >>> scores = discover(model, pairs.clean, pairs.corrupted, metric="logprob", method="eap")
    >>> circuit = select(scores, 30, "connected")
    >>> faithfulness(model, circuit, pairs.clean, pairs.corrupted).recovered
"""

from circuits.interventions.ablation import ABLATION_KINDS, Ablation, ablate_nodes, replaced_nodes
from circuits.methods.acdc import acdc_scores
from circuits.methods.attribution import eap_ig_scores, eap_scores
from circuits.graph.circuit import Circuit
from circuits.analyses.agreement import Agreement, agreement, spearman
from circuits.analyses.comparison import CircuitComparison, compare_circuits
from circuits.graph.architecture import Architecture, architecture
from circuits.methods.discovery import (
    PatchData,
    discover,
    method_names,
    patch_data,
    register_method,
)
from circuits.interventions.edge_patching import exact_edge_scores, patched_edges, run_with_edges
from circuits.analyses.faithfulness import Faithfulness, faithfulness, smallest_faithful_circuit
from circuits.graph.model_graph import ModelGraph
from circuits.interventions.metrics import get_metric, metric_names, register_metric
from circuits.interventions.node_patching import ACTIVATIONS, patch_sweep
from circuits.graph.nodes import EDGE_INPUTS, NODE_KINDS, Edge, Node
from circuits.analyses.randomness import RandomnessUsage, SeedEntry, randomness_usage, seed_entry, seed_pairs
from circuits.analyses.seed_bits import BitFlipEffect, BitFlipRoutes, bit_flip_effect, bit_flip_routes
from circuits.graph.scores import EdgeScores
from interp_rand.verdicts import Claim, Verdict
from circuits.analyses.claim_card import ClaimCard, claim_card
from circuits.analyses.faithfulness import ShareMeter, behaviour_gap
from circuits.analyses.ground_truth import edge_auroc, ground_truth_suite
from circuits.analyses.mib import MIB_FRACTIONS, FaithfulnessIntegrals, faithfulness_integrals, integrals_table
from circuits.analyses.stability import AgreementMatrix, across_methods, across_models, across_resamples
from circuits.graph.export import from_eap_ig, to_eap_ig, write_eap_ig
from circuits.graph.selection import SELECTION_RULES, select
from circuits.graph.writers import writer_values

__all__ = [
    "ABLATION_KINDS",
    "MIB_FRACTIONS",
    "SELECTION_RULES",
    "AgreementMatrix",
    "ClaimCard",
    "FaithfulnessIntegrals",
    "ShareMeter",
    "across_methods",
    "across_models",
    "across_resamples",
    "behaviour_gap",
    "claim_card",
    "edge_auroc",
    "faithfulness_integrals",
    "from_eap_ig",
    "ground_truth_suite",
    "integrals_table",
    "select",
    "to_eap_ig",
    "write_eap_ig",
    "ACTIVATIONS",
    "EDGE_INPUTS",
    "NODE_KINDS",
    "Ablation",
    "Agreement",
    "Architecture",
    "Circuit",
    "CircuitComparison",
    "Claim",
    "Edge",
    "EdgeScores",
    "Faithfulness",
    "ModelGraph",
    "Node",
    "PatchData",
    "RandomnessUsage",
    "SeedEntry",
    "Verdict",
    "ablate_nodes",
    "acdc_scores",
    "agreement",
    "architecture",
    "compare_circuits",
    "discover",
    "eap_ig_scores",
    "eap_scores",
    "exact_edge_scores",
    "faithfulness",
    "get_metric",
    "method_names",
    "metric_names",
    "patch_data",
    "patch_sweep",
    "patched_edges",
    "randomness_usage",
    "BitFlipEffect",
    "BitFlipRoutes",
    "bit_flip_effect",
    "bit_flip_routes",
    "register_method",
    "register_metric",
    "replaced_nodes",
    "run_with_edges",
    "seed_entry",
    "seed_pairs",
    "smallest_faithful_circuit",
    "spearman",
    "writer_values",
]
