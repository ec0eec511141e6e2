"""Circuits: position-aware computational graphs of TransformerLens-protocol models, ablations
(including seed-only resampling), activation and path patching, EAP / EAP-IG / ACDC discovery
with measured faithfulness. Works on ours and on a TransformerLens ``TransformerBridge``.
Drawing lives in :mod:`circuits.draw.layout` and :mod:`circuits.draw.circuit_figure`.

    >>> from circuits import discover, faithfulness
    >>> scores = discover(model, pairs.clean, pairs.corrupted, metric="logprob", method="eap")
    >>> circuit = scores.circuit(top_k=30)
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
from circuits.analyses.verdict import Claim, Verdict
from circuits.graph.writers import writer_values

__all__ = [
    "ABLATION_KINDS",
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
