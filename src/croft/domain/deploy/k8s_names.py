"""Kubernetes object names, checked before they reach a manifest or an API path.

The rules are Kubernetes' (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/):
a namespace is an RFC 1123 label (DNS-1123 label): at most 63 characters, lower-case letters, digits
and `-`, starting and ending with a letter or digit. Most other objects (a Deployment) are RFC 1123
subdomains: at most 253 characters, dot-separated labels of that form. A name that breaks them would
be refused by the API server at best, and at worst inject YAML into `--dry-run` output or a path
into a URL.
"""

from __future__ import annotations

import re

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LABEL_MAX = 63
SUBDOMAIN_MAX = 253


def label_problem(option: str, value: str) -> str | None:
    """One sentence naming the rule `value` (given as `option`) breaks as a DNS-1123 label, or None."""
    if len(value) <= LABEL_MAX and _LABEL.fullmatch(value) is not None:
        return None
    return (
        f"{option} {value!r:.80} is not a valid Kubernetes name: a DNS-1123 label is 1 to {LABEL_MAX} "
        "lower-case letters, digits or '-', starting and ending with a letter or digit (e.g. croft)"
    )


def subdomain_problem(option: str, value: str) -> str | None:
    """One sentence naming the rule `value` (given as `option`) breaks as a DNS-1123 subdomain, or None."""
    labels = value.split(".")
    if len(value) <= SUBDOMAIN_MAX and all(_LABEL.fullmatch(label) is not None for label in labels):
        return None
    return (
        f"{option} {value!r:.80} is not a valid Kubernetes name: a DNS-1123 subdomain is 1 to "
        f"{SUBDOMAIN_MAX} characters, dot-separated labels of lower-case letters, digits or '-', each "
        "starting and ending with a letter or digit (e.g. webapp)"
    )
