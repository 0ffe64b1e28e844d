"""The experiment harness (labs/research/experiment) is a directory of modules run as `python run.py`;
its tests import them with that directory on sys.path, as run.py itself has."""

from __future__ import annotations

import sys
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "labs" / "research" / "experiment"
if str(HARNESS) not in sys.path:
    sys.path.insert(0, str(HARNESS))
