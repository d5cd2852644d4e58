"""Any PyTorch module on Troupe's parameter servers.

The module's parameters (every ``nn.Parameter``, by ``named_parameters()``
names) and its :class:`Embedding` / :class:`EmbeddingBag` tables live on the
ps shards; the chief places, initialises (from the first worker's module),
checkpoints and restores them; the optimizer is the cluster's
(``train.optimizer``, ``[embedding]``) and runs on the shards. A worker
computes each step in PyTorch::

    import torch, troupe.torch as tt

    class MF(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.users = tt.Embedding("users", dim=16)   # rows on the shards, by int64 id
            self.items = tt.Embedding("items", dim=16)
            self.bias = torch.nn.Parameter(torch.zeros(1))

        def forward(self, u, i):
            return (self.users(u) * self.items(i)).sum(1) + self.bias

    with tt.worker(MF(), "cluster.conf", task=0) as w:
        for u, i, r in w.batches(loader, keys=lambda b: {"users": b[0], "items": b[1]}):
            w.step(lambda m: torch.nn.functional.mse_loss(m(u, i), r))

The cluster's configuration says ``train.model = "declared"``; its ps and
chief tasks are ``troupe-node``. See docs/python.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from troupe import _native
from troupe.worker import Worker

__all__ = ["Embedding", "EmbeddingBag", "ModuleWorker", "worker", "load", "declaration"]

KeysFn = Callable[[Any], Mapping[str, Any]]


class _Table(torch.nn.Module):
    """An embedding table whose rows live on the ps shards, keyed by int64 ids.

    Inside :meth:`ModuleWorker.step` it looks up the rows the step pulled;
    after :func:`load` the rows of a checkpoint (an id it does not hold gives
    a zero row). It holds no ``nn.Parameter``: its rows are the shards'.
    """

    def __init__(self, name: str, dim: int, padding_idx: Optional[int] = None):
        super().__init__()
        if not isinstance(name, str) or not name:
            raise ValueError("a table needs a name (a non-empty str)")
        if not isinstance(dim, int) or not 1 <= dim <= 4096:
            raise ValueError(f"table {name}: dim must be an int in 1..4096, not {dim!r}")
        if padding_idx is not None and not isinstance(padding_idx, int):
            raise ValueError(f"table {name}: padding_idx must be an int (e.g. -1) or None")
        self.table_name = name
        self.dim = dim
        self.padding_idx = padding_idx
        self._keys: Optional[torch.Tensor] = None  # sorted
        self._order: Optional[torch.Tensor] = None  # sorted position -> row
        self._weight: Optional[torch.Tensor] = None  # rows, then one zero row
        self._given: Optional[Tuple[Any, torch.Tensor]] = None  # (ids given as keys, rows)
        self._step_values: Optional[torch.Tensor] = None
        self._unsorted: Optional[torch.Tensor] = None  # the keys, in the rows' order
        self._loaded = False  # the rows are a checkpoint's (tt.load), not a step's

    def extra_repr(self) -> str:
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.table_name!r}, dim={self.dim}{pad}"

    # -- rows in a step, or loaded -------------------------------------------

    def _bind(self, keys: np.ndarray, where: np.ndarray, values: torch.Tensor,
              given: Any, kept: Optional[np.ndarray] = None, loaded: bool = False) -> None:
        """The step's rows: `values` of `keys`; `where`: the row of each id
        the keys function gave (`given`), but those `kept` is False for
        (padding), which look up the zero row. `loaded`: a checkpoint's rows,
        where an id they lack reads zeros (in a step it is an error)."""
        self._loaded = loaded
        device = values.device
        self._unsorted = torch.from_numpy(keys).to(device)
        self._keys = self._order = None  # sorted only when an id must be searched for
        self._step_values = values
        self._weight = torch.cat([values, values.new_zeros(1, self.dim)])
        if kept is not None:
            full = np.full(len(kept), len(keys), dtype=np.int64)
            full[kept] = where
            where = full
        self._given = (given, torch.from_numpy(where).to(device)) if given is not None else None

    def _unbind(self) -> None:
        self._keys = self._order = self._weight = self._given = self._step_values = None
        self._unsorted = None

    def _load(self, keys: np.ndarray, values: np.ndarray) -> None:
        if values.ndim != 2 or values.shape[1] != self.dim:
            raise ValueError(f"table {self.table_name}: the checkpoint's rows are "
                             f"{list(values.shape)}, the module's dim is {self.dim}")
        weight = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32))
        self._bind(np.ascontiguousarray(keys, dtype=np.int64), np.empty(0, np.int64), weight,
                   None, loaded=True)

    def _rows_of(self, ids: torch.Tensor) -> torch.Tensor:
        """The row index of each id (the zero row for padding, and for an id a
        loaded table does not hold)."""
        if self._weight is None:
            raise RuntimeError(f"table {self.table_name} has no rows here: look it up inside "
                               "w.step(...), or load a checkpoint first (troupe.torch.load)")
        if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            raise TypeError(f"table {self.table_name}: ids are {ids.dtype}; give int64 ids")
        zero_row = self._weight.shape[0] - 1
        if self._given is not None and _same(ids, self._given[0]):
            return self._given[1].view(ids.shape)
        if self._keys is None:
            self._keys, self._order = torch.sort(self._unsorted)
        ids = ids.to(self._keys.device, torch.int64)
        flat = ids.reshape(-1)
        pos = torch.searchsorted(self._keys, flat).clamp(max=max(len(self._keys) - 1, 0))
        if len(self._keys):
            found = self._keys[pos] == flat
        else:
            found = torch.zeros_like(flat, dtype=torch.bool)
        rows = torch.where(found, self._order[pos] if len(self._keys) else flat,
                           torch.full_like(flat, zero_row))
        padding = flat == self.padding_idx if self.padding_idx is not None else None
        if not self._loaded:
            missing = ~found if padding is None else ~found & ~padding
            if bool(missing.any()):
                bad = int(flat[missing][0])
                raise KeyError(f"table {self.table_name}: id {bad} is not among the keys this "
                               "step pulled; the keys function of w.batches(...) must give "
                               "every id the module looks up")
        if padding is not None:
            rows = torch.where(padding, torch.full_like(rows, zero_row), rows)
        return rows.view(ids.shape)


def _same(ids: torch.Tensor, given: Any) -> bool:
    """Whether `ids` are the ids the keys function gave (the same memory,
    shape and strides: a new view of them counts), so that their rows'
    positions are known without a search."""
    return (ids is given or (isinstance(given, torch.Tensor) and ids.device == given.device
                             and ids.data_ptr() == given.data_ptr() and ids.shape == given.shape
                             and ids.stride() == given.stride()))


class Embedding(_Table):
    """``torch.nn.Embedding`` over a table on the ps shards: ``forward(ids)``
    gives ``ids.shape + (dim,)``; ``padding_idx`` (any int, e.g. -1 for the
    empty slots of :func:`troupe.load_data`'s keys) looks up zeros, never
    pulled, no gradient."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        rows = self._rows_of(ids)
        return F.embedding(rows, self._weight, padding_idx=self._weight.shape[0] - 1)


class EmbeddingBag(_Table):
    """``torch.nn.EmbeddingBag`` over a table on the ps shards: bags of ids
    (1-D ids with ``offsets``, or 2-D ids, one bag a row) combined by
    ``mode`` ("sum" or "mean"), with ``per_sample_weights`` for "sum"."""

    def __init__(self, name: str, dim: int, mode: str = "mean",
                 padding_idx: Optional[int] = None):
        super().__init__(name, dim, padding_idx)
        if mode not in ("sum", "mean"):
            raise ValueError(f"table {name}: mode must be 'sum' or 'mean', not {mode!r}")
        self.mode = mode

    def extra_repr(self) -> str:
        return super().extra_repr() + f", mode={self.mode!r}"

    def forward(self, ids: torch.Tensor, offsets: Optional[torch.Tensor] = None,
                per_sample_weights: Optional[torch.Tensor] = None) -> torch.Tensor:
        rows = self._rows_of(ids)
        if offsets is not None:
            offsets = offsets.to(rows.device, torch.int64)
        return F.embedding_bag(rows, self._weight, offsets, mode=self.mode,
                               per_sample_weights=per_sample_weights,
                               padding_idx=self._weight.shape[0] - 1)


def tables_of(module: torch.nn.Module) -> List[_Table]:
    """The module's tables, one per name, in the order ``modules()`` meets
    them; two table modules of one name share its rows (their dims must agree)."""
    seen: Dict[str, _Table] = {}
    for sub in module.modules():
        if isinstance(sub, _Table):
            first = seen.setdefault(sub.table_name, sub)
            if first.dim != sub.dim:
                raise ValueError(f"two tables named {sub.table_name} with dims {first.dim} "
                                 f"and {sub.dim}: one name, one table")
    return list(seen.values())


def declaration(module: torch.nn.Module
                ) -> Tuple[List[Tuple[str, np.ndarray]], List[Tuple[str, int]]]:
    """What a worker declares of ``module``: each parameter's name and first
    value (float32), and each table's name and dim.

    Raises:
        TypeError: a parameter that is not float32 (Troupe's shards hold float32).
    """
    variables = []
    for name, p in module.named_parameters():
        if p.dtype != torch.float32:
            raise TypeError(f"parameter {name} is {p.dtype}; Troupe's shards hold float32 "
                            "(module.float())")
        value = np.ascontiguousarray(p.detach().cpu().numpy())
        variables.append((name, value.reshape(value.shape or (1,))))
    tables = [(t.table_name, t.dim) for t in tables_of(module)]
    return variables, tables


def _ids_array(table: _Table, ids: Any) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """A table's ids as the shards take them (int64, padding left out), and
    which of the given ids are kept (None: all)."""
    if isinstance(ids, torch.Tensor):
        if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            raise TypeError(f"table {table.table_name}: ids are {ids.dtype}; give int64 ids")
        array = ids.detach().cpu().numpy()
    else:
        array = np.asarray(ids)
        if not np.issubdtype(array.dtype, np.integer):
            raise TypeError(f"table {table.table_name}: ids are {array.dtype}; give int64 ids")
    array = np.ascontiguousarray(array.reshape(-1), dtype=np.int64)
    if table.padding_idx is None:
        return array, None
    kept = array != table.padding_idx
    return np.ascontiguousarray(array[kept]), kept


def _into(buffer: torch.Tensor, grad: Optional[torch.Tensor]) -> None:
    """The gradient in the worker's buffer: there already where autograd
    accumulated in place, else copied (a new tensor, another device); no
    gradient (a parameter the loss does not use) leaves it zero."""
    if grad is None or (grad.device == buffer.device
                        and grad.data_ptr() == buffer.data_ptr()):
        return
    buffer.copy_(grad.reshape(buffer.shape))


def _examples_of(item: Any) -> int:
    """A batch's size: the length of its first sized part."""
    parts = item.values() if isinstance(item, Mapping) else (
        item if isinstance(item, (tuple, list)) else (item,))
    for part in parts:
        if hasattr(part, "shape") and len(part.shape) > 0:
            return int(part.shape[0])
        if isinstance(part, (list, tuple)):
            return len(part)
    return 0


class ModuleWorker(Worker):
    """A worker task whose model is a PyTorch module (:func:`worker` makes one).

    Iterate :meth:`batches` over your loader and call :meth:`step` once per
    batch; the iteration ends when the chief says the run is over.
    """

    def __init__(self, module: torch.nn.Module, config_file: Optional[str | os.PathLike] = None,
                 task: Optional[int] = None, args: Sequence[str] = (),
                 idle_timeout: Optional[float] = None):
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"worker() takes a torch.nn.Module, not {type(module).__name__}")
        self.module = module
        self._variables, self._table_specs = declaration(module)
        self._params = [p for _, p in module.named_parameters()]
        self._tables = tables_of(module)
        self._modules_of = {t.table_name: [m for m in module.modules() if isinstance(m, _Table)
                                           and m.table_name == t.table_name]
                            for t in self._tables}
        self._held: Optional[_native.Step] = None
        self._given: Dict[str, Any] = {}
        self._ids: Mapping[str, Any] = {}  # the current batch's, by table
        self._examples = 0
        self._pending = False
        super().__init__(config_file, task, args, idle_timeout)

    def _open(self, args: List[str]) -> _native.Worker:
        return _native.Worker(args, self._variables, self._table_specs)

    def _keys_of(self, item: Any, keys: Optional[KeysFn]) -> Dict[str, Any]:
        names = [t.table_name for t in self._tables]
        if keys is not None:
            given = keys(item)
        elif isinstance(item, Mapping) and all(n in item for n in names):
            given = {n: item[n] for n in names}
        else:
            raise ValueError(f"the module looks up tables {names}: give w.batches(loader, "
                             "keys=lambda batch: {table: ids, ...}), or batches that are dicts "
                             "with an entry per table")
        if not isinstance(given, Mapping):
            raise TypeError("keys(batch) must return a dict {table name: ids}")
        unknown = set(given) - set(names)
        if unknown:
            raise KeyError(f"keys(batch) names tables {sorted(unknown)} the module does not "
                           f"have (it has {names})")
        missing = [n for n in names if n not in given]
        if missing:
            raise KeyError(f"keys(batch) gives no ids for tables {missing}")
        return given

    def batches(self, loader: Iterable[Any], keys: Optional[KeysFn] = None) -> Iterator[Any]:
        """The loader's batches, again and again (epochs), until the run is over.

        Before yielding a batch it hands the worker the ids each table looks
        up in it (``keys(batch)``: ``{table name: int64 ids}``; by default a
        dict batch's entries named as the tables), so that the step pulls the
        dense values and those rows together, one request a shard.

        Raises:
            TypeError, ValueError: ids that are not integers, or negative.
            KeyError: a table the module does not have, or one without ids.
            RuntimeError: a batch yielded without a :meth:`step`.
        """
        passes = 0
        while True:
            empty = True
            passes += 1
            for item in loader:
                empty = False
                ids = self._keys_of(item, keys) if self._tables else {}
                if not self._begin(ids):
                    return
                self._examples = _examples_of(item)
                self._pending = True
                yield item
                if self._pending:
                    self._refuse("the Python code took a batch without calling w.step")
                    raise RuntimeError("each batch of w.batches(...) needs one w.step(...)")
            if empty and passes == 1:
                raise ValueError("the loader gave no batch")
            if empty:
                raise ValueError("the loader gave no batch on its pass "
                                 f"{passes}: a generator ends after one pass; give an iterable "
                                 "that starts again (a list, a torch DataLoader) or an endless "
                                 "generator")

    def _begin(self, ids: Mapping[str, Any]) -> bool:
        """Takes the next step: a table model's keys are given first. False
        once the run is over."""
        native = self._take()
        if native is None:
            return False
        self._ids = ids
        if native.kind == "keys":
            self._give_keys(native)
            native = None
        self._held = native
        return True

    def _give_keys(self, native: _native.Step) -> None:
        """Answers the worker's request for the current batch's keys."""
        try:
            arrays = [_ids_array(t, self._ids[t.table_name]) for t in self._tables]
            native.set_keys([array for array, _ in arrays])
        except Exception as e:
            native.refuse(f"the program's keys were refused: {e}")
            raise
        self._given = {t.table_name: (self._ids[t.table_name], kept)
                       for t, (_, kept) in zip(self._tables, arrays)}

    def step(self, loss_fn: Callable[[torch.nn.Module], Any],
             examples: Optional[int] = None) -> float:
        """One training step on the current batch: the module's parameters and
        tables take the pulled values, ``loss_fn(module)`` runs forward and
        returns the mean loss (or ``(loss, correct)``), then its gradients
        are pushed and the step reported. Returns the loss.

        A non-finite loss or gradient pushes nothing (the chief decides, as
        for a C++ worker). An exception in ``loss_fn`` fails this worker.
        """
        if not self._pending:
            raise RuntimeError("w.step(...) takes the batch w.batches(...) yielded: one each")
        native = self._held if self._held is not None else self._take()
        self._held = None
        self._pending = False
        while native is not None and native.kind == "keys":
            # The worker dropped the step under way (a lost ps, a restored
            # run): the batch's keys go with its next step.
            self._give_keys(native)
            native = self._take()
        if native is None:
            raise RuntimeError(f"{self.name}: the run is over")
        try:
            loss, correct = self._compute(native, loss_fn)
            native.answer(loss, correct, int(examples or self._examples))
            return loss
        except BaseException as e:
            try:
                native.refuse(f"the step raised {type(e).__name__}: {e}")
            except RuntimeError:
                pass  # answered already
            raise
        finally:
            for sharing in self._modules_of.values():
                for table in sharing:
                    table._unbind()

    def _compute(self, native: _native.Step, loss_fn: Callable) -> Tuple[float, int]:
        """The step on the worker's own buffers: the pulled values are read in
        place, and on the CPU the gradients accumulate into the buffers the
        worker pushes from (copied there only where autograd made new ones)."""
        values, grad_buffers, row_views = native.views()
        device = self._params[0].device if self._params else torch.device("cpu")
        on_cpu = device.type == "cpu"
        with torch.no_grad():
            for p, value in zip(self._params, values):
                p.copy_(torch.from_numpy(value).view_as(p))
        self.module.zero_grad(set_to_none=True)
        buffers = [torch.from_numpy(g).view_as(p) for p, g in zip(self._params, grad_buffers)]
        if on_cpu:
            for p, buffer in zip(self._params, buffers):
                p.grad = buffer  # zeroed: backward adds into the worker's buffer
        rows = []
        for table, (keys, where, pulled, grad_buffer) in zip(self._tables, row_views):
            weight = torch.from_numpy(pulled).to(device).requires_grad_()
            if on_cpu:
                weight.grad = torch.from_numpy(grad_buffer)
            given, kept = self._given.get(table.table_name, (None, None))
            for sharing in self._modules_of[table.table_name]:
                sharing._bind(keys, where, weight, given, kept)
            rows.append((weight, torch.from_numpy(grad_buffer)))
        out = loss_fn(self.module)
        loss, correct = (out if isinstance(out, tuple) else (out, 0))
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise TypeError("loss_fn must return the batch's mean loss as a one-element tensor")
        loss.backward()
        with torch.no_grad():
            for p, buffer in zip(self._params, buffers):
                _into(buffer, p.grad)
            for weight, buffer in rows:
                _into(buffer, weight.grad)
        return float(loss.item()), int(correct)

    def report(self, **metrics: float) -> None:
        """Metrics your code computed (``w.report(auc=0.79)``): the chief's
        final line carries each name's last value under ``"reported"``."""
        for name, value in metrics.items():
            self._native.report(name, float(value))

    def _refuse(self, why: str) -> None:
        native = self._held if self._held is not None else self._native.take(0.0)
        self._held = None
        if native is not None:
            native.refuse(why)


def worker(module: torch.nn.Module, config_file: Optional[str | os.PathLike] = None,
           task: Optional[int] = None, args: Sequence[str] = (),
           idle_timeout: Optional[float] = None) -> ModuleWorker:
    """Worker ``task`` of the cluster ``config_file`` names (``TF_CONFIG``
    where None), training ``module``: use it as a context manager.

    Raises:
        ConfigError: the configuration was refused, names no worker task, or
            its ``train.model`` is not ``"declared"``; or the module's
            declaration is (an empty module, a name too long, ...).
        TypeError: a parameter that is not float32.
    """
    return ModuleWorker(module, config_file, task, args, idle_timeout)


def load(module: torch.nn.Module, path: str | os.PathLike) -> int:
    """Loads a run's trained values into ``module`` (of the class it was
    trained as): every parameter, and each table's rows, from the newest
    complete checkpoint in ``path`` (the run's ``checkpoint.log-dir``, or
    one ``ckpt-N`` directory). Returns the checkpoint's global step.

    Raises:
        ValueError: no checkpoint there, or a shape that differs.
        KeyError: a parameter or table the checkpoint lacks.
    """
    saved = _native.read_checkpoint(os.fspath(path))
    variables, tables = saved["variables"], saved["tables"]
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name not in variables:
                raise KeyError(f"parameter {name} is not in checkpoint {saved['dir']}")
            value = variables[name]
            if tuple(value.shape) != tuple(p.shape) and value.size == p.numel():
                value = value.reshape(tuple(p.shape))
            if tuple(value.shape) != tuple(p.shape):
                raise ValueError(f"parameter {name} is {list(value.shape)} in the checkpoint, "
                                 f"{list(p.shape)} in the module")
            p.copy_(torch.from_numpy(value))
    for table in tables_of(module):
        if table.table_name not in tables:
            raise KeyError(f"table {table.table_name} is not in checkpoint {saved['dir']}")
        keys, values = tables[table.table_name]
        for sub in module.modules():
            if isinstance(sub, _Table) and sub.table_name == table.table_name:
                sub._load(keys, values)
    return int(saved["step"])
