"""Troupe's Python package: a Python task of a Troupe cluster.

The parameter servers, the chief and the step coordination are
``troupe-node`` tasks. This package gives a Python process the same view of
the cluster's configuration as those tasks have (:func:`load_config`), and
runs a worker task whose steps compute in Python (:class:`Worker`);
:mod:`troupe.torch` puts any PyTorch module on the shards, :func:`load_data`
reads a configuration's data as Troupe does, :mod:`troupe.local` starts a
local cluster's ps and chief. See docs/python.md.
"""

from troupe.config import ConfigError, TaskConfig, load_config
from troupe.data import DataSet, load_data
from troupe.worker import Step, Worker, WorkerError

__all__ = ["ConfigError", "TaskConfig", "load_config", "DataSet", "load_data", "Step", "Worker",
           "WorkerError"]
