"""The DRM clients reader's parsing (`croft.domain.collector.drm`) against the kernel's documented
fdinfo examples (fixtures/drm/, each naming its source), and what a process used of each GPU over
a poll: engine shares, capacities, cycles, clients counted once, counters that go back."""

from __future__ import annotations

import tomllib
from pathlib import Path

import attrs
import pytest

from croft.domain.collector.drm import DrmClient, device_index, drm_uses, owned, parse_fdinfo
from croft.domain.dataset import GpuEngine, GpuUse

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "drm"
KIB, MIB = 1 << 10, 1 << 20
NS = 1_000_000_000


def documented(name: str) -> DrmClient:
    sample = tomllib.loads((FIXTURES / f"{name}.toml").read_text())
    assert sample["source"].startswith("Linux kernel")
    client = parse_fdinfo(sample["fdinfo"], sample["device"], 5)
    assert client is not None
    return client


def test_every_fixture_names_its_source_and_parses() -> None:
    names = sorted(path.stem for path in FIXTURES.glob("*.toml"))
    assert names == ["amdgpu", "i915", "panfrost", "panthor", "xe"]
    for name in names:
        assert documented(name).driver == name


def test_i915_engines_in_ns_with_the_video_class_capacity() -> None:
    assert documented("i915") == DrmClient(
        device="/dev/dri/renderD128",
        fd=5,
        driver="i915",
        client_id=7,
        pdev="0000:00:02.0",
        engine_ns=(("copy", 2035071108), ("render", 9288864723), ("video", 0), ("video-enhance", 0)),
        capacity=(("video", 2),),
    )


def test_xe_counts_cycles_against_the_gpu_timestamp_and_memory_in_units() -> None:
    xe = documented("xe")
    assert (xe.client_id, xe.pdev, xe.engine_ns) == (3, "0000:03:00.0", ())
    total = 7655183225
    assert xe.cycles == (
        ("bcs", 0, total),
        ("ccs", 0, total),
        ("rcs", 28257900, total),
        ("vcs", 0, total),
        ("vecs", 0, total),
    )
    assert xe.capacity == (("ccs", 4), ("vcs", 2), ("vecs", 2))
    # drm-total-cycles-<engine> is no memory region, drm-shared-vram0 (16 MiB) no resident memory
    assert xe.resident_bytes == (("gtt", 192 * KIB), ("stolen", 0), ("system", 0), ("vram0", 23992 * KIB))


def test_panfrost_reads_engine_time_and_ignores_frequencies_and_unpaired_cycles() -> None:
    panfrost = documented("panfrost")
    assert (panfrost.client_id, panfrost.pdev) == (14, None)  # a platform device: no PCI address
    assert panfrost.engine_ns == (("fragment", 1846584880), ("vertex-tiler", 71932239))
    assert panfrost.cycles == ()  # no drm-total-cycles-: its cycles go with drm-maxfreq-
    assert panfrost.resident_bytes == (("memory", 36496 * KIB),)


def test_panthor_regions() -> None:
    panthor = documented("panthor")
    assert panthor.engine_ns == (("panthor", 111110952750),)
    assert panthor.resident_bytes == (("internal", 10396 * KIB), ("memory", 16480 * KIB))


def test_amdgpu_legacy_memory_keys_do_not_count_twice() -> None:
    amdgpu = documented("amdgpu")
    assert (amdgpu.client_id, amdgpu.pdev) == (30, "0000:04:00.0")
    assert amdgpu.engine_ns == (("gfx", 39456116802),)
    # drm-memory-<region> is the older alias of drm-resident-<region>; amd-* keys are the driver's own
    assert amdgpu.resident_bytes == (("cpu", 0), ("gtt", 22 * MIB), ("vram", 544428 * KIB))
    (use,) = drm_uses(1, owned({1: (amdgpu,)}), {}, 2 * NS)
    assert use.memory_bytes == 22 * MIB + 544428 * KIB


def test_an_older_driver_with_only_the_alias_is_read_through_it() -> None:
    text = "drm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\ndrm-memory-vram:\t8 MiB\ndrm-memory-gtt: \t0 KiB\n"
    client = parse_fdinfo(text, "/dev/dri/renderD129", 3)
    assert client is not None
    assert client.resident_bytes == (("gtt", 0), ("vram", 8 * MIB))
    assert client.client_id is None and client.key == ("0000:03:00.0", "/dev/dri/renderD129#3")


@pytest.mark.parametrize(
    "text",
    [
        "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t1204\n",  # any other file
        "pos:\t0\ndrm-client-id:\t7\n",  # no driver named: not the spec's
        "drm-driver:\n",
    ],
)
def test_a_file_without_a_driver_is_no_client(text: str) -> None:
    assert parse_fdinfo(text, "/dev/dri/card0", 3) is None


def test_a_value_that_is_not_the_specs_is_left_out_never_zero() -> None:
    text = (
        "drm-driver:\ti915\ndrm-client-id:\tx7\ndrm-engine-render:\t12.5 %\ndrm-engine-copy:\t10 ms\n"
        "drm-engine-video:\t-3 ns\ndrm-engine-capacity-video:\t0\ndrm-resident-local0:\t4 TB\n"
        "drm-engine-compute:\t\u0665 ns\ndrm-cycles-rcs:\t9\n"
    )
    client = parse_fdinfo(text, "/dev/dri/card0", 3)
    assert client == DrmClient(device="/dev/dri/card0", fd=3, driver="i915")


@pytest.mark.parametrize(
    ("device", "index"),
    [
        ("/dev/dri/card0", 0),
        ("/dev/dri/card1", 1),
        ("/dev/dri/renderD128", 0),
        ("/dev/dri/renderD130", 2),
        ("/dev/dri/by-path/pci-0000:03:00.0-render", None),
        ("/dev/accel/accel0", None),
    ],
)
def test_device_index(device: str, index: int | None) -> None:
    assert device_index(device) == index


def later(client: DrmClient, seconds: float = 2.0, **busy: float) -> DrmClient:
    """`client` `seconds` later with each engine of `busy` busy that share of the time (of one engine
    of its class), the GPU timestamp (cycles) ticking 1e9 a second."""
    engine_ns = tuple((e, ns + int(busy.get(e, 0) * seconds * NS)) for e, ns in client.engine_ns)
    cycles = tuple(
        (e, c + int(busy.get(e, 0) * seconds * NS), t + int(seconds * NS)) for e, c, t in client.cycles
    )
    return attrs.evolve(client, engine_ns=engine_ns, cycles=cycles)


def test_engine_shares_over_a_poll_and_the_capacity_of_a_class() -> None:
    before = documented("i915")
    now = later(before, render=0.5, video=1.0)  # one of the two video engines busy all along
    (use,) = drm_uses(9, owned({9: (now,)}), owned({9: (before,)}), 2 * NS)
    assert use == GpuUse(
        index=0,
        driver="i915",
        pci="0000:00:02.0",
        engines=(
            GpuEngine(name="copy", busy_percent=0.0),
            GpuEngine(name="render", busy_percent=50.0),
            GpuEngine(name="video", busy_percent=50.0),
            GpuEngine(name="video-enhance", busy_percent=0.0),
        ),
    )


def test_cycles_are_shared_out_by_the_gpu_timestamp_not_the_poll_interval() -> None:
    before = documented("xe")
    now = later(before, seconds=3.0, rcs=0.25, ccs=2.0)  # two of the four compute engines
    # the poll said 2 s: xe's cycles measure busy time on the GPU's own clock
    (use,) = drm_uses(9, owned({9: (now,)}), owned({9: (before,)}), 2 * NS)
    assert use.engines is not None
    assert {e.name: e.busy_percent for e in use.engines} == {
        "bcs": 0.0,
        "ccs": 50.0,
        "rcs": 25.0,
        "vcs": 0.0,
        "vecs": 0.0,
    }
    assert use.memory_bytes == (192 + 23992) * KIB


def test_an_engine_counted_both_ways_is_read_by_its_time() -> None:
    before = documented("panfrost")
    # the cycles of a platform GPU without drm-total-cycles stay unread; only the time counts
    now = attrs.evolve(later(before, fragment=0.1), cycles=(("fragment", 1, 2),))
    (use,) = drm_uses(9, owned({9: (now,)}), owned({9: (before,)}), 2 * NS)
    assert use.engines == (
        GpuEngine(name="fragment", busy_percent=10.0),
        GpuEngine(name="vertex-tiler", busy_percent=0.0),
    )
    assert (use.pci, use.index) == (None, 0)


def test_the_first_read_has_memory_and_no_engines() -> None:
    (use,) = drm_uses(9, owned({9: (documented("panthor"),)}), {}, 2 * NS)
    assert use.engines is None
    assert use.memory_bytes == (10396 + 16480) * KIB


def test_a_client_behind_several_fds_and_processes_counts_once_for_the_lowest_pid() -> None:
    before = documented("amdgpu")
    now = later(before, gfx=0.4)
    dup = attrs.evolve(now, fd=9)
    forked = attrs.evolve(now, fd=5)
    clients_now = owned({300: (forked,), 200: (now, dup)})
    clients_before = owned({200: (before,)})
    (use,) = drm_uses(200, clients_now, clients_before, 2 * NS)
    assert use.engines == (GpuEngine(name="gfx", busy_percent=40.0),)
    assert use.memory_bytes == 22 * MIB + 544428 * KIB
    assert drm_uses(300, clients_now, clients_before, 2 * NS) == ()


def test_two_clients_of_one_gpu_add_up_and_card_and_render_node_are_one_gpu() -> None:
    render = documented("panthor")
    card = attrs.evolve(render, device="/dev/dri/card0", client_id=11, fd=6)
    clients = {4: (later(render, panthor=0.25), later(card, panthor=0.5))}
    (use,) = drm_uses(4, owned(clients), owned({4: (render, card)}), 2 * NS)
    assert use.engines == (GpuEngine(name="panthor", busy_percent=75.0),)
    assert use.memory_bytes == 2 * (10396 + 16480) * KIB


def test_two_gpus_are_two_uses() -> None:
    first = documented("amdgpu")
    second = attrs.evolve(first, device="/dev/dri/renderD129", pdev="0000:05:00.0")
    uses = drm_uses(4, owned({4: (first, second)}), {}, 2 * NS)
    assert [(u.index, u.pci) for u in uses] == [(0, "0000:04:00.0"), (1, "0000:05:00.0")]


def test_a_counter_that_went_back_leaves_its_engine_out_that_poll() -> None:
    before = documented("i915")
    now = attrs.evolve(later(before, copy=0.5), engine_ns=(("copy", 10), *later(before).engine_ns[1:]))
    (use,) = drm_uses(9, owned({9: (now,)}), owned({9: (before,)}), 2 * NS)
    assert use.engines is not None
    assert [e.name for e in use.engines] == ["render", "video", "video-enhance"]
    # cycles whose GPU timestamp did not move say nothing either
    xe = documented("xe")
    (stalled,) = drm_uses(9, owned({9: (xe,)}), owned({9: (xe,)}), 2 * NS)
    assert stalled.engines is None


def test_a_share_is_capped_at_the_whole_engine() -> None:
    before = documented("i915")
    now = later(before, seconds=2.01, render=1.0)  # read 10 ms later than the poll's clock says
    (use,) = drm_uses(9, owned({9: (now,)}), owned({9: (before,)}), 2 * NS)
    assert use.engines is not None and use.engines[1] == GpuEngine(name="render", busy_percent=100.0)
