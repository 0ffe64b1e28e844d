"""The Kubernetes API as croft deploy and croft collect use it, through the official client and a
kubeconfig (`--kubeconfig`, else $KUBECONFIG or ~/.kube/config, else the in-cluster account).

Calls go through `ApiClient.call_api` with decoded JSON in and out, so the pure code in
`croft.domain` reads plain dicts. Byte streams from a pod (the dataset endpoint through the pod
proxy) go through an httpx client built from the same configuration: same server, CA, client
certificate and bearer token (refreshed per request where the kubeconfig's exec plugin says so).
Failures are the errors of the Kubernetes port (`croft.adapters.kube.port`).
"""

from __future__ import annotations

import ssl
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any

import httpx

from croft.adapters.kube.port import KubeError, NotFound, Unreachable, error_for
from croft.errors import UserError

FIELD_MANAGER = "croft"


def load_configuration(kubeconfig: Path | None) -> Any:
    """The client configuration of `kubeconfig`, $KUBECONFIG, ~/.kube/config or the in-cluster
    account, in that order; a `UserError` saying which was tried when none works."""
    import yaml
    from kubernetes import client
    from kubernetes import config as kube_config

    loader: Any = kube_config  # untyped
    configuration = client.Configuration()
    try:
        if kubeconfig is not None:
            loader.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        else:
            try:
                loader.load_kube_config(client_configuration=configuration)
            except (loader.ConfigException, FileNotFoundError, TypeError):
                loader.load_incluster_config(client_configuration=configuration)
    except (loader.ConfigException, OSError, ValueError, TypeError, AttributeError, yaml.YAMLError) as exc:
        where = kubeconfig or "$KUBECONFIG, ~/.kube/config or the in-cluster account"
        cause = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UserError(
            f"no usable Kubernetes configuration in {where} ({cause}); give one with --kubeconfig"
        ) from exc
    return configuration


class Kube:
    """JSON calls against the API server of `configuration`."""

    def __init__(self, configuration: Any) -> None:
        from kubernetes import client

        self.configuration = configuration
        self._api: Any = client.ApiClient(configuration)

    def close(self) -> None:
        self._api.close()

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, str] | None = None,
        content_type: str | None = None,
        timeout_s: float = 30.0,
    ) -> Any:
        """One call; the decoded JSON answer. Raises a `KubeError` of the port with the API's message."""
        import json

        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        headers = {"Accept": "application/json"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        try:
            method, url, headers, body, post = self._api.param_serialize(
                method, path, query_params=list((query or {}).items()), header_params=headers, body=body,
                auth_settings=["BearerToken"],
            )  # fmt: skip
            response = self._api.call_api(method, url, headers, body, post, _request_timeout=timeout_s)
            data = response.read()
        except ApiException as exc:
            raise error_for(exc.status or 0, f"{method} {path}: {exc.reason}") from exc
        except HTTPError as exc:
            raise Unreachable(f"cannot reach the API server {self.configuration.host} ({exc})") from exc
        if not 200 <= response.status <= 299:
            message = f"{method} {path}: HTTP {response.status} {_message(data)}".rstrip()
            raise error_for(response.status, message)
        try:
            return json.loads(data)
        except ValueError:
            raise KubeError(f"{method} {path}: the API server answered with non-JSON") from None

    def apply(self, manifest: Mapping[str, Any], path: str, dry_run: bool = False) -> Any:
        """Server-side apply of `manifest` at its object `path`, as field manager `croft`, taking over
        fields another manager set (force): the object as the API server keeps it."""
        query = {"fieldManager": FIELD_MANAGER, "force": "true"}
        if dry_run:
            query["dryRun"] = "All"
        return self.call(
            "PATCH", path, body=dict(manifest), query=query, content_type="application/apply-patch+yaml"
        )

    def get(self, path: str) -> Any | None:
        """The object at `path`, or None when there is none."""
        try:
            return self.call("GET", path)
        except NotFound:
            return None

    def pods(self, namespace: str, selector: str) -> list[Mapping[str, Any]]:
        """The pods of `namespace` matching the label `selector`."""
        body = self.call("GET", f"/api/v1/namespaces/{namespace}/pods", query={"labelSelector": selector})
        items = body.get("items") if isinstance(body, Mapping) else None
        return [item for item in items or [] if isinstance(item, Mapping)]

    def events(self, namespace: str, kind: str, name: str) -> list[Mapping[str, Any]]:
        """The events about object `kind`/`name` in `namespace`."""
        selector = f"involvedObject.kind={kind},involvedObject.name={name}"
        body = self.call("GET", f"/api/v1/namespaces/{namespace}/events", query={"fieldSelector": selector})
        items = body.get("items") if isinstance(body, Mapping) else None
        return [item for item in items or [] if isinstance(item, Mapping)]

    def reader_token(self, namespace: str, account: str) -> str:
        """A short-lived token of the ServiceAccount `account` of `namespace` (the TokenRequest API),
        for a collector that checks who reads it (`croft.domain.access`). Raises the port's errors:
        `NotFound` where no such account was deployed, `Denied` where the user may not ask."""
        from croft.domain.access import issued_token, token_request

        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token"
        token = issued_token(self.call("POST", path, body=token_request()))
        if token is None:
            raise KubeError(f"POST {path}: the API server answered with no token")
        return token

    def http(self, timeout_s: float, headers: Mapping[str, str] | None = None) -> httpx.Client:
        """An httpx client for the same API server with the same credentials, for byte streams;
        `headers` go with every request (a reader's token for the collectors)."""
        timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
        return http_client(self.configuration, timeout, headers)


def http_client(
    configuration: Any, timeout: httpx.Timeout, headers: Mapping[str, str] | None = None
) -> httpx.Client:
    """An httpx client for the API server of `configuration`, with its CA, client certificate and
    bearer token (read per request, so exec plugins and projected tokens refresh); `headers` go
    with every request."""
    cfg = configuration
    verify: ssl.SSLContext | bool = False
    if cfg.verify_ssl:
        verify = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
        if cfg.cert_file:
            verify.load_cert_chain(cfg.cert_file, cfg.key_file)
    return httpx.Client(
        base_url=cfg.host,
        verify=verify,
        auth=_ConfigurationAuth(cfg),
        timeout=timeout,
        trust_env=False,
        headers=dict(headers or {}),
    )


def in_cluster_configuration() -> Any:
    """The client configuration of the pod's own service account (its token, refreshed as the
    kubelet rotates it, and CA); raises the client's ConfigException outside a pod."""
    from kubernetes import client
    from kubernetes import config as kube_config

    configuration = client.Configuration()
    loader: Any = kube_config  # untyped
    loader.load_incluster_config(client_configuration=configuration)
    return configuration


class _ConfigurationAuth(httpx.Auth):
    """The configuration's bearer token (or basic auth), read per request so exec plugins refresh."""

    def __init__(self, configuration: Any) -> None:
        self._cfg = configuration

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        settings = self._cfg.auth_settings()
        bearer = settings.get("BearerToken")
        if bearer and bearer.get("value"):
            request.headers["Authorization"] = bearer["value"]
        elif self._cfg.username:
            request.headers["Authorization"] = self._cfg.get_basic_auth_token()
        yield request


def _message(data: bytes) -> str:
    import json

    try:
        body = json.loads(data)
    except ValueError:
        return data.decode(errors="replace").strip()[:200]
    return str(body.get("message", ""))[:300] if isinstance(body, Mapping) else ""
