"""The secure deployment of docs/deploy-edge.md, step by step on 127.0.0.1: a CA and a SuperLink
certificate made with openssl, a SuperLink with TLS and SuperNode authentication, a device key made
with ssh-keygen and registered with ``flwr supernode register``, and a SuperNode that connects with the
CA certificate and its private key. The node must show as online; an unregistered key must not get in.
(The fedgc app itself runs over the insecure deployment in test_deployment.py.)"""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from fedgc.flower.runtime.runtime_processes import ManagedProcess, flower_env, free_port, script

pytestmark = [pytest.mark.deployment,
              pytest.mark.skipif(not (shutil.which("openssl") and shutil.which("ssh-keygen")),
                                 reason="needs openssl and ssh-keygen (the guide's tools)")]


def sh(command: list[str], cwd, env=None, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def make_certificates(d) -> None:
    """docs/deploy-edge.md step 2, with 127.0.0.1 as the SuperLink's address."""
    for command in (
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=fedgc-ca",
         "-keyout", "ca.key", "-out", "ca.crt"],
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=superlink", "-keyout", "server.key",
         "-out", "server.csr"],
        ["openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
         "-days", "2", "-extfile", "san.ext", "-out", "server.pem"],
    ):
        if command[1] == "x509":
            (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1")
        assert sh(command, d).returncode == 0, command


def retry(command: list[str], d, env, timeout_s: float, until: str) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        out = sh(command, d, env)
        if until in out.stdout + out.stderr:
            return out.stdout
        if time.monotonic() > deadline:
            raise AssertionError(f"{' '.join(command)} never printed {until!r}:\n{out.stdout}{out.stderr}")
        time.sleep(1)


def test_tls_and_supernode_authentication_as_the_guide_says(tmp_path):
    make_certificates(tmp_path)
    for key in ("node-key", "stranger-key"):
        assert sh(["ssh-keygen", "-t", "ecdsa", "-b", "384", "-N", "", "-f", key, "-q"], tmp_path).returncode == 0
    env = flower_env(tmp_path / "flwr-home")
    port = free_port()
    (tmp_path / "flwr-home").mkdir()
    (tmp_path / "flwr-home" / "config.toml").write_text(
        f'[superlink]\ndefault = "edge"\n\n[superlink.edge]\naddress = "127.0.0.1:{port}"\n'
        f'root-certificates = "{tmp_path / "ca.crt"}"\n')
    processes: list[ManagedProcess] = []
    try:
        processes.append(ManagedProcess(
            [script("flower-superlink"), "--ssl-ca-certfile", "ca.crt", "--ssl-certfile", "server.pem",
             "--ssl-keyfile", "server.key", "--enable-supernode-auth", "--host", "127.0.0.1", "--port", str(port),
             "--disable-runtime-dependency-installation"], tmp_path / "superlink.log", env, cwd=tmp_path))
        registered = retry([script("flwr"), "supernode", "register", "node-key.pub", "edge"], tmp_path, env, 90,
                           until="registered successfully")
        node_id = registered.split("SuperNode ")[1].split()[0]

        def supernode(key: str, name: str) -> ManagedProcess:
            return ManagedProcess(
                [script("flower-supernode"), "--superlink", f"127.0.0.1:{port}", "--root-certificates", "ca.crt",
                 "--auth-supernode-private-key", key, "--node-config", "partition-id=0 num-partitions=1",
                 "--host", "127.0.0.1", "--port", str(free_port())], tmp_path / f"{name}.log", env, cwd=tmp_path)

        processes.append(supernode("node-key", "supernode"))
        processes.append(supernode("stranger-key", "stranger"))
        retry([script("flwr"), "supernode", "list", "edge"], tmp_path, env, 90, until="online")
        deadline = time.monotonic() + 60  # the stranger has tried, and was refused
        while "Connection attempt failed" not in (tmp_path / "stranger.log").read_text(errors="replace"):
            assert time.monotonic() < deadline, "the unregistered SuperNode never tried to connect"
            time.sleep(0.5)
        listing = sh([script("flwr"), "supernode", "list", "edge"], tmp_path, env).stdout
        assert node_id in listing and listing.count("online") == 1, listing
    finally:
        for process in reversed(processes):
            process.stop()
