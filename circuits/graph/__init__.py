"""Layer 1, the graph: what a circuit is made of. Nodes and edges, the model's architecture as
circuits read it (:mod:`.architecture`), the position-resolved :class:`~circuits.graph.model_graph.ModelGraph`
(the one owner of every node's writer hook, reader site and order), writer values, circuits and
edge scores. Imports nothing else from :mod:`circuits`."""
