"""Container ids and row cgroups of whole /proc/<pid>/cgroup files, one per runtime, cgroup driver
and QoS class (fixtures/cgroup-layouts/cases.toml names where each layout comes from)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from croft.domain.collector.container import container_id, container_ids, membership_container_id, row_cgroup
from croft.domain.collector.procparse import parse_cgroup_membership

LAYOUTS = Path(__file__).resolve().parents[2] / "fixtures" / "cgroup-layouts"
CASES = tomllib.loads((LAYOUTS / "cases.toml").read_text())["case"]


def test_every_file_is_a_case_and_every_case_names_its_source() -> None:
    assert sorted(c["file"] for c in CASES) == sorted(p.name for p in LAYOUTS.glob("*.txt"))
    assert all(c["source"].strip() for c in CASES)
    kinds = " ".join(c["layout"] for c in CASES).lower()
    for wanted in (
        "cgroupfs",
        "systemd",
        "docker",
        "containerd",
        "cri-o",
        "podman rootful",
        "podman rootless",
    ):
        assert wanted in kinds, wanted
    for wanted in ("guaranteed", "burstable", "besteffort", "kind", "v1", "v2", "hybrid"):
        assert wanted in kinds, wanted


@pytest.mark.parametrize("case", CASES, ids=[c["file"].removesuffix(".txt") for c in CASES])
def test_whole_file_gives_the_container_id_and_the_row_cgroup(case: dict[str, str]) -> None:
    membership = parse_cgroup_membership((LAYOUTS / case["file"]).read_bytes())
    assert membership_container_id(membership) == case.get("container_id"), case["layout"]
    cgroup = row_cgroup(membership)
    if "cgroup" in case:
        assert cgroup == case["cgroup"], case["layout"]
    if "container_id" in case:
        # the row names the path its container id comes from
        assert container_id(cgroup) == case["container_id"]
        assert cgroup in membership.paths()


_HEX = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
_HOST = st.lists(
    st.sampled_from(["system.slice", "user.slice", "kubepods", "burstable", "init.scope"]), max_size=3
)


@st.composite
def _container_path(draw: st.DrawFn) -> tuple[str, str]:
    """A path of one container in one of the runtimes' forms, and its id."""
    cid = draw(_HEX)
    form = draw(st.sampled_from(["docker/{}", "docker-{}.scope", "cri-containerd-{}.scope", "crio-{}.scope"]))
    form = draw(
        st.sampled_from([form, "kubepods/besteffort/pod1234abcd-5678/{}", "p.slice:cri-containerd:{}"])
    )
    prefix = "/".join(draw(_HOST))
    return (f"/{prefix}/" if prefix else "/") + form.format(cid), cid


@given(_container_path(), _container_path())
def test_nested_container_the_innermost_id_wins(outer: tuple[str, str], inner: tuple[str, str]) -> None:
    path = outer[0] + inner[0]
    assert container_id(path) == inner[1]
    assert container_ids(path)[-1] == inner[1] and outer[1] in container_ids(path)


@given(_HOST)
def test_host_paths_have_no_container(parts: list[str]) -> None:
    assert container_id("/" + "/".join(parts)) is None
