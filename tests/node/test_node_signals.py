"""The offered-load signal on the real node: one webapp pod under open-loop keep-alive load (the harness's
loadgen.py), stepped from below its capacity to twice and four times it, while the collector pod's
/metrics is read at every poll (labs/research/experiment/signals.py). Once the pod is saturated,
`tcp_data_segments` (what the kernel received) keeps rising with the offered load; `sendto` (what
the application answered) does not.

`CROFT_SIGNAL_STEPS` (rate:seconds,...) and `CROFT_SIGNAL_CPU` (the pod's CPU limit) turn this into
the full measurement of the note; by default the pod gets 250m CPU, 50 ms a request (about 5
requests/s), and 2, 8 and 16 requests/s."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from tests.helpers.node import REPO, Node, container_ids, reader_token, wait_for

import loadgen
import signals
from croft.runs.signals import figures, saturated, settled, table

pytestmark = [pytest.mark.node, pytest.mark.root, pytest.mark.bpf, pytest.mark.slow]

LAB = REPO / "labs" / "research" / "experiment" / "workloads" / "webapp"
STEPS = os.environ.get("CROFT_SIGNAL_STEPS", "2:20,8:24,16:24")
CPU = os.environ.get("CROFT_SIGNAL_CPU", "250m")
SETTLE_S = 8.0


def webapp(namespace: str, image: str, cpu: str) -> str:
    """The lab's Deployment, in `namespace`, with the local image and a CPU limit of `cpu` (the
    request 100m, so it fits this 2-core node beside the others); no readiness probe unless the
    limit is the lab's own 1 CPU (a probe's requests would count as load)."""
    text = (LAB / "k8s" / "deployment.yaml").read_text()
    text = text.replace("namespace: croft-exp", f"namespace: {namespace}")
    text = text.replace("image: croft-webapp:v1", f"image: {image}")
    text = text.replace('requests: {cpu: "1", memory: 64Mi}', "requests: {cpu: 100m, memory: 64Mi}")
    text = text.replace('limits: {cpu: "1", memory: 128Mi}', f'limits: {{cpu: "{cpu}", memory: 128Mi}}')
    if cpu != "1":
        text = text[: text.index("          readinessProbe:")]
    assert text.count(namespace) == 1 and image in text and f'cpu: "{cpu}"' in text
    return text


def level(rows: list[Any], step: Any, name: str) -> float:
    """The mean of candidate `name` (or, for "sent", what the client sent) over the step's settled polls."""
    window: list[float] = []
    for poll in settled(rows, step, SETTLE_S):
        value = poll.sent_rps if name == "sent" else poll.values.get(name)
        if value is not None:
            window.append(value)
    assert window, f"no settled poll of {name} in the step at {step.offered_rps} RPS"
    return statistics.fmean(window)


def test_tcp_data_segments_keep_rising_after_saturation_while_sendto_does_not(
    node: Node, collector: dict[str, Any], webapp_image: str, namespace: str, tmp_path: Path
) -> None:
    node.apply(webapp(namespace, webapp_image, CPU))
    (pod,) = node.wait_ready(namespace, "app=webapp", 1)
    container = container_ids(pod)["webapp"]
    metrics = f"http://{collector['status']['podIP']}:9464/metrics"
    pick = signals.Pick(container_id=container)
    token = {"Authorization": f"Bearer {reader_token(node)}"}  # the collector checks who reads

    def measured() -> bool:
        _, values = signals.values_of(httpx.get(metrics, headers=token, timeout=2).text, pick)
        return "ingress:tcp_data_segments" in values

    wait_for("the collector to measure the pod's network namespace", measured, 60, every_s=1)
    steps = signals.parse_steps(STEPS)
    profile = signals.profile_of(steps)
    target = loadgen.Target(f"http://{pod['status']['podIP']}:8080", ("/work",), 10.0)
    start, outcomes, polls = asyncio.run(signals.measure(target, profile, metrics, pick, token))
    rows = signals.records(polls, outcomes, start, profile)
    result = figures(rows, steps, signals.CANDIDATES, SETTLE_S)
    (tmp_path / "signals.json").write_text(
        json.dumps({"polls": [attrs.asdict(r) for r in rows], "figures": [attrs.asdict(f) for f in result]})
    )
    print(f"webapp at {CPU} CPU, steps {STEPS}, {len(rows)} polls\n{table(result)}")
    verdicts = [saturated(rows, step, SETTLE_S) for step in steps]
    assert verdicts[0] is False and verdicts[-1] is True, (
        f"the pod was not stepped past its capacity: {verdicts}"
    )
    last, before = steps[-1], steps[-2]
    assert verdicts[-2] is True, "the last two steps are both meant to be past capacity"
    segments = level(rows, last, "ingress:tcp_data_segments") / level(
        rows, before, "ingress:tcp_data_segments"
    )
    replies = level(rows, last, "syscall:sendto") / level(rows, before, "syscall:sendto")
    sent = level(rows, last, "sent") / level(rows, before, "sent")
    offered = last.offered_rps / before.offered_rps
    # Offered load rose past saturation (and the client, on this shared machine, did send more): what
    # arrived rises with what was sent, what was answered does not.
    assert sent - 1 >= 0.5 * (offered - 1), f"the client sent only {sent:.2f}x more: it was starved of CPU"
    assert segments - 1 >= 0.75 * (sent - 1), (segments, sent)
    assert replies <= 1.25, (replies, sent)
