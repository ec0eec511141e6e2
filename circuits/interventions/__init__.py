"""Layer 2, interventions: ablating nodes, patching edges and nodes, and the behaviour metrics
they are measured by. Imports only :mod:`circuits.graph`."""
