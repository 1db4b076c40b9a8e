"""The transfer protocol between a client and a kernel: message names and sizes.

A request is a shell message of type :data:`REQUEST` whose content has an
``op``; the kernel answers with :data:`REPLY` to that client alone (a comm's
messages from the kernel go out on IOPub to every frontend, which for a
gigabyte would mean every open browser tab receiving it). The same requests
are answered on the comm target :data:`COMM_TARGET`, for frontends that speak
comms only.

Each variable travels as segments: its pickle stream, then its out-of-band
buffers. A manifest entry is ``{"name", "type", "segments": [sizes]}``.

Ops (client to kernel):

``hello``
    Protocol version and the kernel's Python.
``list`` (check)
    The kernel's variables with their types and sizes, and the modules bound
    to names (``{"name": "np", "module": "numpy", "importable"}``). With
    ``check``, each variable is pickled on trial: ``carriable`` and, when
    not, the ``reason``.
``import`` (modules)
    Import each ``{"name", "module"}`` and bind it to its name; answers
    ``imported`` and ``failed`` (with the ``reason``).
``receive`` (id, variables, device, commit, stream, parts)
    Announce an incoming transfer; buffers carry whole segments in order
    when it is small. With ``commit`` it is assigned at once. With
    ``stream`` the kernel answers the ``port``, ``token`` and ``parts`` of a
    bulk stream (``bulk.py``) to send every segment through, instead of
    ``chunk`` requests: ``parts`` connections at most ``parts`` asked (one
    when not asked), each carrying its range of the bytes.
``chunk`` (id, segment, offset)
    One buffer of a segment.
``commit`` (id)
    Rebuild every variable, move it to the device, assign them all, or none.
``abort`` (id)
    Forget an incoming or outgoing transfer.
``send`` (id, names, inline, stream, parts)
    Serialize the named variables; answer the manifest, with every segment
    as buffers when the total is at most ``inline`` bytes. Otherwise, with
    ``stream``, also the ``port``, ``token`` and ``parts`` of a bulk stream
    that sends every segment (over ``parts`` connections, as for ``receive``).
``read`` (id, segment, offset, size)
    One buffer of an outgoing segment.
"""

from __future__ import annotations

REQUEST = "remote_hw_transfer_request"
REPLY = "remote_hw_transfer_reply"
COMM_TARGET = "jupyter_remote_hw.transfer"
VERSION = 1

#: Bytes per chunk message.
CHUNK_SIZE = 1024 * 1024
#: Chunk messages in flight at once (so at most this many chunks are buffered).
WINDOW = 16
#: Transfers up to this size go in one message each way.
INLINE_LIMIT = 1024 * 1024
#: Seconds after which a transfer with no request is forgotten by the kernel
#: (one whose bulk stream is still moving bytes is kept).
STALE_AFTER = 600.0
#: Seconds a ``commit`` waits for the last bytes of a bulk stream.
COMMIT_WAIT = 30.0
#: Connections (SSH channels) a client asks to split a large bulk stream over:
#: each channel moves at most its window per round trip, so over a long link
#: several at once move several times as much.
CHANNELS = 8
