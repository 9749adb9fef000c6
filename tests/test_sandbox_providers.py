"""Sandbox providers: one conformance suite run against the local provider, the Docker provider
on the local engine's socket and the Docker provider on a remote engine's transport (the local
engine's API on a TCP port of 127.0.0.1, ``scripts/docker-tcp``), and the Docker provider's
isolation, cleanup, lease and image checks against the real engine.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.sandbox import SandboxError, SandboxProvider, SandboxRefused, World, provider_class
from pytest_tooleffect.sandbox.docker import (
    KEPT_PREFIX,
    LABEL,
    RESTRICTIONS,
    DockerProvider,
    remove_container,
    sweep_leftovers,
)
from tests.conftest import REPO, DockerTcp

THREAD = {"thread_id": "th-1", "subject": "Design review", "participants": ["elena@x.eu", "tom@y.uk"],
          "messages": [{"from": "tom@y.uk", "text": "Thursday 14:00?"}]}
WORLD = World("scheduling", {"threads": [THREAD]}, {}, "Europe/Madrid")
CREATE = {"thread_id": "th-1", "title": "Design review", "start": "2025-03-20T14:00:00", "attendees": ["tom@y.uk"]}


@pytest.fixture(scope="module")
def docker_tcp() -> Iterator[DockerTcp]:
    endpoint = DockerTcp()
    yield endpoint
    endpoint.stop()


@pytest.fixture(params=["local", "docker", "docker-tcp"])
def provider(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[SandboxProvider]:
    name = request.param
    if name == "docker-tcp":  # a remote engine's transport: only the API, over TCP
        monkeypatch.setenv("DOCKER_HOST", request.getfixturevalue("docker_tcp").url)
        name = "docker"
    prov = provider_class(name)(uuid.uuid4().hex, os.getpid(), "test")
    prov.session_init()
    if request.param == "docker-tcp":
        assert isinstance(prov, DockerProvider) and prov.client.api.base_url.startswith("http://127.0.0.1:")
    yield prov
    prov.session_cleanup()


def test_call_runs_against_the_seeded_world(provider: SandboxProvider) -> None:
    box = provider.item_init(WORLD, "t")
    read = box.call("read_thread", {"thread_id": "th-1"})
    assert json.loads(read.content)["subject"] == "Design review"
    made = box.call("calendar.create_event", CREATE)
    assert not made.error
    assert json.loads(made.content)["start"] == "2025-03-20T14:00:00+01:00"
    events = box.snapshot()["events"]
    assert [(e["thread_id"], e["start"]) for e in events] == [("th-1", "2025-03-20T13:00:00+00:00")]
    missing = box.call("read_thread", {"thread_id": "th-404"})
    assert missing.error and json.loads(missing.content)["error"]["status"] == 404
    provider.item_cleanup(box, interrupted=False, keep=False)


def test_the_next_item_sees_the_seed_again(provider: SandboxProvider) -> None:
    first = provider.item_init(WORLD, "a")
    first.call("calendar.create_event", CREATE)
    first_id = first.id
    provider.item_cleanup(first, interrupted=False, keep=False)
    second = provider.item_init(WORLD, "b")
    assert second.snapshot()["events"] == []
    assert second.id == first_id  # the warm sandbox was reused, reset in place
    provider.item_cleanup(second, interrupted=False, keep=False)


def test_an_interrupted_item_discards_its_sandbox(provider: SandboxProvider) -> None:
    first = provider.item_init(WORLD, "a")
    provider.item_cleanup(first, interrupted=True, keep=False)
    second = provider.item_init(WORLD, "b")
    assert second.id != first.id
    provider.item_cleanup(second, interrupted=False, keep=False)


def test_faults_fire_then_the_tool_works(provider: SandboxProvider) -> None:
    faults = {"calendar.create_event": {"kind": "status", "status": 503, "times": 1},
              "read_thread": {"kind": "malformed", "times": 2},
              "list_availability": {"kind": "timeout", "after_ms": 50},
              "mail.reply": {"kind": "slow", "ms": 60}}
    box = provider.item_init(World("scheduling", {"threads": [THREAD]}, faults, "Europe/Madrid"), "t")
    failed = box.call("calendar.create_event", CREATE)
    assert failed.fault == "status" and failed.error
    assert json.loads(failed.content) == {"error": {"status": 503, "message": "Service Unavailable"}}
    assert box.snapshot()["events"] == []  # a 503 does not run the call
    assert box.call("calendar.create_event", CREATE).fault is None
    assert len(box.snapshot()["events"]) == 1
    cut = box.call("read_thread", {"thread_id": "th-1"})
    assert cut.fault == "malformed"
    with pytest.raises(json.JSONDecodeError):
        json.loads(cut.content)
    late = box.call("list_availability", {"attendees": ["tom@y.uk"], "window_start": "2025-03-20T09:00:00",
                                          "window_end": "2025-03-20T18:00:00"})
    assert late.fault == "timeout" and late.latency_ms >= 50
    slow = box.call("mail.reply", {"thread_id": "th-1", "kind": "ack"})
    assert slow.fault == "slow" and not slow.error and slow.latency_ms >= 60
    assert len(box.snapshot()["replies"]) == 1
    provider.item_cleanup(box, interrupted=False, keep=False)


def test_a_bad_world_is_refused_and_the_provider_goes_on(provider: SandboxProvider) -> None:
    with pytest.raises(SandboxRefused, match="no table 'calendar'"):
        provider.item_init(World("scheduling", {"calendar": [{}]}), "t")
    with pytest.raises(SandboxRefused, match="no column 'colour'"):
        provider.item_init(World("scheduling", {"threads": [dict(THREAD, colour="red")]}), "t")
    with pytest.raises(SandboxRefused, match="unknown world"):
        provider.item_init(World("no_such_world"), "t")
    box = provider.item_init(WORLD, "t")
    assert box.snapshot()["threads"][0]["thread_id"] == "th-1"
    provider.item_cleanup(box, interrupted=False, keep=False)


# ------------------------------------------------------------------------------ Docker only


@pytest.fixture
def docker_provider() -> Iterator[DockerProvider]:
    prov = DockerProvider(uuid.uuid4().hex, os.getpid(), "test")
    prov.session_init()
    yield prov
    prov.session_cleanup()


def _exec(container: Any, code: str) -> str:
    result = container.exec_run(["python3", "-c", code])
    output: bytes = result.output
    return output.decode()


def test_every_restriction_is_in_force_on_the_container(docker_provider: DockerProvider) -> None:
    box = docker_provider.item_init(WORLD, "t")
    assert docker_provider.restrictions() == {"network_none": True, **dict.fromkeys(RESTRICTIONS, True)}
    attrs = docker_provider.client.containers.get(box.id).attrs
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["Init"] is True
    assert host["PidsLimit"] == 64
    assert host["Memory"] == 256 * 1024 * 1024
    assert attrs["Config"]["User"] == "65534:65534"
    labels = attrs["Config"]["Labels"]
    assert labels[f"{LABEL}.run"] == docker_provider.run_id
    assert labels[f"{LABEL}.pid"] == str(os.getpid())
    assert box.info["uid"] == 65534
    docker_provider.item_cleanup(box, interrupted=False, keep=False)


def test_a_tool_in_the_sandbox_cannot_reach_the_network_or_write_outside_its_state(
        docker_provider: DockerProvider) -> None:
    box = docker_provider.item_init(WORLD, "t")
    container = docker_provider.client.containers.get(box.id)
    probe = """
import json, socket
out = {}
for host, port in [("127.0.0.1", 9), ("10.0.0.1", 80), ("1.1.1.1", 53)]:
    try:
        socket.create_connection((host, port), timeout=1).close()
        out[host] = "connected"
    except OSError as exc:
        out[host] = type(exc).__name__
try:
    socket.getaddrinfo("deb.debian.org", 80)
    out["dns"] = "resolved"
except OSError as exc:
    out["dns"] = type(exc).__name__
for path in ["/etc/x", "/opt/tooleffect/x", "/tmp/x", "/run/x", "/home/x", "/state/x"]:
    try:
        open(path, "w").write("x")
        out[path] = "written"
    except OSError as exc:
        out[path] = type(exc).__name__
print(json.dumps(out))
"""
    out = json.loads(_exec(container, probe))
    assert out["127.0.0.1"] == "ConnectionRefusedError"  # only the container's own loopback exists
    assert out["10.0.0.1"] == "OSError" and out["1.1.1.1"] == "OSError"  # network unreachable
    assert out["dns"] == "gaierror"
    for path in ["/etc/x", "/opt/tooleffect/x", "/tmp/x", "/run/x", "/home/x"]:
        assert out[path] in ("OSError", "PermissionError"), (path, out[path])
    assert out["/state/x"] == "written"
    assert box.call("read_thread", {"thread_id": "th-1"}).error is False  # the service still answers
    docker_provider.item_cleanup(box, interrupted=False, keep=False)


def test_cleanup_removes_containers_by_id_and_keep_leaves_one_for_inspection() -> None:
    prov = DockerProvider(uuid.uuid4().hex, os.getpid(), "test")
    prov.session_init()
    kept = prov.item_init(WORLD, "a")
    other = prov.item_init(WORLD, "b")
    note = prov.item_cleanup(kept, interrupted=False, keep=True)
    prov.item_cleanup(other, interrupted=False, keep=False)
    started = [kept.id, other.id]
    prov.session_cleanup()
    client = prov.client
    remaining = {c.id: c for c in client.containers.list(all=True, filters={"label": f"{LABEL}.run={prov.run_id}"})}
    try:
        assert list(remaining) == [kept.id]
        assert remaining[kept.id].name == f"{KEPT_PREFIX}{kept.id[:12]}" and remaining[kept.id].status == "running"
        assert note is not None and kept.id[:12] in note
        assert other.id in started and other.id not in remaining
    finally:
        for c in remaining.values():
            remove_container(c)  # the container and its socket folder


def test_leftovers_of_a_crashed_run_are_removed_at_the_next_start() -> None:
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    crashed = DockerProvider(uuid.uuid4().hex, owner.pid, "test")
    crashed.session_init()
    box = crashed.item_init(WORLD, "t")  # never cleaned up: its run "crashes" now
    owner.kill()
    owner.wait()
    live = DockerProvider(uuid.uuid4().hex, os.getpid(), "test")
    live.session_init()
    try:
        # gone at the next start (under xdist another worker's start may be the one that swept it)
        assert not live.client.containers.list(all=True, filters={"id": box.id})
    finally:
        live.session_cleanup()
        crashed.session_cleanup()


def test_a_remote_engine_needs_nothing_from_this_hosts_file_system(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    endpoint = DockerTcp()  # its own: stopping it below must not cut the module's
    monkeypatch.setenv("DOCKER_HOST", endpoint.url)
    # a temporary folder of its own: another test's local sandboxes (te-* under /tmp) do not land in it
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    before = set(glob.glob(str(tmp_path / "te-*")))
    prov = DockerProvider(uuid.uuid4().hex, os.getpid(), "test")
    try:
        prov.session_init()
        box = prov.item_init(WORLD, "t")
        assert box.call("calendar.create_event", CREATE).error is False
        attrs = prov.client.containers.get(box.id).attrs
        assert attrs["HostConfig"]["Binds"] in (None, [])
        assert [(m["Type"], m["Destination"]) for m in attrs["Mounts"]] in ([], [("tmpfs", "/state")])
        assert sorted(attrs["HostConfig"]["Tmpfs"]) == ["/state"]
        assert attrs["Config"]["Labels"][f"{LABEL}.lease"] == "120"
        assert set(glob.glob(str(tmp_path / "te-*"))) == before  # no socket directory on this host
        prov.item_cleanup(box, interrupted=False, keep=False)
        box = prov.item_init(WORLD, "u")  # pooled: the same stream, through the endpoint
        endpoint.stop()
        with pytest.raises(SandboxError):  # the endpoint is the only way to the service
            box.call("read_thread", {"thread_id": "th-1"})
    finally:
        endpoint.stop()
        monkeypatch.delenv("DOCKER_HOST")
        import docker

        local = docker.from_env()
        for container in local.containers.list(all=True, filters={"label": f"{LABEL}.run={prov.run_id}"}):
            remove_container(container)
        local.close()


CRASHING_CONTROLLER = """
import os, signal, socket, sys
socket.gethostname = lambda: "another-host"  # a controller elsewhere: its pid means nothing here
from pytest_tooleffect.sandbox import World
from pytest_tooleffect.sandbox.docker import DockerProvider
prov = DockerProvider(sys.argv[1], os.getpid(), "test", lease_s=float(sys.argv[2]))
prov.session_init()
box = prov.item_init(World("scheduling", {}), "t")
print(box.id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no cleanup of any kind, as when a host is lost
"""


def test_a_vanished_controllers_sandbox_ends_by_its_lease_and_any_start_sweeps_it() -> None:
    run = uuid.uuid4().hex
    lease = 3.0
    out = subprocess.run([sys.executable, "-c", CRASHING_CONTROLLER, run, str(lease)], capture_output=True,
                         text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    container_id = out.stdout.strip()
    assert out.returncode == -9 and len(container_id) == 64, out.stderr[-2000:]
    import docker

    client = docker.from_env()
    try:
        container = client.containers.get(container_id)
        assert container.labels[f"{LABEL}.host"] == "another-host" and container.labels[f"{LABEL}.run"] == run
        assert container.status == "running"
        assert container_id not in sweep_leftovers(client)  # its owner may be alive on its host: left alone
        # Once it has exited, any concurrent start (another xdist worker's) may remove it: its log
        # is followed and its exit awaited from now on, not read back afterwards.
        logs = container.logs(stream=True, follow=True)
        exit_status = container.wait(timeout=lease + 20)  # no request for the lease: it ends itself
        assert exit_status["StatusCode"] == 0, exit_status
        assert b"the lease ended" in b"".join(logs)
        live = DockerProvider(uuid.uuid4().hex, os.getpid(), "test")
        live.session_init()  # any start, of any run on any host, removes it
        live.session_cleanup()
        assert not client.containers.list(all=True, filters={"id": container_id})
    finally:
        for left in client.containers.list(all=True, filters={"label": f"{LABEL}.run={run}"}):
            remove_container(left)
        client.close()


def test_the_heartbeat_keeps_a_live_runs_idle_sandbox_and_a_kept_one_outlives_its_lease() -> None:
    prov = DockerProvider(uuid.uuid4().hex, os.getpid(), "test", lease_s=2.0)
    prov.session_init()
    try:
        idle = prov.item_init(WORLD, "a")
        kept = prov.item_init(WORLD, "b")
        prov.item_cleanup(idle, interrupted=False, keep=False)
        prov.item_cleanup(kept, interrupted=False, keep=True)
        time.sleep(5.0)  # two and a half leases without an item
        assert prov.client.containers.get(idle.id).status == "running"  # the heartbeat's pings
        again = prov.item_init(WORLD, "c")
        assert again.id == idle.id and again.snapshot()["events"] == []
        prov.item_cleanup(again, interrupted=False, keep=False)
        prov.session_cleanup()
        time.sleep(3.0)
        kept_container = prov.client.containers.get(kept.id)
        assert kept_container.status == "running" and kept_container.name == f"{KEPT_PREFIX}{kept.id[:12]}"
        assert kept.id not in sweep_leftovers(prov.client)
    finally:
        prov.session_cleanup()
        for left in prov.client.containers.list(all=True, filters={"label": f"{LABEL}.run={prov.run_id}"}):
            remove_container(left)


def test_a_missing_image_is_a_clear_error_and_nothing_starts() -> None:
    prov = DockerProvider(uuid.uuid4().hex, os.getpid(), "test", image="tooleffect-sandbox:not-built")
    with pytest.raises(SandboxError, match="tooleffect-sandbox:not-built is not built.*never pulled"):
        prov.session_init()


def test_fresh_mode_starts_a_container_per_item() -> None:
    prov = DockerProvider(uuid.uuid4().hex, os.getpid(), "test", pool=False)
    prov.session_init()
    try:
        first = prov.item_init(WORLD, "a")
        prov.item_cleanup(first, interrupted=False, keep=False)
        second = prov.item_init(WORLD, "b")
        assert second.id != first.id
        assert not prov.client.containers.list(all=True, filters={"id": first.id})
        prov.item_cleanup(second, interrupted=False, keep=False)
    finally:
        prov.session_cleanup()


def test_a_restriction_the_engine_refuses_is_probed_out_and_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_tooleffect.sandbox import docker as docker_provider_module

    refused = {**RESTRICTIONS, "cpuset_99": {"cpuset_cpus": "99"}}  # no CPU 99 here: the engine refuses to start
    monkeypatch.setattr(docker_provider_module, "RESTRICTIONS", refused)
    prov = DockerProvider(uuid.uuid4().hex, os.getpid(), "test")
    prov.session_init()
    try:
        box = prov.item_init(WORLD, "t")
        assert prov.restrictions() == {"network_none": True, **dict.fromkeys(RESTRICTIONS, True), "cpuset_99": False}
        host = prov.client.containers.get(box.id).attrs["HostConfig"]
        assert host["ReadonlyRootfs"] is True and host["CpusetCpus"] == ""
        assert box.call("read_thread", {"thread_id": "th-1"}).error is False
        prov.item_cleanup(box, interrupted=False, keep=False)
    finally:
        prov.session_cleanup()
    assert not prov.client.containers.list(all=True, filters={"label": f"{LABEL}.run={prov.run_id}"})


def test_hostile_arguments_get_a_tool_answer_not_a_dead_sandbox(provider: SandboxProvider) -> None:
    box = provider.item_init(WORLD, "t")
    far = box.call("calendar.create_event", dict(CREATE, start="9999-12-31T23:59:59-12:00"))
    assert far.error and json.loads(far.content)["error"]["status"] == 400  # out of range: refused, not a crash
    odd = box.call("calendar.create_event", dict(CREATE, title="a\ud800b"))  # a lone surrogate, valid JSON
    assert odd.error and "surrogates not allowed" in json.loads(odd.content)["error"]["message"]
    assert box.snapshot()["events"] == []  # both refused, nothing half-written
    assert box.call("read_thread", {"thread_id": "th-1"}).error is False  # the same sandbox goes on
    provider.item_cleanup(box, interrupted=False, keep=False)


def test_the_builtin_providers_register_whichever_sandbox_module_is_imported_first() -> None:
    # a fresh interpreter: registration must not depend on what this test session imported before
    probe = (
        "import sys\n"
        "from pytest_tooleffect.sandbox.environment import provider_class, registered_providers\n"
        "names = registered_providers()\n"
        "try:\n"
        "    provider_class('nope')\n"
        "except KeyError as exc:\n"
        "    refusal = str(exc)\n"
        "print(names, provider_class('local').__name__, refusal, 'docker' in sys.modules, 'testcontainers' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['docker', 'local'] LocalProvider \"unknown sandbox provider 'nope' (registered: docker, local)\" False False"
