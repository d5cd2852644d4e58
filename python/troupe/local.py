"""A local cluster's ps and chief tasks as ``troupe-node`` processes, for
examples and tests on one machine (a real cluster starts them as its own
tasks: pods, services, ``scripts/local-cluster``)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

__all__ = ["troupe_node", "free_ports", "LocalCluster"]


def troupe_node() -> Path:
    """The ``troupe-node`` binary: ``$TROUPE_NODE``, the build tree this
    package was built in, or the one on ``PATH``.

    Raises:
        FileNotFoundError: none of them.
    """
    candidates = [os.environ.get("TROUPE_NODE"),
                  Path(__file__).resolve().parents[2] / "bin" / "troupe-node",
                  shutil.which("troupe-node")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise FileNotFoundError("troupe-node not found: build it (./scripts/demo), or set "
                            "TROUPE_NODE to its path")


def free_ports(count: int) -> List[int]:
    """`count` TCP ports of 127.0.0.1 free now (for a local cluster's tasks)."""
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


class LocalCluster:
    """The ps and chief tasks of ``config_file``'s cluster as processes, each
    logging to ``log_dir/<job><index>.log``; killed on leaving the block if
    still running.

    Args:
        config_file: the cluster's configuration.
        log_dir: where the task logs go.
        ps: how many ps tasks to start (the cluster's first ones).
    """

    def __init__(self, config_file: str | os.PathLike, log_dir: str | os.PathLike, ps: int = 1):
        self.config_file = Path(config_file)
        self.log_dir = Path(log_dir)
        self.ps = ps
        self.tasks: Dict[str, subprocess.Popen] = {}

    def __enter__(self) -> "LocalCluster":
        self.log_dir.mkdir(parents=True, exist_ok=True)
        node = troupe_node()
        for job, index in [("ps", i) for i in range(self.ps)] + [("chief", 0)]:
            name = f"{job}{index}"
            self.tasks[name] = subprocess.Popen(
                [str(node), f"--config-file={self.config_file}", f"--job_name={job}",
                 f"--task_index={index}"],
                stdout=open(self.log_dir / f"{name}.log", "w"), stderr=subprocess.STDOUT)
        return self

    def __exit__(self, *exc) -> None:
        for task in self.tasks.values():
            if task.poll() is None:
                task.kill()
                task.wait()

    def wait(self, timeout: Optional[float] = None) -> Dict[str, int]:
        """Each task's exit code, once all have ended."""
        return {name: task.wait(timeout=timeout) for name, task in self.tasks.items()}

    def final(self) -> dict:
        """The chief's final line, as a dict.

        Raises:
            RuntimeError: the chief printed none (its log says why).
        """
        for line in (self.log_dir / "chief0.log").read_text().splitlines():
            if line.startswith('{"event":"final"'):
                return json.loads(line)
        raise RuntimeError(f"the chief printed no final line: see {self.log_dir / 'chief0.log'}")

    def logs(self) -> List[Path]:
        return [self.log_dir / f"{name}.log" for name in self.tasks]
