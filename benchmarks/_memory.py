"""A process's own peak resident memory, for the benchmarks that run each contender in a child.

Not ``ru_maxrss`` alone: on Linux a child's ``ru_maxrss`` starts from its parent's peak (it is carried
through fork and exec), so a child of a large benchmark process would report the parent's size.
Imports nothing that changes the process, so a child may import it before it starts its clock."""

from __future__ import annotations

import resource


def peak_mib() -> float:
    """This process's peak resident memory in MiB (``VmHWM``; ``ru_maxrss`` where there is no /proc)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
