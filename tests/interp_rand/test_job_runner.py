"""``run_jobs`` in process: results in job order, a start and a finish line per job, and a
job that waits for a later one refused; a bad Ray address fails fast. (The Ray path is
checked against this one in ``test_reproduce.py``.)"""

import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

from interp_rand.job_runner import connect_ray, run_jobs


@dataclass(frozen=True)
class Square:
    index: int
    title: str
    after: int | None = None


def square(job: Square) -> int:
    return job.index ** 2


def test_in_process_runs_in_order_with_a_line_per_start_and_finish():
    jobs = [Square(1, "one"), Square(2, "two", after=1), Square(3, "three")]
    lines: list[str] = []
    results = run_jobs(jobs, square, headline=lambda r: f"square {r}", log=lines.append)
    assert results == [1, 4, 9]
    assert lines[0] == "run 1 of 3: one" and lines[2] == "run 2 of 3: two"
    assert lines[1].startswith("run 1 of 3: one: done in ") and lines[1].endswith(" s, square 1")
    assert len(lines) == 6 and lines[-1].endswith("square 9")


def test_a_job_waiting_for_a_later_one_is_refused():
    with pytest.raises(ValueError, match="job 1 .*waits for job 2"):
        run_jobs([Square(1, "one", after=2), Square(2, "two")], square, log=None)


@pytest.mark.slow
def test_ray_is_imported_only_when_asked():
    code = ("import sys; from interp_rand.job_runner import run_jobs; import interp_rand.reproduce; "
            "import interp_rand.cli.main; print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unreachable_ray_address_fails_fast():
    start = time.monotonic()
    with pytest.raises(ConnectionError, match="cannot reach a Ray cluster at '127.0.0.1:1'"):
        connect_ray("127.0.0.1:1", timeout_s=2.0)
    assert time.monotonic() - start < 10
    with pytest.raises(ValueError, match="must be host:port"):
        connect_ray("nonsense", timeout_s=1.0)
