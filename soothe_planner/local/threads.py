"""How many threads does the embedded model's server run with?

One per physical core this process may use, within the cgroup's CPU quota (``default_threads``);
``SOOTHE_LLM_THREADS`` overrides. The reasons and measurements are in ``default_threads``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["THREADS_ENV", "cpu_quota", "default_threads", "physical_cores"]

THREADS_ENV = "SOOTHE_LLM_THREADS"
_CPU_SYSFS = Path("/sys/devices/system/cpu")
_CGROUP_ROOT = Path("/sys/fs/cgroup")


def physical_cores(cpus: Iterable[int] | None = None, sysfs: Path = _CPU_SYSFS) -> int | None:
    """How many physical cores the CPUs in ``cpus`` (default: those this process may run on) belong to.

    Two logical CPUs that are hyper-threads of one core share its execution units, and llama.cpp's
    matrix products gain nothing from the second. ``None`` when the topology cannot be read.
    """
    if cpus is None:
        cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    cores: set[str] = set()
    for cpu in cpus:
        try:
            cores.add((sysfs / f"cpu{cpu}" / "topology" / "thread_siblings_list").read_text().strip())
        except OSError:
            return None
    return len(cores) or None


def cpu_quota(cgroup: Path = _CGROUP_ROOT) -> int | None:
    """The CPUs the cgroup (v2) mounted at ``cgroup`` may use per period, rounded up; ``None`` when unlimited or unknown."""
    try:
        quota, period = (cgroup / "cpu.max").read_text().split()[:2]
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):  # no cgroup v2 file, or "max" (no quota)
        return None


def default_threads() -> int:
    """``$SOOTHE_LLM_THREADS``, else the physical cores this process may use (at least 1).

    Measured on an idle 2-core machine with the 1.5B model (``bench/RESULTS.md``, "local"): two
    threads made every kind of call 1.6-2.5x faster than one. llama.cpp's worker threads spin while
    they wait, so more threads than the cores the server really gets slows it sharply (measured
    on a busy 2-core machine: one thread evaluated prompts 3x and generated 6x faster than two).
    Hence one thread per physical core (hyper-threads do not count), within the cgroup's CPU
    quota; on a machine busy with other work, set ``SOOTHE_LLM_THREADS`` lower. When the topology
    cannot be read, half the logical CPUs (a guess at the cores behind hyper-threads).
    """
    env = os.environ.get(THREADS_ENV)
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    cores = physical_cores() or max(1, (os.cpu_count() or 2) // 2)
    quota = cpu_quota()
    return max(1, min(cores, quota) if quota else cores)
