"""The case studies' mechanism checks at small sizes, for tests that run a case study end to end
(the demo's tour, the case-study command) and check what only they do; the mechanisms' own
numbers are tested in tests/interp_rand/reports/mechanisms at their own sizes."""

import functools


def small_mechanisms(monkeypatch) -> None:
    """Few interchange pairs, one random location set, a short DAS fit, 500 of sort's 10^5 lists,
    200 inputs for the decisive experiments against the rivals."""
    from interp_rand.reports import mechanism
    from interp_rand.reports.mechanisms import sorting
    from probes.interchange import DASConfig

    monkeypatch.setattr(mechanism, "mechanism_report", functools.partial(
        mechanism.mechanism_report, n_pairs=40, n_random=1, das=DASConfig(steps=20, batch_size=32), n_rivals=200))
    monkeypatch.setattr(sorting, "mechanism", functools.partial(sorting.mechanism, n_lists=500))
