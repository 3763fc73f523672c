"""A Flower deployment on a shaped star: ``flower-superlink`` in the hub namespace, one
``flower-supernode`` per client namespace (reaching the SuperLink at its hub address over its shaped
link), ``flwr run`` submitted from the hub. Flower's CLIs are started as processes (no flwr import
here); every process is registered with the star, so ``Star.close()`` stops them before the namespaces
go. A ``sleep`` in the hub namespace anchors the byte counters (``traffic.CounterSampler``). With
``delay_ms`` > 0 each SuperNode reaches the SuperLink through a delaying relay in its own namespace
(``relay``): its RTT grows by 2 × ``delay_ms``; the relay's client-side event log is
``workdir/relay-I.events`` once the star is closed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from fedgc.shaped.netns import Star
from fedgc.shaped.processes import NamespaceProcess
from fedgc.shaped.relay import RELAY_PORT, start_relay

SUPERLINK_PORT = 9092  # inside the hub namespace, so a fixed port cannot collide


def flower_script(name: str) -> str:
    """One of Flower's console scripts installed beside this interpreter."""
    return str(Path(sys.executable).parent / name)


class ShapedDeployment:
    """Flower processes on ``star``; logs and ``FLWR_HOME`` under ``workdir``."""

    def __init__(self, star: Star, workdir: Path, delay_ms: float = 0.0) -> None:
        self.star = star
        self.workdir = workdir
        self.delay_ms = delay_ms
        workdir.mkdir(parents=True, exist_ok=True)
        self.home = workdir / "flwr-home"
        self.home.mkdir(exist_ok=True)
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "shaped"\n\n[superlink.shaped]\naddress = "127.0.0.1:{SUPERLINK_PORT}"\n'
            'insecure = true\n')
        env = os.environ.copy()
        env.update(FLWR_HOME=str(self.home), FLWR_DISABLE_UPDATE_CHECK="1", FLWR_TELEMETRY_ENABLED="0",
                   PATH=str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""))
        self.env = env
        self.anchor = self.start(star.hub, ["sleep", "1000000"], "anchor")
        self.superlink: NamespaceProcess | None = None
        self.supernodes: list[NamespaceProcess] = []

    def start(self, namespace: str, command: list[str], name: str, cwd: Path | None = None) -> NamespaceProcess:
        process = NamespaceProcess(namespace, command, self.workdir / f"{name}.log", self.env, cwd or self.workdir)
        self.star.processes.append(process)
        return process

    def in_hub(self, command: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ip", "netns", "exec", self.star.hub, *command], capture_output=True, text=True,
                              env=self.env, timeout=timeout_s, check=False)

    def start_superlink(self, timeout_s: float = 60.0) -> None:
        """An insecure SuperLink on every hub address, in-memory state, no runtime installs."""
        self.superlink = self.start(self.star.hub, [
            flower_script("flower-superlink"), "--insecure", "--host", "0.0.0.0", "--port", str(SUPERLINK_PORT),
            "--disable-runtime-dependency-installation"], "superlink")
        deadline = time.monotonic() + timeout_s
        url = f"http://127.0.0.1:{SUPERLINK_PORT}/health"
        while self.in_hub(["curl", "-sf", "-o", "/dev/null", url], 5).returncode != 0:
            if not self.superlink.running():
                raise RuntimeError(f"flower-superlink exited:\n{self.superlink.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"flower-superlink not ready within {timeout_s:.0f} s")
            time.sleep(0.3)

    def start_supernode(self, index: int, node_config: str) -> NamespaceProcess:
        """An insecure SuperNode in client ``index``'s namespace, reaching the SuperLink over its link
        (through a relay in that namespace adding ``delay_ms`` each way, when > 0)."""
        link = self.star.clients[index]
        superlink = f"{link.hub_address}:{SUPERLINK_PORT}"
        if self.delay_ms > 0:
            start_relay(self.star, link.namespace, superlink, self.delay_ms, self.workdir, self.env, f"relay-{index}")
            superlink = f"127.0.0.1:{RELAY_PORT}"
        node = self.start(link.namespace, [
            flower_script("flower-supernode"), "--insecure", "--superlink", superlink,
            "--node-config", node_config, "--host", "127.0.0.1", "--port", "9094"], f"supernode-{index}")
        self.supernodes.append(node)
        return node

    def flwr_run(self, app_dir: Path, run_config: Path, timeout_s: float) -> int:
        """``flwr run APP shaped --run-config FILE --stream`` from the hub; its exit code (the stream
        ends with the run). Raises ``TimeoutError`` (the process is stopped) past ``timeout_s``."""
        run = self.start(self.star.hub, [flower_script("flwr"), "run", str(app_dir), "shaped", "--run-config",
                                         str(run_config), "--stream"], "flwr-run", cwd=self.workdir)
        try:
            return run.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired as error:
            run.stop()
            raise TimeoutError(f"flwr run did not finish within {timeout_s:.0f} s:\n{run.log_tail()}") from error
