import atexit
import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

# croft stats and croft profile remember passed summary checks in a cache directory (default
# ~/.cache/croft): the suite, and every croft it starts, keeps its own, out of the user's home.
if "CROFT_CACHE_DIR" not in os.environ:
    os.environ["CROFT_CACHE_DIR"] = tempfile.mkdtemp(prefix="croft-test-cache-")
    atexit.register(shutil.rmtree, os.environ["CROFT_CACHE_DIR"], True)


def pytest_addoption(parser):  # type: ignore[no-untyped-def]
    parser.addoption(
        "--regen-golden",
        action="store_true",
        help="rewrite fixtures/golden/*.jsonl from the replayed traces (same as CROFT_REGEN_GOLDEN=1)",
    )
