"""A configuration's data, read by Troupe's own readers into NumPy.

The ``[data]`` section (files, format, label column, categorical columns,
normalisation, bad records) is read by the same C++ code a ``troupe-node``
worker uses, so a PyTorch program sees the same examples and the same keys
(Troupe's field keys: a categorical value of one field never shares a key
with another field's).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from troupe import _native
from troupe.config import node_args

__all__ = ["DataSet", "load_data"]


@dataclass(frozen=True)
class DataSet:
    """One set's examples, row by row."""

    dense: np.ndarray
    """float32 [examples, dense values], normalised as the config says."""
    keys: np.ndarray
    """int64 [examples, fields, key slots per field]: Troupe's keys, -1 for an
    empty slot (an empty field, or fewer keys than slots)."""
    weights: np.ndarray
    """float32, the shape of ``keys``: each key's weight (0 for an empty slot)."""
    labels: np.ndarray
    """int64 [examples]: the classes (0 for regression)."""
    targets: np.ndarray
    """float32 [examples]: the regression targets (0 for classification)."""
    classes: int
    regression: bool

    def __len__(self) -> int:
        return len(self.labels)


def load_data(config_file: Optional[str | os.PathLike] = None,
              args: Sequence[str] = ()) -> Tuple[DataSet, DataSet]:
    """The training set and the evaluation set (validation, else test) of
    the configuration's ``[data]`` section.

    Raises:
        ConfigError: the configuration was refused.
        ValueError: the data cannot be read (the message names the file and
            record).
    """
    sets = _native.load_data(node_args(config_file, "chief", 0, args))
    return DataSet(**sets["train"]), DataSet(**sets["test"])
