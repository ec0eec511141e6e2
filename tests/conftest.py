"""Shared test setup."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    """Tiny models gain nothing from intra-op threads, and on a busy 2-core machine OpenMP's
    thread hand-offs make each op up to ~100x slower; restore the setting afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# The case studies on the zoo's addition and sort models at reduced sizes, computed once per test run
# (tests/built_once.py): their claims are checked in tests/interp_rand/reports/test_case_studies_zoo.py
# and their verdicts in tests/interp_rand/test_verdicts.py.
@pytest.fixture(scope="session")
def zoo_carry_study(tmp_path_factory):
    from built_once import built_once

    def build(_):
        from interp_rand import zoo
        from interp_rand.reports.case_studies import CarryConfig, carry_study

        ckpt = zoo.load("addition")
        config = CarryConfig(n_pairs=128, n_eval=600, n_cascade=300, n_probe=1500, n_controls=3)
        return carry_study(ckpt.model().eval(), ckpt.spec.make_task(), config)

    return built_once(tmp_path_factory, "zoo-carry-study", build)


@pytest.fixture(scope="session")
def zoo_sort_study(tmp_path_factory):
    from built_once import built_once

    def build(_):
        from interp_rand import zoo
        from interp_rand.reports.case_studies import SortConfig, sort_study

        ckpt = zoo.load("sort")
        return sort_study(ckpt.model().eval(), ckpt.spec.make_task(), SortConfig(n_pairs=64, n_eval=1500, n_controls=4))

    return built_once(tmp_path_factory, "zoo-sort-study", build)
