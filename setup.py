"""croft's C module: the line scanner of the /metrics bodies croft scale reads
(src/croft/domain/metrics/_linescan.c).
Everything else about the package is in pyproject.toml."""

from setuptools import Extension, setup

WARNINGS = ["-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"]

setup(
    ext_modules=[
        Extension(
            "croft.domain.metrics._linescan",
            ["src/croft/domain/metrics/_linescan.c"],
            extra_compile_args=["-O3", *WARNINGS],
            optional=False,
        ),
    ]
)
