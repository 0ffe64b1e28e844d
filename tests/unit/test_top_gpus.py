"""croft top's GPU% and GPUMEM columns: there when any held row names its GPUs, after RSS, blank
for a process no GPU source measured; and the same figures in --json."""

from __future__ import annotations

import msgspec

from croft.domain.dataset import GpuEngine, GpuUse, Row
from croft.domain.top.layout import layout, lines
from croft.domain.top.table import NodePoll, build_table, to_json
from tests.helpers.rows import T0_MS, make_row

GIB = 1 << 30


def gpu_row(tgid: int, *uses: GpuUse, unix_ms: int = T0_MS) -> Row:
    return msgspec.structs.replace(make_row(tgid, unix_ms, workload="gpu-held"), gpus=uses)


H100 = GpuUse(index=0, uuid="GPU-4b1e", memory_bytes=12 * GIB, sm_percent=87.5)
AMD = GpuUse(
    index=0,
    driver="amdgpu",
    pci="0000:03:00.0",
    memory_bytes=512 << 20,
    engines=(GpuEngine(name="gfx", busy_percent=40.0), GpuEngine(name="dec", busy_percent=65.0)),
)


def cells_by_pid(table) -> dict[str, dict[str, str]]:  # type: ignore[no-untyped-def]
    keys = [c.key for c in table.columns]
    return {row.cells[keys.index("pid")]: dict(zip(keys, row.cells, strict=True)) for row in table.rows}


def test_gpu_columns_follow_rss_when_a_row_names_its_gpus() -> None:
    rows = (
        gpu_row(1, H100, GpuUse(index=1, uuid="GPU-9d2a", memory_bytes=GIB, sm_percent=100.0)),
        gpu_row(2, AMD),
        gpu_row(3, GpuUse(index=0, uuid="GPU-2c4e", gpu_instance_id=1, compute_instance_id=0)),  # MIG
        make_row(4),
    )
    table = build_table([NodePoll("gpu-a", T0_MS, rows)], T0_MS)
    keys = [c.key for c in table.columns]
    assert keys[keys.index("rss") + 1 : keys.index("rss") + 3] == ["gpu", "gpu_memory"]
    cells = cells_by_pid(table)
    assert (cells["1"]["gpu"], cells["1"]["gpu_memory"]) == ("187.5", "13G")  # two GPUs
    assert (cells["2"]["gpu"], cells["2"]["gpu_memory"]) == ("65.0", "512M")  # DRM's busiest engine
    assert (cells["3"]["gpu"], cells["3"]["gpu_memory"]) == ("", "")  # MIG: nothing measured
    assert (cells["4"]["gpu"], cells["4"]["gpu_memory"]) == ("", "")
    titles, _ = lines(table, layout(table, None))
    assert " RSS  GPU% GPUMEM NET/s" in titles


def test_no_gpu_columns_without_gpus_and_they_give_way_on_a_narrow_screen() -> None:
    plain = build_table([NodePoll("gpu-a", T0_MS, (make_row(1),))], T0_MS)
    assert "gpu" not in [c.key for c in plain.columns]
    table = build_table([NodePoll("gpu-a", T0_MS, (gpu_row(1, H100),))], T0_MS)
    narrow = layout(table, 40)
    kept = [c.key for c, w in zip(table.columns, narrow, strict=True) if w is not None]
    assert "cpu" in kept and "gpu_memory" not in kept


def test_an_idle_gpu_process_shows_gpu_zero_and_its_last_memory() -> None:
    earlier = (gpu_row(1, H100, unix_ms=T0_MS - 4000),)
    table = build_table([NodePoll("gpu-a", T0_MS, (make_row(2),), earlier)], T0_MS)
    cells = cells_by_pid(table)
    assert (cells["1"]["gpu"], cells["1"]["gpu_memory"]) == ("0.0", "12G")


def test_json_carries_the_gpu_figures_of_rows_that_name_gpus() -> None:
    earlier = (gpu_row(3, AMD, unix_ms=T0_MS - 4000),)
    out = to_json([NodePoll("gpu-a", T0_MS, (gpu_row(1, H100), make_row(2)), earlier)])
    processes = {p["pid"]: p for p in out["processes"]}  # type: ignore[union-attr,index]
    assert (processes[1]["gpu_percent"], processes[1]["gpu_memory_bytes"]) == (87.5, 12 * GIB)
    assert "gpu_percent" not in processes[2] and "gpu_memory_bytes" not in processes[2]
    assert (processes[3]["gpu_percent"], processes[3]["gpu_memory_bytes"]) == (0.0, 512 << 20)
