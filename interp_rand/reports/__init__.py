"""The top layer: reports that combine :mod:`circuits` and :mod:`probes`, each one call that
returns what its ``interp-rand`` command prints and writes (the CLI only parses and prints):

=====================  ===========================================================  =====================
command                call                                                         module
=====================  ===========================================================  =====================
``eval``               ``evaluation_report(run, n=, seed=, seeds=)``                :mod:`.evaluation`
``circuit``            ``circuit_report(run, method=, top_k=, ...)``                :mod:`.circuit`
``compare``            ``compare_report(run_a, run_b, method=, top_k=, ...)``       :mod:`.compare`
``randomness``         ``randomness_report(run, compare, n=, stored_inputs=)``     :mod:`.randomness`
``case-study``         ``case_study_report(study, run, seed=, n_controls=, n=)``    :mod:`.case_study`
``generalization``     ``generalization_report(run, lengths=, n=, mechanism=)``     :mod:`.generalization`
=====================  ===========================================================  =====================

Each returns a dataclass with the figures, ``to_json()`` (or ``to_dict()``) and ``write(out)``.
:func:`~interp_rand.reports.inputs.load_run_inputs` is what they share: load a run, make its
task, sample, give a fixed-seed run its r0, draw clean/corrupted pairs. Nothing in the core, in
``circuits`` or in ``probes`` imports this package.
"""
