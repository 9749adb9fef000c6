"""examples/kubernetes/: the manifests against the Kubernetes API's own JSON schemas (strict:
an unknown field is refused), the wiring between them, and the pods' scripts run here as the
Indexed Job's pods would run them (one per completion index), then the merge step.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "kubernetes"
K8S_VERSION = "1.37.0"


def _documents() -> dict[tuple[str, str], dict[str, Any]]:
    docs = {}
    for path in sorted(EXAMPLE.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return docs


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_every_manifest_is_valid_against_the_kubernetes_schema() -> None:
    docs = _documents()
    assert set(docs) == {("Deployment", "tooleffect-redis"), ("Service", "tooleffect-redis"),
                         ("PersistentVolumeClaim", "tooleffect-records"), ("Job", "tooleffect-shards"),
                         ("Job", "tooleffect-merge")}
    for doc in docs.values():
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    misspelt = copy.deepcopy(docs[("Job", "tooleffect-shards")])
    misspelt["spec"]["completionMod"] = misspelt["spec"].pop("completionMode")
    with pytest.raises(kubernetes_validate.ValidationError, match="completionMod"):
        kubernetes_validate.validate(misspelt, K8S_VERSION, strict=True)
    wrong_type = copy.deepcopy(docs[("Job", "tooleffect-shards")])
    wrong_type["spec"]["completions"] = "four"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong_type, K8S_VERSION, strict=True)


def test_the_shards_job_the_merge_job_and_redis_are_wired_together() -> None:
    docs = _documents()
    shards, merge = docs[("Job", "tooleffect-shards")], docs[("Job", "tooleffect-merge")]
    redis = docs[("Service", "tooleffect-redis")]
    spec = shards["spec"]
    shard = spec["template"]["spec"]["containers"][0]
    env = _env(shard)
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == int(env["SHARDS"])
    assert env["JOB_COMPLETION_INDEX"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
    host_port = env["RATE_BACKEND"].removeprefix("redis://").split("/")[0]
    assert host_port == f"{redis['metadata']['name']}:{redis['spec']['ports'][0]['port']}"
    merger = merge["spec"]["template"]["spec"]["containers"][0]
    assert merger["image"] == shard["image"] and _env(merger)["RECORDS"] == env["RECORDS"]
    claims = {job["metadata"]["name"]: [v["persistentVolumeClaim"]["claimName"]
                                        for v in job["spec"]["template"]["spec"]["volumes"]
                                        if "persistentVolumeClaim" in v] for job in (shards, merge)}
    assert claims == {"tooleffect-shards": ["tooleffect-records"], "tooleffect-merge": ["tooleffect-records"]}
    dockerfile = (EXAMPLE / "Dockerfile").read_text()
    for container in (shard, merger):
        script = Path(container["command"][-1]).name
        assert (EXAMPLE / script).is_file() and f"examples/kubernetes/{script}" in dockerfile


def test_the_pods_scripts_shard_the_run_and_the_merge_makes_one_complete_report(tmp_path: Path) -> None:
    docs = _documents()
    shard = docs[("Job", "tooleffect-shards")]["spec"]["template"]["spec"]["containers"][0]
    env = _env(shard)
    n = int(env["SHARDS"])
    records = tmp_path / "records"
    # the pod's environment, but offline (replay: no model, so the rate limit is never asked) and
    # with this checkout's interpreter on PATH in place of the image's
    base = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(REPO), "SHARDS": env["SHARDS"], "CASES": env["CASES"], "RECORDS": str(records),
            "RATE_BACKEND": env["RATE_BACKEND"], "POLICY_ARGS": ""}
    pods = [subprocess.Popen(["/bin/sh", str(EXAMPLE / "run-shard.sh")], cwd=REPO,
                             env={**base, "JOB_COMPLETION_INDEX": str(k)}, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True) for k in range(n)]
    outs = [p.communicate(timeout=600)[0] for p in pods]
    for pod, out in zip(pods, outs):
        assert pod.returncode == 0, out[-2000:]  # failed decisions (exit 1) are the finding, not a failed pod
    assert sorted(p.name for p in records.glob("*.jsonl")) == [f"shard-{i}.jsonl" for i in range(1, n + 1)]
    merged = subprocess.run(["/bin/sh", str(EXAMPLE / "merge.sh")], cwd=REPO, env=base, capture_output=True,
                            text=True, timeout=300)
    assert merged.returncode == 0, merged.stderr[-2000:]
    report = json.loads((records / "report.json").read_text())
    assert report["status"] == "complete"
    assert report["shards"]["merged"] == list(range(1, n + 1)) and report["shards"]["missing"] == []
    assert sum(b["n_scored"] + b["n_errors"] for b in report["blocks"]) == 210  # the whole airline family
    # a shard whose pod was killed after 10 records: the merge fails, the report says incomplete and what is missing
    first = (records / "shard-1.jsonl").read_text().splitlines()
    (records / "shard-1.jsonl").write_text("\n".join(first[:10]) + "\n")
    cut = subprocess.run(["/bin/sh", str(EXAMPLE / "merge.sh")], cwd=REPO, env=base, capture_output=True,
                         text=True, timeout=300)
    assert cut.returncode == 1, cut.stderr[-2000:]
    report = json.loads((records / "report.json").read_text())
    assert report["status"] == "incomplete" and report["shards"]["missing"] == []
    assert report["selection"]["short"] == [{"shard": 1, "selected": len(first), "recorded": 10}]
    assert f"shard 1/{n}: 10 of {len(first)} selected items have a record" in cut.stderr
    # a shard whose pod never ran: the merge fails, and says which shard is missing
    (records / "shard-1.jsonl").write_text("\n".join(first) + "\n")
    (records / "shard-2.jsonl").unlink()
    partial = subprocess.run(["/bin/sh", str(EXAMPLE / "merge.sh")], cwd=REPO, env=base, capture_output=True,
                             text=True, timeout=300)
    assert partial.returncode == 1, partial.stderr[-2000:]
    report = json.loads((records / "report.json").read_text())
    assert report["status"] == "incomplete" and report["shards"]["missing"] == [2]
    assert f"shard 2 of {n} missing" in partial.stderr


def test_the_merge_fails_when_every_pod_wrote_nothing(tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir()
    for i in (1, 2):
        (records / f"shard-{i}.jsonl").write_text("")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(REPO), "RECORDS": str(records)}
    merged = subprocess.run(["/bin/sh", str(EXAMPLE / "merge.sh")], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=300)
    assert merged.returncode == 2, merged.stdout[-2000:]
    assert "no record in" in merged.stderr and not (records / "report.json").exists()
