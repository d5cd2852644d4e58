"""A task's configuration, read and checked by troupe-node's own loader.

Nothing here parses or validates settings: the C++ loader does (the config
file with its unknown-key checks, ``TF_CONFIG``, the command line, the
ranges of every value), so a setting means the same and is refused with
the same message in a Python task as in ``troupe-node``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from troupe import _native

ConfigError = _native.ConfigError
"""A configuration was refused: the message lists every problem, one a line,
each naming the key and the fix (a subclass of ValueError)."""


@dataclass(frozen=True)
class TaskConfig:
    """What a task's configuration says, as troupe-node would run it."""

    name: str
    """The task's name in logs: ``"worker:0"``, or ``"local"`` for a whole
    cluster in one process."""
    job: str
    task: int
    whole_cluster: bool
    embedded_defaults: bool
    config_file: str
    tls: bool
    cluster: Dict[str, List[str]]
    """``{"chief": [...], "ps": [...], "worker": [...]}``, ``host:port`` each."""
    model: str
    mode: str
    batch_size: int
    last_step: int
    seed: int
    sources: Dict[str, str] = field(default_factory=dict)
    """Where each setting came from, by ``section.key``: ``TF_CONFIG``,
    ``the command line`` or the config file's path (absent: the default)."""
    effective: str = ""
    """The effective configuration as a valid config file, then the network
    (troupe-node's ``--dump-config``)."""


def load_config(
    config_file: Optional[str | os.PathLike] = None,
    job: Optional[str] = None,
    task: Optional[int] = None,
    args: Sequence[str] = (),
) -> TaskConfig:
    """Loads and validates a task's configuration as troupe-node does.

    Args:
        config_file: a ``caf-application.conf``; None: troupe-node's rule
            (``caf-application.conf`` in the working directory if present,
            else the embedded defaults).
        job: ``"chief"``, ``"ps"``, ``"worker"`` or ``"evaluator"``; None:
            from ``TF_CONFIG`` or the file.
        task: the task's index in its job; None: as for ``job``.
        args: more of troupe-node's command line, e.g.
            ``["--train.last-step=100"]``.

    Raises:
        ConfigError: the configuration was refused; the message names each
            problem and its fix.
        TypeError: an argument of the wrong type.
    """
    return TaskConfig(**_native.load_config(node_args(config_file, job, task, args)))


def node_args(
    config_file: Optional[str | os.PathLike],
    job: Optional[str],
    task: Optional[int],
    args: Sequence[str],
) -> List[str]:
    """troupe-node's command line (without the program) for a task.

    Raises:
        TypeError: a ``task`` that is not an int.
    """
    if task is not None and (isinstance(task, bool) or not isinstance(task, int)):
        raise TypeError(f"task must be an int, not {type(task).__name__}")
    argv: List[str] = []
    if config_file is not None:
        argv.append(f"--config-file={os.fspath(config_file)}")
    if job is not None:
        argv.append(f"--job_name={job}")
    if task is not None:
        argv.append(f"--task_index={task}")
    argv.extend(str(arg) for arg in args)
    return argv
