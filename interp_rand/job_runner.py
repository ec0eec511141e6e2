"""Run a list of jobs, some waiting for others, in this process or as Ray tasks.

A job is anything with ``index`` (its 1-based number in the list), ``title`` (one line naming
it) and ``after`` (the ``index`` of the job that must finish before it starts, or ``None``);
``fn(job)`` does the work and returns its result. :func:`run_jobs` returns the results in job
order whichever path ran them, so the two paths give the same list for deterministic jobs.

In process, the jobs run one after the other in list order (a job's ``after`` must come
earlier in the list). On Ray (``ray_address``), every job is one task of 1 CPU running with one
torch thread; a job's ``after`` is passed as that job's object ref, so Ray starts it only once
the other has finished; results are gathered as they finish. Ray is imported only here, and
only when asked; :func:`connect_ray` joins a cluster (a bad address fails within seconds), for
the jobs here and for the grid world's PGPE actors alike.

Progress: with ``log``, one line when a job starts (``run 3 of 14: TITLE``) and one when it
finishes (``run 3 of 14: TITLE: done in 12.3 s, HEADLINE``). On Ray the start line is printed
by the worker (Ray forwards it to this process's output, prefixed by the task's name and pid);
the finish line by this process.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

LOCAL = "local"
START_PATTERN = r"^run \d+ of \d+: "
RAY_CONNECT_TIMEOUT_S = 5.0


class Job(Protocol):
    index: int
    title: str
    after: int | None


def start_line(job: Job, total: int) -> str:
    return f"run {job.index} of {total}: {job.title}"


def finish_line(job: Job, total: int, seconds: float, headline: str) -> str:
    return f"{start_line(job, total)}: done in {seconds:.1f} s" + (f", {headline}" if headline else "")


def print_line(line: str) -> None:
    """The default ``log``: one line on standard error, flushed (progress bars go there too)."""
    print(line, file=sys.stderr, flush=True)


def run_jobs(jobs: Sequence[Job], fn: Callable[[Job], Any], *, headline: Callable[[Any], str] = lambda r: "",
             log: Callable[[str], None] | None = print_line, ray_address: str | None = None,
             workers: int | None = None) -> list[Any]:
    """``[fn(job) for job in jobs]``, in process (``ray_address=None``) or as Ray tasks.

    ``ray_address``: ``"local"`` starts a local Ray instance with ``workers`` CPUs (default:
    all of this machine's) and stops it afterwards; anything else (``host:port``,
    ``ray://host:port``, ``auto``) joins that cluster, whose workers must be able to import
    ``fn``'s module and write where the jobs write (there the start lines stay in the workers'
    logs). A Ray instance that was already initialised is used as it is and left running.
    ``headline(result)`` is appended to each finish line.

    Raises ``ValueError`` if a job's ``after`` does not name an earlier job, and
    ``ConnectionError`` if Ray cannot start or join the cluster.
    """
    positions = {job.index: i for i, job in enumerate(jobs)}
    for i, job in enumerate(jobs):
        if job.after is not None and positions.get(job.after, i) >= i:
            raise ValueError(f"job {job.index} ({job.title}) waits for job {job.after}, which is not an earlier job")
    if ray_address is None:
        return [_timed(fn, job, len(jobs), headline, log) for job in jobs]
    return _on_ray(jobs, fn, headline, log, ray_address, workers)


def _timed(fn, job, total, headline, log) -> Any:
    if log is not None:
        log(start_line(job, total))
    started = time.perf_counter()
    result = fn(job)
    if log is not None:
        log(finish_line(job, total, time.perf_counter() - started, headline(result)))
    return result


def _in_worker(fn, job, total: int, announce: bool, *after: Any) -> tuple[Any, float]:
    """The body of one Ray task: ``after`` (the result of the job it waited for) only orders it."""
    import torch

    torch.set_num_threads(1)  # one task is one CPU of the cluster's budget
    if announce:
        print_line(start_line(job, total))
    started = time.perf_counter()
    return fn(job), time.perf_counter() - started


def _on_ray(jobs, fn, headline, log, address: str, workers: int | None) -> list[Any]:
    if "ray" not in sys.modules:
        # Ray folds log lines that differ only in their numbers into one ("[repeated 3x]"),
        # which would hide most start lines; it reads this setting once, on import.
        os.environ.setdefault("RAY_DEDUP_LOGS_ALLOW_REGEX", START_PATTERN)
    import ray

    started_here = not ray.is_initialized()
    if started_here:
        _connect(address, workers)
    try:
        remote = ray.remote(num_cpus=1)(_in_worker)
        refs: dict[int, Any] = {}
        for job in jobs:  # in list order, so a job's ``after`` already has its ref
            after = () if job.after is None else (refs[job.after],)
            refs[job.index] = remote.remote(fn, job, len(jobs), log is not None, *after)
        by_ref = {ref: job for job, ref in zip(jobs, refs.values())}
        results: dict[int, Any] = {}
        pending = list(refs.values())
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                job = by_ref[done[0]]
                result, seconds = ray.get(done[0])
                results[job.index] = result
                if log is not None:
                    log(finish_line(job, len(jobs), seconds, headline(result)))
        except BaseException:
            for ref in pending:
                ray.cancel(ref)
            raise
        return [results[job.index] for job in jobs]
    finally:
        if started_here:
            ray.shutdown()


def _connect(address: str, workers: int | None) -> None:
    import ray

    if address == LOCAL:
        if workers is not None and workers < 1:
            raise ValueError(f"workers={workers} must be >= 1")
        try:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=True)
        except Exception as err:  # noqa: BLE001 -- whatever stops Ray from starting, say so in one line
            raise ConnectionError(f"cannot start a local Ray instance ({workers or 'all'} CPUs): "
                                  f"{type(err).__name__}: {err}") from err
        return
    # joining a cluster: probe the address first, so a wrong one fails within seconds
    connect_ray(address)


def connect_ray(address: str, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """Join the Ray cluster at ``address`` (``host:port`` of the head node's GCS,
    ``ray://host:port`` or ``auto``).

    ``ray.init`` retries an unreachable or foreign address for a long time; here a
    ``host:port`` is first probed (TCP connect, then one GCS request, together bounded by
    ``timeout_s``), and a failure raises ``ConnectionError`` naming the address."""
    import ray

    if ray.is_initialized():
        return
    if address != "auto" and not address.startswith("ray://"):
        _probe_gcs(address, timeout_s)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError) as err:
        raise ConnectionError(f"cannot join the Ray cluster at {address!r}: {err}") from None


def _probe_gcs(address: str, timeout_s: float) -> None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"ray address {address!r} must be host:port, ray://host:port or auto")
    failure: list[str] = []

    def probe() -> None:
        try:
            socket.create_connection((host, int(port)), timeout=timeout_s).close()
            from ray._raylet import GcsClient

            GcsClient(address=address).internal_kv_get(b"interp-rand-probe", None, timeout=timeout_s)
        except Exception as err:  # noqa: BLE001 -- any failure means "not a reachable Ray GCS"
            failure.append(f"{type(err).__name__}: {err}")

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        failure.append(f"no answer within {timeout_s:g} s")
    if failure:
        raise ConnectionError(
            f"cannot reach a Ray cluster at {address!r} ({failure[0]}); give the head node's "
            "host:port (e.g. 10.0.0.1:6379), or leave out --ray-address to run locally"
        )


__all__ = ["LOCAL", "Job", "connect_ray", "print_line", "run_jobs"]
