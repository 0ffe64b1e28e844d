"""DRM clients: the kernel's per-file GPU counters of any DRM driver (amdgpu, i915, xe, msm,
panfrost, ...), parsed, and what a process used of each GPU over a poll (pure).

Each open `/dev/dri/*` file of a process is a DRM client whose `/proc/<pid>/fdinfo/<fd>` holds
the keys of the kernel's Documentation/gpu/drm-usage-stats.rst: one `key:<whitespace>value` a
line, `drm-driver` always, then optionally `drm-pdev` (the PCI address), `drm-client-id`,
`drm-engine-<name>: <ns> ns` (time the engine was busy for this client),
`drm-engine-capacity-<name>` (identical engines of that class; 1 when left out),
`drm-cycles-<name>` with `drm-total-cycles-<name>` (busy cycles and the GPU's own timestamp, on
drivers that count cycles, e.g. xe), and memory per region as `drm-resident-<region>` (or its
older alias `drm-memory-<region>`), in bytes, KiB or MiB.

One client can be behind several fds (dup, fork, SCM_RIGHTS): `drm-client-id` (unique per
device, or globally) names it, and the spec asks that it be counted once. A client listed by
several processes is counted for the lowest tgid; a driver without client ids counts per fd.

Engine counters are cumulative; a client's busy share over a poll is its counter's step over the
interval. The spec lets a counter fall back for a while ("stay with the larger previous value"):
an engine whose counter went back in any client of a GPU has no figure that poll, never a
negative one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from croft.domain.dataset import GpuEngine, GpuUse

NS_PER_S = 1_000_000_000
PERCENT_DIGITS = 2
_UNITS = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


@attrs.frozen
class DrmClient:
    """What one open DRM file of a process says at one poll. `device` is the file it opened
    (`/dev/dri/renderD128`), `fd` its number in the process. `engine_ns` holds (engine, busy ns),
    `cycles` (engine, busy cycles, total cycles), `capacity` (engine, identical engines) where
    not 1, and `resident_bytes` (region, bytes); each sorted by name."""

    device: str
    fd: int
    driver: str
    client_id: int | None = None
    pdev: str | None = None
    engine_ns: tuple[tuple[str, int], ...] = ()
    cycles: tuple[tuple[str, int, int], ...] = ()
    capacity: tuple[tuple[str, int], ...] = ()
    resident_bytes: tuple[tuple[str, int], ...] = ()

    @property
    def key(self) -> tuple[str, int | str]:
        """Who the client is across fds and processes: its device (PCI address, else its file)
        and its client id (the file and fd where the driver gives none)."""
        where = self.pdev or self.device
        return (where, self.client_id) if self.client_id is not None else (where, f"{self.device}#{self.fd}")


def parse_fdinfo(text: str, device: str, fd: int) -> DrmClient | None:
    """The DRM client of an fdinfo file's text, or None when it holds no `drm-driver` key (not a
    DRM file, or a driver that exports no usage stats). A key whose value is not what the spec
    says (a number with its unit) is left out, never read as 0."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        if colon and key.startswith("drm-"):
            fields[key] = value.strip()
    driver = fields.get("drm-driver")
    if not driver:
        return None
    engine_ns: dict[str, int] = {}
    busy_cycles: dict[str, int] = {}
    total_cycles: dict[str, int] = {}
    capacity: dict[str, int] = {}
    resident: dict[str, int] = {}
    aliases: dict[str, int] = {}  # drm-memory-<region>, which drm-resident-<region> overrides
    for key, value in fields.items():
        name = key[4:]
        if name.startswith("engine-capacity-"):
            count = _number(value, ("",))
            if count is not None and count > 0:
                capacity[name[16:]] = count
        elif name.startswith("engine-"):
            busy = _number(value, ("ns",))
            if busy is not None:
                engine_ns[name[7:]] = busy
        elif name.startswith("total-cycles-"):
            total = _number(value, ("",))
            if total is not None:
                total_cycles[name[13:]] = total
        elif name.startswith("cycles-"):
            busy = _number(value, ("",))
            if busy is not None:
                busy_cycles[name[7:]] = busy
        elif name.startswith(("resident-", "memory-")):
            size = _bytes(value)
            if size is not None:
                region = name.partition("-")[2]
                (resident if name.startswith("resident-") else aliases)[region] = size
    for region, size in aliases.items():
        resident.setdefault(region, size)
    paired = tuple(
        (engine, busy_cycles[engine], total_cycles[engine])
        for engine in sorted(busy_cycles)
        if engine in total_cycles
    )
    client_id = _number(fields.get("drm-client-id", ""), ("",))
    return DrmClient(
        device=device,
        fd=fd,
        driver=driver,
        client_id=client_id,
        pdev=fields.get("drm-pdev") or None,
        engine_ns=tuple(sorted(engine_ns.items())),
        cycles=paired,
        capacity=tuple(sorted((e, c) for e, c in capacity.items() if c != 1)),
        resident_bytes=tuple(sorted(resident.items())),
    )


def _number(value: str, units: tuple[str, ...]) -> int | None:
    """The unsigned integer of `value` when its unit (what follows it) is one of `units`."""
    number, _, unit = value.partition(" ")
    if not number.isdigit() or not number.isascii() or unit.strip() not in units:
        return None
    return int(number)


def _bytes(value: str) -> int | None:
    number, _, unit = value.partition(" ")
    scale = _UNITS.get(unit.strip())
    if scale is None or not number.isdigit() or not number.isascii():
        return None
    return int(number) * scale


def device_index(device: str) -> int | None:
    """The GPU number of a DRM device file: `/dev/dri/cardN` -> N, `/dev/dri/renderD<128+N>` -> N
    (the kernel numbers render nodes from 128); None for any other name."""
    name = device.rpartition("/")[2]
    for prefix, base in (("renderD", 128), ("card", 0)):
        digits = name.removeprefix(prefix)
        if digits != name and digits.isdigit() and digits.isascii():
            return max(int(digits) - base, 0)
    return None


ClientKey = tuple[str, int | str]


def owned(drm: Mapping[int, Iterable[DrmClient]]) -> dict[ClientKey, tuple[int, DrmClient]]:
    """Every client of a poll by key, with the tgid that counts it: the lowest that lists it."""
    out: dict[ClientKey, tuple[int, DrmClient]] = {}
    for tgid in sorted(drm):
        for client in drm[tgid]:
            out.setdefault(client.key, (tgid, client))
    return out


def drm_uses(
    tgid: int,
    now: Mapping[ClientKey, tuple[int, DrmClient]],
    before: Mapping[ClientKey, tuple[int, DrmClient]],
    interval_ns: int,
) -> tuple[GpuUse, ...]:
    """The GPUs process `tgid` used through the DRM clients it counts in `now` (see `owned`), one
    per device (PCI address, else driver and device number), with the busy share of each engine
    over the `interval_ns` since `before` (the previous poll's clients) where a client of it was
    read then too."""
    devices: dict[tuple[str, str | int | None], list[DrmClient]] = {}
    for owner, client in now.values():
        if owner == tgid:
            where = client.pdev if client.pdev else device_index(client.device)
            devices.setdefault((client.driver, where), []).append(client)
    uses = []
    for (driver, _), clients in sorted(devices.items(), key=lambda item: str(item[0])):
        indexes = [i for i in (device_index(c.device) for c in clients) if i is not None]
        memory = [size for c in clients for _, size in c.resident_bytes]
        paired = [(c, before[c.key][1]) for c in clients if c.key in before]
        engines = _engines(paired, interval_ns) if paired and interval_ns > 0 else None
        uses.append(
            GpuUse(
                index=min(indexes) if indexes else 0,
                driver=driver,
                pci=clients[0].pdev,
                memory_bytes=sum(memory) if memory else None,
                engines=engines,
            )
        )
    return tuple(uses)


def _engines(paired: list[tuple[DrmClient, DrmClient]], interval_ns: int) -> tuple[GpuEngine, ...] | None:
    """Each engine's busy percent of its capacity, summed over the clients read in both polls
    (capped at 100: the clients' reads are a few ms apart); an engine whose counter went back
    in any client is left out. Time-counted engines come first; an engine counted both ways
    (panfrost) is read by its time."""
    shares: dict[str, float] = {}
    back: set[str] = set()
    for now, was in paired:
        capacity = dict(now.capacity)
        before_ns = dict(was.engine_ns)
        for engine, busy in now.engine_ns:
            if engine not in before_ns:
                continue
            step = busy - before_ns[engine]
            if step < 0:
                back.add(engine)
                continue
            shares[engine] = shares.get(engine, 0.0) + step / (interval_ns * capacity.get(engine, 1))
        timed = dict(now.engine_ns)
        before_cycles = {engine: (busy, total) for engine, busy, total in was.cycles}
        for engine, busy, total in now.cycles:
            if engine in timed or engine not in before_cycles:
                continue
            busy_step, total_step = busy - before_cycles[engine][0], total - before_cycles[engine][1]
            if busy_step < 0 or total_step <= 0:
                back.add(engine)
                continue
            shares[engine] = shares.get(engine, 0.0) + busy_step / (total_step * capacity.get(engine, 1))
    engines = tuple(
        GpuEngine(name=engine, busy_percent=round(min(share * 100, 100.0), PERCENT_DIGITS))
        for engine, share in sorted(shares.items())
        if engine not in back
    )
    return engines or None
