"""croft's C module: croft stats' fast path over canonical rows (src/croft/domain/dataset/_rowscan.c).
Everything else about the package is in pyproject.toml."""

from setuptools import Extension, setup

WARNINGS = ["-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"]

setup(
    ext_modules=[
        Extension(
            "croft.domain.dataset._rowscan",
            ["src/croft/domain/dataset/_rowscan.c"],
            extra_compile_args=["-O3", *WARNINGS],
            optional=False,
        ),
    ]
)
