"""Layer 4, analyses of circuits and of the randomness channel: faithfulness, agreement and
comparison of circuits, verdicts on claims, seed usage, bit-flip routes, attention flow. Compute
only; nothing here draws."""
