"""The collector's core: snapshots of a poll, rates, GPU states, container ids, frameworks, and the rows of
one poll."""

# What the other rooms of the core use; they import it from here, never from the modules
# (pyproject.toml, the import contract on the core's rooms).
from croft.domain.collector.container import display_path, membership_container_id, pod_uid
from croft.domain.collector.rates import NS_PER_S, PER_S_DIGITS
from croft.domain.collector.snapshot import CgroupMembership, CgroupSample, Instant, Poll

__all__ = [
    "NS_PER_S",
    "PER_S_DIGITS",
    "CgroupMembership",
    "CgroupSample",
    "Instant",
    "Poll",
    "display_path",
    "membership_container_id",
    "pod_uid",
]
