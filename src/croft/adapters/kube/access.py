"""The reviews `croft run --auth kubernetes` asks the API server for: TokenReview (who a token is)
and SubjectAccessReview (whether that reader may read a route). `croft.app.access` caches them in
front of /metrics and /dataset; `croft.domain.access` says what is asked and what each answer means.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from croft.domain.access import Reader, access_review, token_review

REVIEW_TIMEOUT_S = 5.0


class Reviewer(Protocol):
    """The port: who a token is, and whether a reader may read a route, as the API server answers
    (decoded JSON; a `KubeError` when it cannot be asked)."""

    def who(self, token: str) -> Any: ...
    def may(self, reader: Reader, route: str) -> Any: ...


class Reviews:
    """The real `Reviewer`: the two reviews, through `call` (`Kube.call`)."""

    def __init__(self, call: Callable[..., Any]) -> None:
        self._call = call

    def who(self, token: str) -> Any:
        return self._call(
            "POST", "/apis/authentication.k8s.io/v1/tokenreviews", body=token_review(token),
            timeout_s=REVIEW_TIMEOUT_S,
        )  # fmt: skip

    def may(self, reader: Reader, route: str) -> Any:
        return self._call(
            "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=access_review(reader, route),
            timeout_s=REVIEW_TIMEOUT_S,
        )  # fmt: skip
