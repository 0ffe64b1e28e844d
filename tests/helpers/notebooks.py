"""Running labs/research's notebooks as the tests do: nbclient on a Python kernel of this
interpreter, with the notebook's inputs and output directory passed as environment variables
(CROFT_RESEARCH_RUNS, CROFT_RESEARCH_DATASET, CROFT_RESEARCH_OUT), from the notebook's directory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESEARCH = REPO / "labs" / "research"
NOTEBOOKS = ("burst_signals.ipynb", "lead_time.ipynb")
FIXTURE = REPO / "fixtures" / "research-run"


def fresh_research(root: Path) -> Path:
    """labs/research as a fresh clone has it, under `root`: the notebooks, and the harness's modules
    (linked) without a data directory; returns its labs/research."""
    research = root / "labs" / "research"
    (research / "experiment").mkdir(parents=True)
    for name in NOTEBOOKS:
        (research / name).write_bytes((RESEARCH / name).read_bytes())
    for module in (RESEARCH / "experiment").glob("*.py"):
        (research / "experiment" / module.name).symlink_to(module)
    return research


def execute(
    notebook: Path, runs: Path | None, dataset: Path | None, out: Path, timeout_s: float = 120
) -> Any:
    """Execute `notebook` on the run directories under `runs` and the croft dataset at `dataset`
    (None: not named, so the notebook's defaults), writing its figures and tables under `out`;
    returns the executed notebook (nbformat). A cell that raises fails with nbclient's
    CellExecutionError (the cell and its traceback)."""
    import nbclient
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    env = {
        "CROFT_RESEARCH_RUNS": "" if runs is None else str(runs),
        "CROFT_RESEARCH_DATASET": "" if dataset is None else str(dataset),
        "CROFT_RESEARCH_OUT": str(out),
        # jupyter_core's DeprecationWarning about its paths (warnings are errors in the tests)
        "JUPYTER_PLATFORM_DIRS": "1",
        "MPLBACKEND": "Agg",
    }
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)  # the kernel inherits this process' environment
    try:
        client = nbclient.NotebookClient(
            nb,
            timeout=int(timeout_s),
            kernel_name="python3",
            resources={"metadata": {"path": str(notebook.parent)}},
        )
        client.execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return nb


def first_output(nb: Any) -> str:
    """The text of the notebook's first output (of its first code cell that printed something)."""
    for cell in nb.cells:
        for output in cell.get("outputs", ()):
            if output.get("output_type") == "stream":
                return str(output.get("text", ""))
    return ""


def outputs_of(nb: Any) -> str:
    """Every text output of an executed notebook, joined (stream text and text/plain results)."""
    parts = []
    for cell in nb.cells:
        for output in cell.get("outputs", ()):
            if output.get("output_type") == "stream":
                parts.append(output.get("text", ""))
            elif "data" in output:
                parts.append(output["data"].get("text/plain", ""))
    return "\n".join(parts)
