"""Troupe's Python package: a Python task of a Troupe cluster.

The parameter servers, the chief and the step coordination are
``troupe-node`` tasks; this package gives a Python process the same view of
the cluster's configuration as those tasks have (:func:`load_config`).
The PyTorch worker of issue 53 builds on it.
"""

from troupe.config import ConfigError, TaskConfig, load_config

__all__ = ["ConfigError", "TaskConfig", "load_config"]
