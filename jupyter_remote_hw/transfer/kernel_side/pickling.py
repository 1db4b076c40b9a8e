"""Variables to bytes and back: pickle protocol 5 with out-of-band buffers.

cloudpickle pickles functions, lambdas and classes defined in the notebook by
value; large buffers (numpy arrays, pandas columns, torch CPU tensors) are
not copied into the pickle but kept aside as ``PickleBuffer`` views of the
object's own memory, to be sent as they are.

Torch tensors are reduced to numpy arrays of the same memory (so they travel
out of band too, where torch's own pickling would copy them into the stream)
and rebuilt with ``torch.from_numpy``; CUDA tensors are copied to the CPU first.
Only torch's own functions appear in the stream, so the receiving side needs
torch but not this package.

Every variable is serialized before any is handed over, so a transfer either
carries all the named variables or fails naming the first one that cannot go.

This module also runs inside kernels on hosts (see ``kernel_handler``): it keeps
to Python 3.8 syntax and needs only cloudpickle.
"""

from __future__ import annotations

import io
import os
import pickle
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

try:
    import cloudpickle
except ImportError:  # on a host without it: the copy shipped next to this package
    sys.path.append(
        os.path.join(
            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "vendor"
        )
    )
    import cloudpickle

from .errors import MissingVariableError, NotSerializableError, TransferError

PROTOCOL = 5

_OPEN_FILES = (io.TextIOWrapper, io.BufferedReader, io.BufferedWriter, io.BufferedRandom, io.FileIO)

#: Plain words for kinds of objects that never pickle, by type name.
_KNOWN_UNPICKLABLE = {
    "generator": "a generator (it holds a running frame)",
    "coroutine": "a coroutine (it holds a running frame)",
    "async_generator": "an async generator (it holds a running frame)",
    "lock": "a lock",
    "RLock": "a lock",
    "socket": "an open socket",
    "Thread": "a thread",
}


@dataclass
class Pickled:
    """One variable, serialized.

    Attributes:
        name: The variable's name.
        type_name: Its type, as ``module.Qualname``.
        data: The pickle stream (without the out-of-band buffers).
        buffers: The out-of-band buffers (``PickleBuffer`` views of the object's
            memory when dumped here; received bytes-like objects otherwise).
    """

    name: str
    type_name: str
    data: bytes | bytearray
    buffers: list[Any] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        """Size of the pickle stream plus its buffers."""
        return len(self.data) + sum(memoryview(b).nbytes for b in self.buffers)


def type_name(obj: object) -> str:
    """``module.Qualname`` of ``obj``'s type (no module for builtins)."""
    kind = type(obj)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def _reason(obj: object, exc: BaseException) -> str:
    plain = _KNOWN_UNPICKLABLE.get(type(obj).__name__)
    detail = f"{type(exc).__name__}: {exc}"
    return f"it is {plain} ({detail})" if plain else detail


def _reduce_tensor(tensor: Any) -> Any:
    """Reduce a dense torch tensor to ``torch.from_numpy`` of a view of its memory.

    Returns NotImplemented for what torch pickles better itself (sparse,
    quantized, meta tensors and tensor subclasses such as ``Parameter``, whose
    reduction refers to a plain tensor that comes back here).
    """
    torch = sys.modules["torch"]
    if tensor.layout != torch.strided or tensor.is_quantized or tensor.device.type == "meta":
        return NotImplemented
    if tensor.requires_grad:
        return (torch.Tensor.requires_grad_, (tensor.detach(),))
    if tensor.device.type != "cpu":
        return (torch.Tensor.clone, (tensor.cpu(),))
    if tensor.is_conj() or tensor.is_neg():
        tensor = tensor.resolve_conj().resolve_neg()
    try:
        array = tensor.numpy()
    except TypeError:  # bfloat16, float8 ...: no numpy dtype; carry the bits
        same_size = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
        bits = same_size.get(tensor.element_size())
        if bits is None:
            return NotImplemented
        return (torch.Tensor.view, (tensor.view(bits), tensor.dtype))
    return (torch.from_numpy, (array,))


class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]
    """cloudpickle, with torch tensors reduced to their memory."""

    def reducer_override(self, obj: Any) -> Any:
        kind = type(obj)
        if kind.__name__ == "Tensor" and kind.__module__ == "torch":
            return _reduce_tensor(obj)
        return super().reducer_override(obj)


def dumps(value: object, buffers: list[pickle.PickleBuffer]) -> bytes:
    """Pickle ``value`` (protocol 5, by value where needed), out-of-band buffers into ``buffers``."""
    stream = io.BytesIO()
    _Pickler(stream, protocol=PROTOCOL, buffer_callback=buffers.append).dump(value)
    return stream.getvalue()


def _refuse_open_file(name: str, value: object) -> None:
    if isinstance(value, _OPEN_FILES):
        # cloudpickle would read a file opened for reading into the pickle:
        # a handle is not its contents, and may be huge.
        raise NotSerializableError(
            name, type_name(value), "it is an open file; send its contents or its path instead"
        )


class _Counter:
    """A write-only stream that keeps only how many bytes went through it."""

    def __init__(self) -> None:
        self.count = 0

    def write(self, data: Any) -> int:
        size = memoryview(data).nbytes
        self.count += size
        return size


def probe_variable(name: str, value: object) -> int:
    """Pickle one variable on trial without keeping the pickle (its out-of-band
    buffers are not copied); the bytes it would take to send.

    Raises:
        NotSerializableError: It cannot be pickled, even by cloudpickle.
    """
    _refuse_open_file(name, value)
    counter = _Counter()
    buffers: list[pickle.PickleBuffer] = []
    try:
        _Pickler(counter, protocol=PROTOCOL, buffer_callback=buffers.append).dump(value)
    except Exception as exc:  # pickling raises TypeError, PicklingError, AttributeError ...
        raise NotSerializableError(name, type_name(value), _reason(value, exc)) from exc
    return counter.count + sum(memoryview(b).nbytes for b in buffers)


def dump_variable(name: str, value: object) -> Pickled:
    """Serialize one variable.

    Raises:
        NotSerializableError: It cannot be pickled, even by cloudpickle.
    """
    _refuse_open_file(name, value)
    buffers: list[pickle.PickleBuffer] = []
    try:
        data = dumps(value, buffers)
    except Exception as exc:  # pickling raises TypeError, PicklingError, AttributeError ...
        raise NotSerializableError(name, type_name(value), _reason(value, exc)) from exc
    return Pickled(name, type_name(value), data, buffers)


def dump_variables(namespace: Mapping[str, Any], names: list[str]) -> list[Pickled]:
    """Serialize every named variable of ``namespace``, or none.

    Raises:
        MissingVariableError: A name is not in ``namespace``.
        NotSerializableError: A variable cannot be pickled; it is the first
            such one in ``names``.
    """
    missing = [name for name in names if name not in namespace]
    if missing:
        raise MissingVariableError(missing[0])
    return [dump_variable(name, namespace[name]) for name in names]


def load_variables(pickled: list[Pickled]) -> dict[str, Any]:
    """Rebuild every variable; the caller assigns them only if all came back.

    Raises:
        TransferError: A variable could not be rebuilt here (for example its
            class's module is not installed on this side).
    """
    values: dict[str, Any] = {}
    for item in pickled:
        try:
            values[item.name] = pickle.loads(item.data, buffers=item.buffers)
        except Exception as exc:
            raise rebuild_error(item, exc) from exc
    return values


def rebuild_error(item: Pickled, exc: BaseException) -> TransferError:
    """The error for a variable whose pickle failed to load on this side."""
    return TransferError(
        f"cannot rebuild {item.name!r} ({item.type_name}) here: "
        f"{type(exc).__name__}: {exc}. Nothing was assigned; install what it needs "
        "on this side.",
        item.name,
    )


def to_segments(pickled: list[Pickled]) -> tuple[list[dict[str, Any]], list[memoryview]]:
    """Lay serialized variables out as a manifest and flat byte segments, without copying.

    Each variable is its pickle stream followed by its out-of-band buffers; its
    manifest entry is ``{"name", "type", "segments": [sizes]}``.
    """
    manifest = []
    segments: list[memoryview] = []
    for item in pickled:
        parts = [memoryview(item.data).cast("B")] + [_raw(buffer) for buffer in item.buffers]
        manifest.append(
            {"name": item.name, "type": item.type_name, "segments": [part.nbytes for part in parts]}
        )
        segments.extend(parts)
    return manifest, segments


def segment_sizes(manifest: list[dict[str, Any]]) -> list[int]:
    """The sizes of every segment a manifest announces, in order."""
    return [int(size) for entry in manifest for size in entry["segments"]]


def from_segments(manifest: list[dict[str, Any]], segments: list[Any]) -> list[Pickled]:
    """The inverse of :func:`to_segments`: serialized variables over received segments."""
    pickled = []
    position = 0
    for entry in manifest:
        count = len(entry["segments"])
        parts = segments[position : position + count]
        position += count
        pickled.append(Pickled(entry["name"], entry["type"], parts[0], list(parts[1:])))
    return pickled


def _raw(buffer: Any) -> memoryview:
    """A flat byte view of an out-of-band buffer (copied only if not contiguous)."""
    if not isinstance(buffer, pickle.PickleBuffer):
        return memoryview(buffer).cast("B")
    try:
        raw: memoryview = buffer.raw()
    except BufferError:
        return memoryview(bytes(memoryview(buffer)))
    return raw
