"""The imperative shell of croft scale: gather a poll's observations, decide, carry the decision out.

The decision itself is `croft.domain.scaling.decision.desired_replicas`; this module only talks to two
ports, the Kubernetes one (`croft.adapters.kube.port`: the calls and their errors) and the clock
(`croft.adapters.host.clock`), so the same loop runs against the real API (croft.adapters.kube.scale_api)
and against test fakes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TextIO

import attrs

from croft.adapters.host.clock import Clock
from croft.adapters.kube.port import Denied, KubeError, ScaleApi, Unreachable
from croft.domain.metrics.query import query_string
from croft.domain.scaling.decision import (
    CollectorScrape,
    Decision,
    DeploymentView,
    Observations,
    ScaleConfig,
    ScaleHistory,
    desired_replicas,
    scrape_query,
)
from croft.domain.scaling.kube import deployment_view, label_selector, pod_view
from croft.domain.scaling.log import LogFormat, decision_fields, hold_fields, render
from croft.domain.scaling.record import RecordedPoll, encode_poll
from croft.domain.schedule import next_deadline
from croft.domain.utc import iso_ms
from croft.errors import UserError


@attrs.frozen
class Target:
    """What to scale and where the collectors are."""

    namespace: str
    deployment: str
    collector_namespace: str
    collector_selector: str
    collector_port: int


DENIAL_GRACE_S = 30.0
"""How long 401/403 answers may last inside the loop before croft scale stops. A restarting
kube-apiserver answers 403 to authorized users for about half a second after its port opens, until
its RBAC cache is loaded; a Role really taken away is still reported, a grace period later."""


class ApiDown(Exception):
    """The API did not answer this poll; the loop holds and tries again next poll."""


class ApiDenied(ApiDown):
    """The API refused a call this poll (401/403); the loop holds until the denial outlasts the grace."""


class ScaleLoop:
    """One poll at a time: `poll()` gathers, decides, records, logs and (unless dry-run) patches."""

    def __init__(
        self,
        target: Target,
        config: ScaleConfig,
        kube: ScaleApi,
        clock: Clock,
        *,
        dry_run: bool,
        log: Callable[[str], None],
        record: TextIO | None = None,
        log_format: LogFormat = "logfmt",
        denial_grace_s: float = DENIAL_GRACE_S,
    ) -> None:
        """An `Unreachable` API holds the poll; so does a `Denied` one (also from a scrape or the
        patch) until denials have lasted `denial_grace_s` without a poll free of them, which ends the
        run as a UserError with the API's sentence; any other `KubeError` ends it at once; any other
        scrape failure is a gap."""
        self.target, self.config = target, config
        self._kube, self._clock = kube, clock
        self._dry_run, self._log, self._record = dry_run, log, record
        self._log_format = log_format
        self._grace_ns = int(denial_grace_s * 1e9)
        self._denied_since_ns: int | None = None
        self._denied_now = False
        self.history = ScaleHistory()
        self._query = query_string(scrape_query(config))

    def _emit(self, now_ms: int, fields: dict[str, str | int | float | bool | None]) -> None:
        self._log(render(iso_ms(now_ms), fields, self._log_format))

    def _denied(self, exc: Exception) -> ApiDenied:
        """Note a denial; raises `UserError` with the API's sentence once denials outlast the grace."""
        now_ns = self._clock.now().monotonic_ns
        if self._denied_since_ns is None:
            self._denied_since_ns = now_ns
        self._denied_now = True
        if now_ns - self._denied_since_ns > self._grace_ns:
            raise UserError(str(exc))
        return ApiDenied(str(exc))

    def _now_ms(self) -> int:
        return self._clock.now().unix_ms

    def _call(self, what: Callable[[], Any]) -> Any:
        try:
            return what()
        except Unreachable as exc:
            raise ApiDown(str(exc)) from None
        except Denied as exc:
            raise self._denied(exc) from None
        except KubeError as exc:
            raise UserError(str(exc)) from None

    def _scrape(self, collector: Mapping[str, Any]) -> CollectorScrape:
        name = str((collector.get("metadata") or {}).get("name", "?"))
        phase = (collector.get("status") or {}).get("phase")
        if phase != "Running":
            return CollectorScrape(name, self._now_ms(), None, f"pod is {phase or 'without a phase'}")
        try:
            port = self.target.collector_port
            body = self._kube.pod_metrics(self.target.collector_namespace, name, port, self._query)
        except Denied as exc:
            raise self._denied(exc) from None
        except Exception as exc:  # any failure of one collector is a gap, never a crash of the loop
            return CollectorScrape(name, self._now_ms(), None, str(exc) or type(exc).__name__)
        return CollectorScrape(name, self._now_ms(), body)

    def observe(self, now_ms: int) -> tuple[DeploymentView, Observations]:
        """The Deployment, its pods and every collector's /metrics; raises ApiDown or UserError."""
        t = self.target
        obj = self._call(lambda: self._kube.deployment(t.namespace, t.deployment))
        try:
            view, selector = deployment_view(obj), label_selector(obj)
        except ValueError as exc:
            raise UserError(f"deployment {t.namespace}/{t.deployment}: {exc}") from None
        pods = self._call(lambda: self._kube.pods(t.namespace, selector))
        collectors = self._call(lambda: self._kube.pods(t.collector_namespace, t.collector_selector))
        scrapes: Sequence[CollectorScrape] = ()
        if collectors:
            with ThreadPoolExecutor(max_workers=min(len(collectors), 8)) as pool:
                scrapes = list(pool.map(self._scrape, collectors))
        return view, Observations(now_ms, tuple(pod_view(p) for p in pods), tuple(scrapes))

    def poll(self) -> Decision | None:
        """One poll; None when the API did not answer or refused (logged; the up streak starts
        over). Raises `UserError` when denials outlast the grace period."""
        now_ms = self._now_ms()
        self._denied_now = False
        try:
            decision = self._decide(now_ms)
        finally:
            if not self._denied_now:
                self._denied_since_ns = None
        return decision

    def _decide(self, now_ms: int) -> Decision | None:
        try:
            view, observations = self.observe(now_ms)
        except ApiDown as exc:
            self.history = attrs.evolve(self.history, up_streak=0)
            reason = "api-denied" if isinstance(exc, ApiDenied) else "api-unreachable"
            self._emit(now_ms, hold_fields(reason, str(exc)))
            return None
        decision = desired_replicas(observations, view, self.config, self.history)
        self.history = decision.history
        if self._record is not None:
            self._record.write(encode_poll(RecordedPoll(view, observations)) + "\n")
            self._record.flush()
        fields = decision_fields(decision)
        if self._dry_run and decision.action != "hold":
            fields["dry_run"] = True
        self._emit(now_ms, fields)
        if decision.action != "hold" and not self._dry_run:
            self._apply(decision)
        return decision

    def _apply(self, decision: Decision) -> None:
        t = self.target
        try:
            self._call(lambda: self._kube.patch_scale(t.namespace, t.deployment, decision.replicas))
        except ApiDown as exc:
            # Not applied: let the next poll that still asks for more try again at once.
            if decision.action == "up":
                self.history = attrs.evolve(self.history, up_streak=self.config.confirm_polls - 1)
            self._emit(self._now_ms(), hold_fields("patch-failed", str(exc)))

    def run(self, polls: int = 0) -> None:
        """Poll every `config.interval_s` on a fixed schedule until the clock is woken (a stop was
        asked for) or `polls` polls are done (0: forever)."""
        interval_ns = int(self.config.interval_s * 1e9)
        start_ns = self._clock.now().monotonic_ns
        done = 0
        while True:
            self.poll()
            done += 1
            if polls and done >= polls:
                return
            deadline = next_deadline(start_ns, interval_ns, self._clock.now().monotonic_ns)
            if not self._clock.sleep_until(deadline):
                return
