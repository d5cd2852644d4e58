"""Troupe's Python package: a Python task of a Troupe cluster.

The parameter servers, the chief and the step coordination are
``troupe-node`` tasks. This package gives a Python process the same view of
the cluster's configuration as those tasks have (:func:`load_config`), and
runs a worker task whose steps compute in Python (:class:`Worker`). See
docs/python.md.
"""

from troupe.config import ConfigError, TaskConfig, load_config
from troupe.worker import Step, Worker, WorkerError

__all__ = ["ConfigError", "TaskConfig", "load_config", "Step", "Worker", "WorkerError"]
