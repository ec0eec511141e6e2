"""Circuits: position-aware computational graphs of TransformerLens-protocol models, ablations
(including seed-only resampling), activation and path patching, EAP / EAP-IG / ACDC discovery
with measured faithfulness. Works on ours and on a TransformerLens ``TransformerBridge``.
Drawing lives in :mod:`circuits.layout` and :mod:`circuits.draw`.

    >>> from circuits import discover, faithfulness
    >>> scores = discover(model, pairs.clean, pairs.corrupted, metric="logprob", method="eap")
    >>> circuit = scores.circuit(top_k=30)
    >>> faithfulness(model, circuit, pairs.clean, pairs.corrupted).recovered
"""

from circuits.ablation import ABLATION_KINDS, Ablation, ablate_nodes, replaced_nodes
from circuits.acdc import acdc_scores
from circuits.attribution import eap_ig_scores, eap_scores
from circuits.circuit import Circuit
from circuits.compare import Agreement, agreement, spearman
from circuits.comparison import CircuitComparison, compare_circuits
from circuits.components import Architecture, architecture
from circuits.discovery import (
    PatchData,
    discover,
    method_names,
    patch_data,
    register_method,
)
from circuits.edge_patching import exact_edge_scores, patched_edges, run_with_edges
from circuits.faithfulness import Faithfulness, faithfulness, smallest_faithful_circuit
from circuits.graph import ModelGraph
from circuits.metrics import get_metric, metric_names, register_metric
from circuits.node_patching import ACTIVATIONS, patch_sweep
from circuits.nodes import EDGE_INPUTS, NODE_KINDS, Edge, Node
from circuits.randomness import RandomnessUsage, SeedEntry, randomness_usage, seed_entry, seed_pairs
from circuits.seed_bits import BitFlipEffect, BitFlipRoutes, bit_flip_effect, bit_flip_routes
from circuits.scores import EdgeScores
from circuits.verdict import Claim, Verdict
from circuits.writers import writer_values

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
