"""A worker task of a Troupe cluster whose steps compute in Python.

The worker is ``troupe-node``'s own worker task (connection to the chief and
the shards, step grants or sync tokens, the bulk path, reports, recovery),
running on a thread of this process; each step it hands over the pulled
values and its batch, and takes back the gradients. The chief and the ps
shards are ``troupe-node`` tasks, and C++ workers may share the run.

Here the model is one the configuration names (``train.model``): its
variables, their placement and initial values are the chief's, and the
Python code computes that model's gradients. A model declared by a PyTorch
module, with embedding tables, is :mod:`troupe.torch`'s.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from troupe import _native
from troupe.config import node_args


__all__ = ["Worker", "Step", "WorkerError"]


class WorkerError(RuntimeError):
    """The worker task ended without finishing the run (its log says why)."""


class Step:
    """One granted step: the pulled values and the batch (NumPy copies, valid
    after the step), and the gradients to push. Answer it once, with
    :meth:`push` or :meth:`refuse`."""

    def __init__(self, native: _native.Step, variables: Sequence[Tuple[str, Tuple[int, ...]]],
                 tables: Sequence[Tuple[str, int]] = ()):
        self._native = native
        self._variables = variables
        self._tables = tables
        self.params: Dict[str, np.ndarray] = {
            name: value for (name, _), value in zip(variables, native.params())
        }
        """The variables' values as pulled, by Troupe's names (``softmax/weights``)."""
        self.features: np.ndarray = native.features()
        """The batch's examples, float32, as the worker's data reader gives them."""
        self.labels: np.ndarray = native.labels()
        """The batch's class indices, int64."""
        self.dense: Optional[np.ndarray] = None
        """A table model's batch: its dense values [examples, values]."""
        self.keys: Optional[np.ndarray] = None
        """A table model's batch: its keys [examples, fields, slots], -1 empty."""
        self.key_weights: Optional[np.ndarray] = None
        """A table model's batch: each key's weight (0 for an empty slot)."""
        self.rows: Dict[str, Tuple[np.ndarray, np.ndarray]] = {}
        """A table model's pulled rows by table: (distinct keys, values [keys, dim])."""
        if tables:
            self.dense, self.keys, self.key_weights = native.categorical()
            for t, (name, _) in enumerate(tables):
                keys, _, values = native.rows(t)
                self.rows[name] = (keys, values)
        self.answered = False

    def push(self, grads: Mapping[str, np.ndarray], loss: float, correct: int = 0,
             rows: Optional[Mapping[str, np.ndarray]] = None) -> None:
        """Pushes the step's gradients (one per variable, by name, each of its
        variable's shape; anything NumPy turns into float32), and for a table
        model each table's row gradients (``rows``: by table, [keys, dim] in
        the order of ``self.rows``, each row's summed over its occurrences),
        and reports the step with its mean loss and the examples classified
        right.

        Raises:
            ValueError: a gradient missing, unknown or of the wrong shape;
                nothing was pushed and the step is still open.
        """
        rows = rows or {}
        missing = [name for name, _ in self._tables if name not in rows]
        if missing:
            raise ValueError(f"no row gradients for tables {missing}")
        unknown = set(grads) - {name for name, _ in self._variables}
        if unknown:
            raise ValueError(f"gradients for unknown variables: {sorted(unknown)}")
        ordered = []
        for name, _ in self._variables:
            if name not in grads:
                raise ValueError(f"no gradient for {name}")
            ordered.append(np.ascontiguousarray(np.asarray(grads[name]), dtype=np.float32))
        self._native.set_gradients(ordered)
        for t, (name, _) in enumerate(self._tables):
            self._native.set_row_gradients(
                t, np.ascontiguousarray(np.asarray(rows[name]), dtype=np.float32))
        self._native.answer(float(loss), int(correct))
        self.answered = True

    def refuse(self, why: str) -> None:
        """The step cannot be computed: the worker fails the run with ``why``."""
        self._native.refuse(why)
        self.answered = True


class Worker:
    """Worker ``task`` of the cluster a configuration names, computing in Python.

    Use it as a context manager and iterate :meth:`steps`; the iteration ends
    when the run is over for this worker::

        with troupe.Worker("caf-application.conf", task=0) as w:
            for step in w.steps():
                grads, loss = my_gradients(step.params, step.features, step.labels)
                step.push(grads, loss)

    Args:
        config_file: the cluster's ``caf-application.conf`` (None: as
            ``troupe-node`` finds one, or ``TF_CONFIG``).
        task: the worker's index (None: from ``TF_CONFIG``).
        args: more of ``troupe-node``'s command line.
        idle_timeout: seconds without a step after which :meth:`steps` gives
            up (None: wait as long as the worker task runs; it has deadlines
            of its own).

    Raises:
        ConfigError: the configuration was refused or names no worker task.
    """

    def __init__(
        self,
        config_file: Optional[str | os.PathLike] = None,
        task: Optional[int] = None,
        args: Sequence[str] = (),
        idle_timeout: Optional[float] = None,
    ):
        self._native = self._open(node_args(config_file, "worker", task, args))
        self._idle_timeout = idle_timeout
        self.exit_code: Optional[int] = None
        """troupe-node's exit code once the worker ended (0: the run finished)."""

    def _open(self, args: List[str]) -> _native.Worker:
        return _native.Worker(args)

    @property
    def name(self) -> str:
        """The task's name in logs, ``worker:N``."""
        return self._native.name

    @property
    def variables(self) -> List[Tuple[str, Tuple[int, ...]]]:
        """The model's variables, ``(name, shape)``, in the model's order."""
        return list(self._native.variables)

    def __enter__(self) -> "Worker":
        self._native.start()
        # SIGTERM (a scale-down, Kubernetes' stop) means what it means to a
        # C++ worker: leave once the step under way is pushed and reported.
        self._previous_sigterm = None
        if threading.current_thread() is threading.main_thread():
            self._previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        return self

    def _on_sigterm(self, signum, frame) -> None:
        self.leave()

    def leave(self) -> None:
        """Leaves the run once the step under way is pushed and reported (what
        SIGTERM does); :meth:`steps` then ends and the worker exits 0."""
        self._native.leave()

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
        # Leaving the block before the run is over (an exception, Ctrl-C, a
        # break) stops the worker task: its step under way fails, as a
        # crashed C++ worker's would, and the chief recovers without it.
        if exc is not None:
            self._native.stop(f"the Python code raised {exc_type.__name__}: {exc}")
        elif not self._native.closed:
            self._native.stop("the Python code left its loop before the run was over")
        self.exit_code = self._wait()
        if exc is None and self.exit_code != 0:
            why = "; ".join(line.strip() for line in self._native.errors()) or "its log says why"
            raise WorkerError(
                f"{self.name} ended with exit code {self.exit_code} before the run finished: {why}"
            )

    def steps(self) -> Iterator[Step]:
        """The steps granted to this worker, until the run is over for it.

        Raises:
            RuntimeError: the previous step was neither pushed nor refused
                (it is refused, and the worker fails the run).
            TimeoutError: no step for ``idle_timeout`` seconds.
        """
        variables, tables = self.variables, list(self._native.tables)
        while True:
            native = self._take()
            if native is None:
                return
            step = Step(native, variables, tables)
            yield step
            if not step.answered:
                step.refuse("the Python code neither pushed nor refused a step")
                raise RuntimeError("a step was neither pushed nor refused: call step.push(...)")

    def _take(self) -> Optional[_native.Step]:
        """The next step the worker posts; None once the run is over for it."""
        waited = 0.0
        while True:
            native = self._native.take(0.5)
            if native is not None:
                return native
            if self._native.closed:
                return None
            waited += 0.5
            if self._idle_timeout is not None and waited >= self._idle_timeout:
                raise TimeoutError(f"{self.name}: no step for {self._idle_timeout} s")

    def _wait(self) -> int:
        while True:
            code = self._native.join(1.0)
            if code is not None:
                return code
