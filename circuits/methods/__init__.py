"""Layer 3, discovery methods: EAP, EAP-IG, ACDC and exact edge patching behind one
:func:`~circuits.methods.discovery.discover`. Imports the graph and the interventions."""
