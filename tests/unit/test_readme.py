"""README's Python example runs as written, from the repository's root, and finds rows: an id that
matches no fixture would quietly print nothing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_python_example_prints_rows_of_its_container() -> None:
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    example = next(block for block in blocks if "dataset.node_rows" in block)
    container = re.search(r'container_id="([0-9a-f]+)"', example)
    assert container, example
    done = subprocess.run(
        [sys.executable, "-c", example], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) >= 10, done.stdout
    for line in lines:
        node, unix_ms, cpu_cores, workload = line.split()
        assert node == "gpu-a" and int(unix_ms) >= 1792506000000 and float(cpu_cores) >= 0
        assert workload in ("gpu-onset", "gpu-held", "no-gpu")
