"""A network of its own for a cluster (a Linux network namespace), which the host reaches and which
does not reach the host: the shape of a production cluster whose drivers cannot open a connection
to the Airflow worker.

The namespace has one link to the host (a veth pair, ``10.231.N.1`` on the host, ``10.231.N.2``
inside) and no other route. Its firewall (nftables, in the namespace) lets through what the host
opened and the ports listed in ``allow`` (the metastore), and rejects every other connection to the
host. Inside, ``localhost`` and this machine's name resolve to ``10.231.N.2`` (``ip netns exec``
mounts ``/etc/netns/<name>/hosts``), so services that bind ``localhost`` (Hadoop's MiniYARNCluster)
are reachable from the host at that address, and forwarders on the namespace's ``127.0.0.1`` lead to
the allowed services, whose clients are configured with ``127.0.0.1``.

Needs root, ``ip`` (iproute2) and ``nft`` (nftables), which ``scripts/test.sh`` installs with
apt-get when missing.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ETC = Path("/etc/netns")


def _run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, check=check, capture_output=True, text=True)


class ClusterNetwork:
    def __init__(self, log: Path, allow: tuple[int, ...] = (), index: int | None = None) -> None:
        self.index = index if index is not None else os.getpid() % 250 + 1
        self.name = f"ctas-net{self.index}"
        self.host_ip, self.cluster_ip = f"10.231.{self.index}.1", f"10.231.{self.index}.2"
        self.allow = allow
        self.log = log
        self._forwarder: subprocess.Popen[bytes] | None = None

    @property
    def prefix(self) -> list[str]:
        """What runs a command inside the network."""
        return ["ip", "netns", "exec", self.name]

    def up(self) -> ClusterNetwork:
        self.down()  # a namespace of this name left by a killed run
        host_end, cluster_end = f"{self.name}-h", f"{self.name}-c"
        _run("ip", "netns", "add", self.name)
        _run("ip", "link", "add", host_end, "type", "veth", "peer", "name", cluster_end)
        _run("ip", "link", "set", cluster_end, "netns", self.name)
        _run("ip", "addr", "add", f"{self.host_ip}/30", "dev", host_end)
        _run("ip", "link", "set", host_end, "up")
        _run(*self.prefix, "ip", "addr", "add", f"{self.cluster_ip}/30", "dev", cluster_end)
        _run(*self.prefix, "ip", "link", "set", cluster_end, "up")
        _run(*self.prefix, "ip", "link", "set", "lo", "up")
        (ETC / self.name).mkdir(parents=True, exist_ok=True)
        (ETC / self.name / "hosts").write_text(
            f"{self.cluster_ip} {self.cluster_ip} localhost {socket.gethostname()}\n"
        )
        allowed = "".join(f"    ip daddr {self.host_ip} tcp dport {port} accept\n" for port in self.allow)
        rules = (
            "table inet ctas {\n  chain out {\n    type filter hook output priority 0; policy accept;\n"
            "    ct state established,related accept\n"
            f"{allowed}    ip daddr {self.host_ip} reject\n  }}\n}}\n"
        )
        subprocess.run([*self.prefix, "nft", "-f", "-"], input=rules, check=True, capture_output=True, text=True)
        if self.allow:
            pairs = [f"127.0.0.1:{port}={self.host_ip}:{port}" for port in self.allow]
            with self.log.open("ab") as log:
                self._forwarder = subprocess.Popen(
                    [*self.prefix, sys.executable, "-m", "ctas_devstack.forward", *pairs],
                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                    cwd=Path(__file__).resolve().parent.parent,
                )  # fmt: skip
            self._wait_for_forwarder()
        return self

    def _wait_for_forwarder(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while "forwarding" not in self.log.read_text(errors="replace"):
            if (self._forwarder is not None and self._forwarder.poll() is not None) or time.monotonic() > deadline:
                raise RuntimeError(f"the forwarder did not start: {self.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)

    def reaches(self, host: str, port: int, timeout: float = 3) -> bool:
        """Whether a process inside the network can open a TCP connection to ``host:port``."""
        probe = f"import socket; socket.create_connection(({host!r}, {port}), timeout={timeout})"
        return _run(*self.prefix, sys.executable, "-c", probe, check=False).returncode == 0

    def down(self) -> None:
        if self._forwarder is not None:
            self._forwarder.kill()
            self._forwarder.wait()
            self._forwarder = None
        _run("ip", "netns", "del", self.name, check=False)  # takes the veth pair with it
        _run("ip", "link", "del", f"{self.name}-h", check=False)
        shutil.rmtree(ETC / self.name, ignore_errors=True)
