"""Layer 5, drawing (plotly): layouts and figures of circuits, comparisons and seed usage. The
only layer that imports plotly; nothing below it imports this layer."""
