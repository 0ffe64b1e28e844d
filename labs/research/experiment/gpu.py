"""`run.py gpu`: the GPU suite, one Kubernetes Job per workload, each asking for one GPU, one at a
time. `--dry-run` prints the plan (and with `--manifests` the Job YAML) without a cluster; a real
run applies each Job, waits for it, and appends a line to data/gpu/runs.jsonl: label, parameters,
node, container id, start, end (unix ms)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

import kube

NAMESPACE = "croft-gpu"
TORCH = "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime"
SCRIPTS = Path(__file__).resolve().parent / "workloads" / "gpu"


@attrs.frozen
class GpuWorkload:
    label: str
    image: str
    command: tuple[str, ...]
    duration_s: int
    framework: str

    def manifest(self) -> dict[str, Any]:
        name = f"croft-{self.label}"
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"croft.label": self.label}},
            "spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": self.duration_s + 600,
                "template": {
                    "metadata": {"labels": {"croft.label": self.label}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "workload",
                                "image": self.image,
                                "command": list(self.command),
                                "resources": {"limits": {"nvidia.com/gpu": 1}},
                            }
                        ],
                    },
                },
            },
        }


def _python(script: str, duration_s: int) -> tuple[str, ...]:
    """`python -c <workloads/gpu/script>` with SECS set: the Job needs no ConfigMap."""
    return ("env", f"SECS={duration_s}", "python", "-c", (SCRIPTS / script).read_text())


def suite(duration_s: int = 300) -> tuple[GpuWorkload, ...]:
    """training, batch inference, generation, HTTP serving, ollama serving, idle GPU."""
    serving = ("timeout", str(duration_s), *_python("http_serving.py", duration_s))
    ollama = ("sh", "-c", f"timeout {duration_s} ollama serve || true")
    return (
        GpuWorkload("training", TORCH, _python("training.py", duration_s), duration_s, "pytorch"),
        GpuWorkload(
            "batch-inference", TORCH, _python("batch_inference.py", duration_s), duration_s, "pytorch"
        ),
        GpuWorkload("generation", TORCH, _python("generation.py", duration_s), duration_s, "pytorch"),
        GpuWorkload("http-serving", TORCH, serving, duration_s, "pytorch"),
        GpuWorkload("ollama-serving", "ollama/ollama:0.3.12", ollama, duration_s, "ollama"),
        GpuWorkload("idle-gpu", TORCH, _python("idle_gpu.py", duration_s), duration_s, "pytorch"),
    )


def manifests_yaml(workloads: Sequence[GpuWorkload]) -> str:
    """The `croft-gpu` Namespace and every Job as one multi-document YAML text, for
    `run.py gpu --dry-run --manifests | kubectl apply -f -`."""
    import yaml

    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    docs = [namespace, *(w.manifest() for w in workloads)]
    return "".join("---\n" + yaml.safe_dump(doc, sort_keys=False, width=110) for doc in docs)


def plan_text(workloads: Sequence[GpuWorkload], manifests: bool = False) -> str:
    """The plan: one line per Job in run order, then (with `manifests`) the Jobs as JSON."""
    lines = [f"GPU suite: {len(workloads)} Jobs in namespace {NAMESPACE}, one at a time, 1 GPU each"]
    total = 0
    for i, w in enumerate(workloads, start=1):
        total += w.duration_s
        lines.append(f"{i}. {w.label:16} {w.duration_s:>5} s  {w.framework:8} {w.image}")
    lines.append(f"total: about {total / 60:.0f} min of GPU time, plus image pulls")
    if manifests:
        lines += [json.dumps(w.manifest(), indent=1) for w in workloads]
    return "\n".join(lines)


def run_suite(k: kube.Kubectl, workloads: Sequence[GpuWorkload], data_dir: Path) -> None:
    """Apply each Job, wait for it, record it in data/gpu/runs.jsonl, delete it."""
    k.run("create", "namespace", NAMESPACE, check=False)
    out = data_dir / "gpu" / "runs.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    for w in workloads:
        name = f"croft-{w.label}"
        k.run("-n", NAMESPACE, "delete", "job", name, "--ignore-not-found", "--wait=true")
        start = int(time.time() * 1000)
        k.run("apply", "-f", "-", stdin=json.dumps(w.manifest()))
        wait = f"--timeout={w.duration_s + 900}s"
        k.run("-n", NAMESPACE, "wait", f"job/{name}", "--for=condition=complete", wait, check=False)
        end = int(time.time() * 1000)
        pods = k.json("-n", NAMESPACE, "get", "pods", "-l", f"job-name={name}")["items"]
        pod = pods[0] if pods else {}
        statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
        line = {
            "label": w.label,
            "parameters": {"image": w.image, "duration_s": w.duration_s, "framework": w.framework},
            "node": (pod.get("spec") or {}).get("nodeName"),
            "container_id": (statuses[0].get("containerID") or "").split("://", 1)[-1] or None,
            "start_ms": start,
            "end_ms": end,
        }
        with out.open("a") as f:
            f.write(json.dumps(line) + "\n")
        k.run("-n", NAMESPACE, "delete", "job", name, "--ignore-not-found")
