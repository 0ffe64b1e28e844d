"""A test that asks for `loader` runs once per loader of croft's eBPF programs (tests.helpers.loaders)."""

from __future__ import annotations

import pytest

from tests.helpers.loaders import LOADERS, skip_unless_loadable


@pytest.fixture(params=LOADERS)
def loader(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    skip_unless_loadable(name)
    return name
