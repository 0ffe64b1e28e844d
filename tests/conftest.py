import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_addoption(parser):  # type: ignore[no-untyped-def]
    parser.addoption(
        "--regen-golden",
        action="store_true",
        help="rewrite fixtures/golden/*.jsonl from the replayed traces (same as CROFT_REGEN_GOLDEN=1)",
    )
