"""How the ClientApp keeps tensors in ``context.state`` between rounds (its compression memory and
pending updates): an ``ArrayRecord`` that is compact for mostly-zero tensors and lossless.

A mostly-zero tensor (a sent DGC update kept as pending: 1% of its entries) is stored as its nonzero
entries; every other tensor as it is. Unpacking gives the same bits (a -0.0 or NaN counts as
nonzero). NumPy has no bfloat16, so a bfloat16 tensor is stored as its int16 bit pattern under
``STATE_BF16``. The arrays are byte for byte what ``flwr.app.Array(ndarray)`` would hold.
"""

from __future__ import annotations

import io
import math

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, MetricRecord, RecordDict
from flwr.common.constant import SType

from fedgc.flower.client_checks import npy_header

STATE_INDICES, STATE_VALUES, STATE_SHAPE = "sparse-indices/", "sparse-values/", "sparse-shape/"
STATE_BF16 = "bfloat16/"
_RESERVED = (STATE_INDICES, STATE_VALUES, STATE_SHAPE, STATE_BF16)
_SAME_SIZE_INT = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}


_NPY_HEADERS: dict[tuple[str, tuple[int, ...]], bytes] = {}  # np.save's header per (dtype, shape)


def _npy_header(array: np.ndarray) -> bytes:
    key = (array.dtype.str, array.shape)
    header = _NPY_HEADERS.get(key)
    if header is None:
        buffer = io.BytesIO()
        np.lib.format.write_array_header_1_0(buffer, np.lib.format.header_data_from_array_1_0(array))
        header = buffer.getvalue()
        if len(_NPY_HEADERS) < 4096:
            _NPY_HEADERS[key] = header
    return header


def _array(array: np.ndarray) -> Array:
    """``Array(array)``, byte for byte the same (np.save's format 1.0), with one copy of the data and
    without np.save's per-call work."""
    array = array if array.flags.c_contiguous else np.ascontiguousarray(array)  # (keeps a 0-d array 0-d)
    data = b"".join((_npy_header(array), array.data.cast("B") if array.ndim and array.size else array.tobytes()))
    return new_array(_dtype_name(array.dtype), tuple(array.shape), SType.NUMPY, data)


def new_array(dtype: str, shape: tuple[int, ...], stype: str, data: bytes) -> Array:
    """``Array(dtype=dtype, shape=shape, stype=stype, data=data)``, the same object (its attributes, and
    dirty, as a new one is), without the constructor's argument dispatch (about 4 µs an array, tens of
    arrays a client state); the caller passes values of those types (``_check_flower_array``)."""
    array = Array.__new__(Array)
    array.__dict__.update(_is_dirty=True, dtype=dtype, shape=shape, stype=stype, data=data)
    return array


_DTYPE_NAMES: dict[np.dtype, str] = {}


def _dtype_name(dtype: np.dtype) -> str:
    """``str(dtype)``, remembered (NumPy builds the name in Python on every call)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = str(dtype)
        if len(_DTYPE_NAMES) < 256:
            _DTYPE_NAMES[dtype] = name
    return name


def _tensor(array: Array) -> torch.Tensor:
    """``torch.from_numpy(array.numpy())``: a writable copy; skips np.load's header parsing when the
    header is one ``_array`` wrote."""
    values = _values(array)
    return torch.from_numpy(values if values.flags.writeable else values.copy())


def _values(array: Array) -> np.ndarray:
    """``array.numpy()``'s values, read in place (read-only) when the header is one ``_array`` wrote:
    for what is read once and not kept (a sparse tensor's indices, values and shape)."""
    dtype = np.dtype(array.dtype)
    header = _NPY_HEADERS.get((dtype.str, tuple(array.shape)))  # only headers this module wrote
    data = array.data
    if header is None or not data.startswith(header) or len(data) != len(header) + dtype.itemsize * math.prod(array.shape):
        return array.numpy()
    return np.frombuffer(data, dtype=dtype, offset=len(header)).reshape(array.shape)


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` flat, viewed as integers of the same size (nonzero exactly where a bit is set)."""
    flat = tensor.reshape(-1)
    if flat.is_floating_point() and flat.element_size() in _SAME_SIZE_INT:
        flat = flat.view(_SAME_SIZE_INT[flat.element_size()])
    return flat


def pack_state(tensors: dict[str, torch.Tensor]) -> ArrayRecord:
    """``tensors`` as an ``ArrayRecord`` for ``context.state``: sparse where that is under a third of dense."""
    arrays: dict[str, Array] = {}
    for name, tensor in tensors.items():
        if name.startswith(_RESERVED):
            raise ValueError(f"tensor name {name!r} starts with a reserved prefix")
        tensor = tensor.detach().cpu()  # state lives on the host between rounds (a no-op on the CPU)
        if tensor.dtype == torch.bfloat16:
            arrays[STATE_BF16 + name] = _array(tensor.contiguous().view(torch.int16).numpy())
            continue
        if tensor.is_floating_point() and tensor.numel() >= 64:
            # Counted, found and gathered in NumPy: on one CPU thread about 3× torch.count_nonzero and
            # 5× Tensor.nonzero for a 200 × 784 tensor (the same indices, ascending; the same bits).
            bits = _bits(tensor).numpy()
            index_dtype = np.int32 if tensor.numel() < 2**31 else np.int64
            sparse_bytes = int(np.count_nonzero(bits)) * (tensor.element_size() + np.dtype(index_dtype).itemsize)
            if 3 * sparse_bytes < tensor.numel() * tensor.element_size():
                nonzero = (bits != 0).nonzero()[0]
                arrays[STATE_INDICES + name] = _array(nonzero.astype(index_dtype))
                arrays[STATE_VALUES + name] = _array(tensor.reshape(-1).numpy()[nonzero])
                arrays[STATE_SHAPE + name] = _array(np.asarray(tensor.shape, dtype=np.int64))
                continue
        arrays[name] = _array(tensor.contiguous().numpy())
    return array_record(arrays)


def array_record(arrays: dict[str, Array]) -> ArrayRecord:
    """``ArrayRecord(arrays)``, the same record, holding these ``Array`` objects themselves (Flower's
    constructor builds a second ``Array`` of each entry, tens of them a DGC client's state)."""
    record = ArrayRecord()
    for key, array in arrays.items():
        if not (isinstance(key, str) and isinstance(array, Array)):
            record[key] = array  # Flower's own checks say what is wrong
    # What ``record[key] = array`` does for each, without Flower's per-item type checks (each builds two
    # typing aliases at run time: about 5 µs an item): the record marked dirty, the arrays in order.
    record.__dict__["_is_dirty"] = True
    record.__dict__["_data"].update(arrays)
    return record


def _check_flower_array() -> None:
    """``new_array`` and ``array_record`` build what Flower's constructors build, with the flwr installed
    (run at import: an upgrade that changes them fails here, in one line)."""
    import flwr

    made = Array(dtype="float32", shape=(2,), stype=SType.NUMPY, data=b"\0" * 8)
    fast = new_array("float32", (2,), SType.NUMPY, b"\0" * 8)
    record = ArrayRecord()
    record["a"] = made
    if (fast.__dict__ != made.__dict__ or list(fast.__dict__) != list(made.__dict__)
            or array_record({"a": made}).__dict__ != record.__dict__ or fast.object_id != made.object_id):
        raise RuntimeError(f"fedgc: flwr {flwr.__version__} changed how an Array or ArrayRecord is built "
                           "(fedgc.flower.state.client_state.new_array)")


_check_flower_array()


def unpack_state(record: ArrayRecord | None, max_elements: int | None = None) -> dict[str, torch.Tensor]:
    """The tensors ``pack_state`` stored, in their original order, dense. ``max_elements``: a stored
    state is input (a server restores it on ``--resume``): a tensor declaring more entries is refused
    (``ValueError``) before anything is allocated for it."""
    if record is None:
        return {}
    sparse = _check_sizes(record, max_elements) if max_elements is not None else {}
    tensors: dict[str, torch.Tensor] = {}
    for key in record:
        if key.startswith((STATE_VALUES, STATE_SHAPE)):
            continue
        if key.startswith(STATE_BF16):
            tensors[key.removeprefix(STATE_BF16)] = _tensor(record[key]).view(torch.bfloat16)
        elif key.startswith(STATE_INDICES):
            # Scattered in NumPy from the stored bytes themselves (no copy of the indices or values).
            name = key.removeprefix(STATE_INDICES)
            values = _values(record[STATE_VALUES + name])
            dims, indices = sparse.get(name) or (_values(record[STATE_SHAPE + name]), _values(record[key]))
            shape = tuple(int(d) for d in dims.tolist())
            dense = np.zeros(math.prod(shape), dtype=values.dtype)
            dense[indices.astype(np.int64, copy=False)] = values
            tensors[name] = torch.from_numpy(dense.reshape(shape))
        else:
            tensors[key] = _tensor(record[key])
    return tensors


def _check_sizes(record: ArrayRecord, max_elements: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every stored array within ``max_elements`` and its .npy data what it declares; a sparse
    tensor's shape and indices within bounds. Returns them, read: {name: (shape, indices)}."""
    sparse: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for key in record:
        array = record[key]
        declared = math.prod(int(d) for d in array.shape) if all(isinstance(d, int) and d >= 0 for d in array.shape) else -1
        if not 0 <= declared <= max_elements or len(array.data) > 8 * max_elements + 4096:
            raise ValueError(f"state tensor {key!r:.80} declares {declared} entries, more than {max_elements}")
        descr, shape, offset = npy_header(array)  # the .npy header, before numpy allocates what it declares
        try:
            itemsize = np.dtype(descr).itemsize
        except TypeError:
            raise ValueError(f"state tensor {key!r:.80} has dtype {descr!r:.20}") from None
        if shape != tuple(array.shape) or len(array.data) != offset + itemsize * declared:
            raise ValueError(f"state tensor {key!r:.80}: its .npy data does not match its declared shape")
        if key.startswith(STATE_INDICES):
            name = key.removeprefix(STATE_INDICES)
            if STATE_VALUES + name not in record or STATE_SHAPE + name not in record:
                raise ValueError(f"state tensor {name!r:.80} is sparse without its values or shape")
            dims = _values(record[STATE_SHAPE + name])
            if dims.ndim != 1 or dims.size > 8 or bool((dims < 0).any()) or math.prod(dims.tolist()) > max_elements:
                raise ValueError(f"state tensor {name!r:.80} declares a shape beyond {max_elements} entries")
            indices = _values(record[key])
            if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= math.prod(dims.tolist())):
                raise ValueError(f"state tensor {name!r:.80} has indices outside its shape")
            sparse[name] = (dims, indices)
    return sparse


def saved_state_mismatch(contexts: object, shapes: dict[str, tuple[int, ...]]) -> str | None:
    """How the clients' states a checkpoint holds (``{node: records_state(...)}``) fail the checks a
    client makes of a restored state (``client_checks.check_memory``: sizes, shapes, names, finite),
    naming the node; None when they pass or are not of that form (``load_state_dict`` says so)."""
    from fedgc.flower.client_checks import ClientRefusal, check_memory
    from fedgc.flower.keys import MEMORY_KEY, PENDING_KEY

    if not isinstance(contexts, dict):
        return None
    elements = sum(math.prod(shape) for shape in shapes.values())
    for node, saved in contexts.items():
        arrays = saved.get("arrays") if isinstance(saved, dict) else None
        if not isinstance(arrays, dict):
            continue
        for key, what in ((MEMORY_KEY, "memory"), (PENDING_KEY, "pending update")):
            tensors = arrays.get(key)
            if not isinstance(tensors, dict) or not all(isinstance(t, torch.Tensor) for t in tensors.values()):
                continue
            try:
                record = ArrayRecord({k: Array(t.detach().cpu().contiguous().numpy()) for k, t in tensors.items()})
                check_memory(unpack_state(record, elements), shapes, what)
            except ClientRefusal as refusal:
                return f"client {node}'s state: {str(refusal).removeprefix(refusal.reason + ': ')}"
            except (ValueError, TypeError, IndexError, KeyError, OverflowError, RuntimeError) as err:
                detail = str(err).splitlines()[0][:160] if str(err) else type(err).__name__
                return f"client {node}'s state: the stored {key}: {detail}"
    return None


def context_state(context: Context) -> dict:
    """A ``Context.state`` as plain tensors and values (what a checkpoint stores)."""
    return records_state(context.state)


def records_state(state: RecordDict) -> dict:
    """A ``RecordDict`` (a node's state, or a reply carrying it) as plain tensors and values."""
    return {
        "arrays": {k: dict(r.to_torch_state_dict()) for k, r in state.array_records.items()},
        "configs": {k: dict(r) for k, r in state.config_records.items()},
        "metrics": {k: dict(r) for k, r in state.metric_records.items()},
    }


def restore_context_state(context: Context, saved: dict) -> None:
    context.state = state_records(saved)


def state_records(saved: dict) -> RecordDict:
    """``records_state``'s inverse."""
    state = RecordDict()
    for key, tensors in saved["arrays"].items():
        state[key] = ArrayRecord({k: v.contiguous() for k, v in tensors.items()})
    for key, values in saved["configs"].items():
        state[key] = ConfigRecord(values)
    for key, values in saved["metrics"].items():
        state[key] = MetricRecord(values)
    return state
