"""The JVM SuperNode against faults a phone meets, with a real ``flower-superlink`` on 127.0.0.1.

- **Connections per round** (``test_connections_per_round``, insecure and TLS): the JVM node reaches
  the SuperLink through a TCP proxy on loopback that counts the connections it opens (and, in plain
  HTTP, the Fleet calls), while a fedgc run of JVM-node rounds goes on. With keep-alive the node
  reuses its connections: far fewer connections than calls (before keep-alive: one per call).
- **A SuperLink restarted without its database** (``test_node_registers_again_after_the_superlink_
  forgets_it``): a run with a checkpoint every round; after round 2 the SuperLink is stopped (its
  ServerApp with it) and a fresh one started on the same port with in-memory state: it answers the
  node's calls with HTTP 401 (it no longer knows the node id). The node registers again with back-off,
  says so in one line, and keeps running; the run resubmitted to the new SuperLink resumes from its
  checkpoint and applies the JVM node's update again within two rounds.

- **A SuperLink killed mid-transfer** (``test_node_survives_a_superlink_killed_mid_transfer``, pull and
  push): the same run with a 2.4 M-parameter MLP and dense downloads; the proxy SIGKILLs the SuperLink as
  the node's 3rd PullObject of round 3's train message (or its reply's 2nd PushObject) reaches it. The
  node retries, meets a fresh SuperLink, registers again, and the resumed run applies its update within
  two rounds. Both restart tests share ``run_across_a_lost_superlink``.

- **Answers lost mid-round** (``test_node_survives_answers_lost_mid_round``): the proxy cuts the
  connection after the SuperLink took a request and before its answer reached the node — twice on
  PushObject and PullObject, once on PullMessages, ConfirmMessageReceived and PushMessages. The node
  retries: a retried PushObject the SuperLink answers "not stored" was stored by the lost attempt; a
  retried PushMessages (the message stored, its objects awaiting a session the node never heard of)
  pushes every object without a session id, so the SuperLink finds the session that awaits it. Before
  those two fixes the first lost PushObject answer cost the round's update ("the SuperLink did not
  store object ...") and a lost PushMessages answer left the reply's objects unpullable.

Figures are printed (``pytest -s``) and written to ``$FEDGC_JVM_FIGURES`` (JSON lines) when set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
import tomli_w
import yaml

from fedgc.flower.runtime.runtime_processes import (
    ManagedProcess,
    flower_env,
    flwr_run,
    free_port,
    script,
    start_superlink,
    wait_until,
    write_connection,
)

from .test_jvm_client import JAR, jar  # noqa: F401  (the fixture: make jvm, or skip)

pytestmark = pytest.mark.jvm

SCENARIO = {
    "seed": 3,
    "data": {"dataset": "digits", "num_clients": 1, "partition": "iid"},
    "model": {"name": "mlp"},
    "client": {"local_steps": 5, "batch_size": 16, "lr": 0.1},
    "compression": {"name": "dgc", "density": 0.05, "momentum": 0.9, "warmup_rounds": 0},
    "downlink": {"name": "topk", "density": 0.1},
    "strategy": {"fraction": 1.0},
    "eval": {"target_accuracy": 0.5},
}
JVM_LABEL = 1  # partition 0, presented as node 1


class CountingProxy:
    """A TCP forwarder on 127.0.0.1 to ``target_port`` that counts the connections accepted (with their
    times) and, for plain HTTP, the Fleet requests that pass; ``cut()`` closes every live connection
    (network loss)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.opened: list[float] = []  # time.time() of each connection accepted
        self.calls: list[float] = []  # time.time() of each plain-HTTP Fleet request seen
        self._lock = threading.Lock()
        self._live: set[socket.socket] = set()
        self._closed = False
        # Response loss: for each Fleet method here, the next N requests reach the SuperLink but their
        # answers never reach the node (the connection is cut as the answer starts).
        self.lose_answers: dict[str, int] = {}
        self.lost: list[str] = []
        # A fault at a request: for a Fleet method here, once its n-th request from now has passed the
        # proxy's read, the callback runs before the request is forwarded (e.g. the SuperLink killed).
        self.triggers: dict[str, list] = {}
        self.arm_on_answer: tuple[bytes, dict] | None = None
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            with self._lock:
                self.opened.append(time.time())
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._live.update((client, upstream))
            pending: list[str] = []  # methods whose answer on this connection is to be lost
            threading.Thread(target=self._pump, args=(client, upstream, True, pending), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False, pending), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, count: bool, pending: list[str]) -> None:
        tail = b""
        try:
            while data := src.recv(65536):
                seen = tail + data
                tail = data[-14:]  # shorter than "POST /v1/fleet/": no request counted twice
                if count:
                    now = time.time()
                    methods = re.findall(rb"POST /v1/fleet/([a-z-]+)", seen)
                    fire = []
                    with self._lock:
                        self.calls += [now] * len(methods)
                        for method in (m.decode() for m in methods):
                            if self.lose_answers.get(method, 0) > 0:
                                self.lose_answers[method] -= 1
                                self.lost.append(method)
                                pending.append(method)
                            if method in self.triggers:
                                self.triggers[method][0] -= 1
                                if self.triggers[method][0] == 0:
                                    fire.append(self.triggers.pop(method)[1])
                    for callback in fire:
                        callback()
                else:
                    if pending:
                        break  # the SuperLink answered; the node never hears it
                    with self._lock:
                        if self.arm_on_answer is not None and self.arm_on_answer[0] in seen:
                            self.triggers.update(self.arm_on_answer[1])
                            self.arm_on_answer = None
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            with self._lock:
                self._live.discard(src)
                self._live.discard(dst)

    def count(self, start: float = 0.0, end: float = float("inf")) -> tuple[int, int]:
        """Connections opened and Fleet calls seen between the ``time.time()`` instants ``start`` and ``end``."""
        with self._lock:
            return (sum(start <= t <= end for t in self.opened), sum(start <= t <= end for t in self.calls))

    def lose(self, answers: dict[str, int]) -> None:
        """Lose the answers to the next ``answers[method]`` calls of each Fleet method."""
        with self._lock:
            self.lose_answers.update(answers)

    def at_request(self, method: str, nth: int, callback, after_answer: bytes | None = None) -> None:
        """Run ``callback()`` when the ``nth`` request of the Fleet ``method`` reaches the proxy, before it is
        forwarded (plain HTTP only); counted from now, or with ``after_answer`` from the first answer of the
        SuperLink that holds those bytes (e.g. ``b"train"``: the PullMessages answer of a train message)."""
        with self._lock:
            if after_answer is None:
                self.triggers[method] = [nth, callback]
            else:
                self.arm_on_answer = (after_answer, {method: [nth, callback]})

    def cut(self) -> None:
        with self._lock:
            live = list(self._live)
        for s in live:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self._closed = True
        self.server.close()
        self.cut()


def export_device(scenario: dict, tmp_path: Path) -> Path:
    from fedgc.cli.export_data import main as export_data

    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    assert export_data([str(path), "--out", str(tmp_path / "device"), "--partition", "0"]) == 0
    return tmp_path / "device" / "partition-0"


def write_run_config(scenario: dict, tmp_path: Path) -> tuple[Path, Path]:
    out = tmp_path / "out"
    path = tmp_path / "run-config.toml"
    path.write_text(tomli_w.dumps({"scenario-yaml": yaml.safe_dump(scenario), "out-dir": str(out), "quiet": True,
                                   "node-wait-s": 60.0}))
    return path, out


def rows_of(out: Path) -> list[dict]:
    path = out / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def jvm_node(port: int, data_dir: Path, log: Path, env: dict, *extra: str, jar_path: Path = JAR,
             cwd: Path | None = None) -> ManagedProcess:
    return ManagedProcess(["java", "-jar", str(jar_path), "--superlink", f"127.0.0.1:{port}", "--node-config",
                           "partition-id=0 num-partitions=1", "--data-dir", str(data_dir), *extra], log, env, cwd=cwd)


def wait_for(path: Path, text: str, timeout_s: float, process: ManagedProcess | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in (path.read_text(errors="replace") if path.exists() else ""):
        assert process is None or process.running(), process.log_tail()
        assert time.monotonic() < deadline, f"{path.name} never printed {text!r}"
        time.sleep(0.1)


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def record(figures: dict) -> None:
    print(json.dumps(figures))
    if os.environ.get("FEDGC_JVM_FIGURES"):
        with open(os.environ["FEDGC_JVM_FIGURES"], "a") as f:
            f.write(json.dumps(figures) + "\n")


def measure_connections(tmp_path: Path, app: Path, tls: bool, jar_path: Path = JAR, rounds: int = 5,
                        idle_s: float = 10.0, keep_alive: bool = True, poll_s: float = 1.0) -> dict:
    """One JVM node through a counting proxy: connections and calls while idle for ``idle_s`` and
    during a run of ``rounds`` rounds. ``keep_alive=False`` runs the JVM with ``-Dhttp.keepAlive=false``
    (a connection per call: the reference to compare with)."""
    from .test_jvm_e2e import make_certificates

    scenario = {**SCENARIO, "name": "jvm-connections", "rounds": rounds}
    data_dir = export_device(scenario, tmp_path)
    home = tmp_path / "flwr-home"
    env = flower_env(home)
    port = free_port()
    logs = tmp_path / "logs"
    logs.mkdir()
    processes: list[ManagedProcess] = []
    proxy = None
    try:
        if tls:
            make_certificates(tmp_path)
            home.mkdir(parents=True, exist_ok=True)
            (home / "config.toml").write_text(
                f'[superlink]\ndefault = "edge"\n\n[superlink.edge]\naddress = "127.0.0.1:{port}"\n'
                f'root-certificates = "{tmp_path / "ca.crt"}"\n')
            link = ManagedProcess([script("flower-superlink"), "--ssl-ca-certfile", "ca.crt", "--ssl-certfile",
                                   "server.pem", "--ssl-keyfile", "server.key", "--host", "127.0.0.1", "--port",
                                   str(port), "--disable-runtime-dependency-installation"],
                                  logs / "superlink.log", env, cwd=tmp_path)
            processes.append(link)
            wait_until(lambda: port_open(port), 60, "flower-superlink", link)
            connection, transport = "edge", ["--root-certificates", str(tmp_path / "ca.crt")]
        else:
            write_connection(home, "local", f"127.0.0.1:{port}")
            processes.append(start_superlink(port, logs, env, simulation=False))
            connection, transport = "local", ["--insecure"]
        proxy = CountingProxy(port)
        node_env = env if keep_alive else {**env, "JAVA_TOOL_OPTIONS": "-Dhttp.keepAlive=false"}
        node = jvm_node(proxy.port, data_dir, logs / "jvm.log", node_env, *transport, "--poll-interval", str(poll_s),
                        jar_path=jar_path, cwd=tmp_path)
        processes.append(node)
        wait_for(logs / "jvm.log", "SuperNode ID: ", 60, node)
        time.sleep(1)
        idle_start = time.time()
        time.sleep(idle_s)
        idle = proxy.count(idle_start, time.time())
        config, out = write_run_config(scenario, tmp_path)
        log = tmp_path / "flwr-run.log"
        result = flwr_run(app, connection, config, env, log, timeout_s=240)
        assert result.returncode == 0, log.read_text(errors="replace")[-3000:]
        rows = rows_of(out)
        assert [r["round"] for r in rows] == list(range(1, rounds + 1)), node.log_tail()
        assert all(JVM_LABEL in r["applied_nodes"] for r in rows), [r["applied_nodes"] for r in rows]
        time.sleep(0.5)
    finally:
        for process in reversed(processes):
            process.stop()
        if proxy is not None:
            proxy.close()
    # The rounds, as the node saw them: from the first train message received to the last reply sent.
    lines = (logs / "jvm.log").read_text(errors="replace").splitlines()
    first = next(line for line in lines if "Receiving: train message" in line)
    last = [line for line in lines if "Sent successfully" in line][-1]
    start, end = log_time(first) - 1.0, log_time(last)  # from the pull that found round 1's message
    connections, calls = proxy.count(start, end)
    lifetime = proxy.count()
    figures = {
        "tls": tls, "jar": jar_path.name, "keep_alive": keep_alive, "poll_s": poll_s, "rounds": rounds,
        "rounds_s": round(end - start, 1),
        "connections_per_round": round(connections / rounds, 1),
        "idle_connections_per_min": round(idle[0] * 60 / idle_s, 1),
        "node_connections": lifetime[0],
    }
    if not tls:
        figures["calls_per_round"] = round(calls / rounds, 1)
        figures["idle_calls_per_min"] = round(idle[1] * 60 / idle_s, 1)
        figures["node_calls"] = lifetime[1]
    return figures


def log_time(line: str) -> float:
    """The ``time.time()`` of a JVM log line (``HH:MM:SS.mmm`` of today, this machine's local time)."""
    import datetime

    clock = datetime.datetime.strptime(line.split(maxsplit=1)[0], "%H:%M:%S.%f").time()
    return datetime.datetime.combine(datetime.date.today(), clock).timestamp()


@pytest.mark.parametrize("tls", [False, True], ids=["insecure", "tls"])
def test_connections_per_round(tmp_path, flower_app, jar, tls):  # noqa: F811
    if tls and not shutil.which("openssl"):
        pytest.skip("needs openssl")
    figures = measure_connections(tmp_path, flower_app, tls)
    record({"test": "connections", **figures})
    # Keep-alive: one connection serves many calls. Idle, the node polls once a second (60 calls a
    # minute) and sends a heartbeat about every 20 s over a handful of connections (the SuperLink's
    # uvicorn closes a connection idle for 5 s; the heartbeat's is the one that lapses).
    assert figures["idle_connections_per_min"] <= 12, figures
    assert figures["connections_per_round"] <= 4, figures
    if not tls:
        assert figures["calls_per_round"] >= 4 * figures["connections_per_round"], figures


def run_across_a_lost_superlink(tmp_path: Path, app: Path, scenario: dict, lose) -> dict:
    """One JVM node (through a ``CountingProxy``, polling every 0.2 s) in a 5-round run with a checkpoint every
    round on an insecure SuperLink with in-memory state. Once two rounds are in, ``lose(link, proxy)`` ends
    that SuperLink mid-run and returns once it is gone; what is left of its session (the run's ServerApp) is
    stopped, and a fresh SuperLink starts on the same port, knowing no node. The node must register again by
    itself, and the run, resubmitted with the same out-dir, resumes from its checkpoint. Checked here for
    every such fault: the node never exits and says what happened in one line (not "credentials"), it gets a
    new node id, the run ends with all 5 rounds, and the node's update is applied within the first two
    rounds of the resumed run. Returns the figures (``rejoin_s``: from the new SuperLink's ``/health`` to
    the node's "Registered again"), the metrics rows and the node's log."""
    scenario = {**scenario, "rounds": 5, "checkpoint_every": 1}
    data_dir = export_device(scenario, tmp_path)
    home = tmp_path / "flwr-home"
    env = flower_env(home)
    port = free_port()
    write_connection(home, "local", f"127.0.0.1:{port}")
    logs = tmp_path / "logs"
    logs.mkdir()
    config, out = write_run_config(scenario, tmp_path)
    jvm_log = logs / "jvm.log"
    processes: list[ManagedProcess] = []
    proxy = None
    first_run: dict = {}
    try:
        first_link = start_superlink(port, logs, env, simulation=False)
        processes.append(first_link)
        proxy = CountingProxy(port)
        node = jvm_node(proxy.port, data_dir, jvm_log, env, "--insecure", "--poll-interval", "0.2")
        processes.append(node)
        wait_for(jvm_log, "SuperNode ID: ", 60, node)

        def submit() -> None:
            first_run["result"] = flwr_run(app, "local", config, env, tmp_path / "flwr-run-1.log", timeout_s=300)

        runner = threading.Thread(target=submit)
        runner.start()
        deadline = time.monotonic() + 240
        while len(rows_of(out)) < 2:
            assert node.running() and runner.is_alive(), node.log_tail()
            assert time.monotonic() < deadline, (tmp_path / "flwr-run-1.log").read_text(errors="replace")[-3000:]
            time.sleep(0.2)
        # The SuperLink goes away with its in-memory state (and the run's ServerApp with it) ...
        lose(first_link, proxy)
        first_link.stop()
        processes.remove(first_link)
        lost_after = len(rows_of(out))
        runner.join(timeout=60)
        assert not runner.is_alive()
        assert node.running(), node.log_tail()
        # ... and a fresh one takes its place on the same port, knowing no node.
        second_link = start_superlink(port, logs, env, simulation=False)
        processes.append(second_link)
        up = time.monotonic()
        wait_for(jvm_log, "Registered again after", 120, node)
        rejoin_s = time.monotonic() - up
        # The run resumes from its checkpoint on the new SuperLink (the same out-dir).
        resumed = flwr_run(app, "local", config, env, tmp_path / "flwr-run-2.log", timeout_s=300)
        assert resumed.returncode == 0, (tmp_path / "flwr-run-2.log").read_text(errors="replace")[-3000:]
        assert node.running(), node.log_tail()
    finally:
        for process in reversed(processes):
            process.stop()
        if proxy is not None:
            proxy.close()
    text = jvm_log.read_text(errors="replace")
    assert "The SuperLink no longer knows SuperNode" in text and "Registering again" in text, text[-3000:]
    assert "credentials" not in text
    ids = [line.split("SuperNode ID: ")[1].split()[0] for line in text.splitlines() if "SuperNode ID: " in line]
    assert len(ids) == 2 and ids[0] != ids[1], ids
    rows = rows_of(out)
    rounds = [r["round"] for r in rows]
    assert rounds[-1] == 5 and sorted(set(rounds)) == [1, 2, 3, 4, 5], rounds
    resumed_rows = rows[lost_after:]  # the rows the resumed run wrote (it starts after its checkpoint)
    applied = [r["round"] for r in resumed_rows[:2] if JVM_LABEL in r["applied_nodes"]]
    assert applied, [(r["round"], r["applied_nodes"]) for r in rows]  # within two rounds
    return {"rejoin_s": round(rejoin_s, 2), "first_applied_round_after_restart": applied[0],
            "resumed_from_round": resumed_rows[0]["round"], "rounds": rounds, "rows": rows, "log": text}


def test_node_registers_again_after_the_superlink_forgets_it(tmp_path, flower_app, jar):  # noqa: F811
    """The SuperLink stopped between calls after round 2 (SIGTERM), a fresh one started without its database."""
    figures = run_across_a_lost_superlink(tmp_path, flower_app, {**SCENARIO, "name": "jvm-forgotten"},
                                          lambda link, proxy: None)
    record({"test": "forgotten", **{k: v for k, v in figures.items() if k not in ("rows", "log")}})


@pytest.mark.parametrize(("direction", "method", "nth"), [("pull", "pull-object", 3), ("push", "push-object", 2)])
def test_node_survives_a_superlink_killed_mid_transfer(tmp_path, flower_app, jar, direction, method, nth):  # noqa: F811
    """The SuperLink SIGKILLed in the middle of a large transfer: while the JVM node pulls round 3's train
    message (a dense 9.4 MB download: an MLP of 2.4 M parameters, its 1536 × 1536 matrix in two 5 MiB
    chunks), at its 3rd PullObject, or while it pushes its reply, at its 2nd PushObject. The proxy kills the
    SuperLink as the request reaches it, so the request is cut after the node sent it. The node retries
    into the void, then meets a fresh SuperLink that knows nothing of it, registers again, and the resumed
    run applies its update within two rounds."""
    scenario = {**{k: v for k, v in SCENARIO.items() if k != "downlink"}, "name": f"jvm-killed-{direction}",
                "model": {"name": "mlp", "options": {"hidden": [1536, 1536]}}}
    killed: dict = {}

    def kill_now(link: ManagedProcess) -> None:
        os.kill(link.process.pid, signal.SIGKILL)
        link.process.wait(timeout=10)
        killed["at"] = time.monotonic()

    def lose(link: ManagedProcess, proxy: CountingProxy) -> None:
        proxy.at_request(method, nth, lambda: kill_now(link), after_answer=b"train")
        deadline = time.monotonic() + 180
        while "at" not in killed:
            assert time.monotonic() < deadline, "the node never transferred round 3's train message"
            time.sleep(0.05)

    figures = run_across_a_lost_superlink(tmp_path, flower_app, scenario, lose)
    text = figures.pop("log")
    figures.pop("rows")
    # The node was in the middle of that message: it heard no answer to the request the kill cut.
    lines = text.splitlines()
    receiving = [i for i, line in enumerate(lines) if "Receiving: train message" in line]
    assert len(receiving) >= 3, text[-3000:]
    record({"test": f"killed-mid-{direction}", "kill_at": f"{method} #{nth}", **figures})


def test_node_survives_answers_lost_mid_round(tmp_path, flower_app, jar):  # noqa: F811
    """A connection cut by a proxy after the SuperLink took the request and before its answer reached
    the node: on object pulls and pushes, on the message pull, the receipt confirmation and the reply
    push, from round 2 on. The node retries; the run goes on; what it sent is applied."""
    # A message whose PullMessages answer is lost never reaches the node: the round's deadline ends it.
    scenario = {**SCENARIO, "name": "jvm-lost-answers", "rounds": 4, "network": {"deadline_s": 20.0}}
    data_dir = export_device(scenario, tmp_path)
    home = tmp_path / "flwr-home"
    env = flower_env(home)
    port = free_port()
    write_connection(home, "local", f"127.0.0.1:{port}")
    logs = tmp_path / "logs"
    logs.mkdir()
    config, out = write_run_config(scenario, tmp_path)
    jvm_log = logs / "jvm.log"
    processes: list[ManagedProcess] = []
    proxy = None
    run: dict = {}
    try:
        processes.append(start_superlink(port, logs, env, simulation=False))
        proxy = CountingProxy(port)
        node = jvm_node(proxy.port, data_dir, jvm_log, env, "--insecure", "--poll-interval", "0.2")
        processes.append(node)
        wait_for(jvm_log, "SuperNode ID: ", 60, node)

        def submit() -> None:
            run["result"] = flwr_run(flower_app, "local", config, env, tmp_path / "flwr-run.log", timeout_s=300)

        runner = threading.Thread(target=submit)
        runner.start()
        wait_for(jvm_log, "fedgc: round 1:", 200, node)
        armed = {"pull-messages": 1, "pull-object": 2, "confirm-message-received": 1, "push-messages": 1,
                 "push-object": 2}
        proxy.lose(armed)
        runner.join(timeout=330)
        assert not runner.is_alive()
        assert run["result"].returncode == 0, (tmp_path / "flwr-run.log").read_text(errors="replace")[-3000:]
        assert node.running(), node.log_tail()
    finally:
        for process in reversed(processes):
            process.stop()
        if proxy is not None:
            proxy.close()
    text = jvm_log.read_text(errors="replace")
    rows = rows_of(out)
    record({"test": "lost-answers", "lost": proxy.lost, "applied": [(r["round"], r["applied_nodes"]) for r in rows]})
    assert [r["round"] for r in rows] == [1, 2, 3, 4], text[-3000:]
    assert sorted(set(proxy.lost)) == sorted(armed), proxy.lost
    # Every lost answer is survived; a lost PullMessages answer that carried the round's message would
    # cost that round (the SuperLink counts the message delivered), so one round may go without it.
    applied = [r["round"] for r in rows if JVM_LABEL in r["applied_nodes"]]
    assert len(applied) >= 3 and applied[-1] == 4, ([(r["round"], r["applied_nodes"]) for r in rows], text[-3000:])
    assert "did not store" not in text and "The handler raised" not in text, text[-3000:]
