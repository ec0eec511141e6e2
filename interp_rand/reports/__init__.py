"""The top layer: reports that combine :mod:`circuits` and :mod:`probes` (case studies, the
randomness report). The CLI prints what these return; nothing in the core, in ``circuits`` or in
``probes`` imports this package."""
