"""Hibernating kernels: a kernel's state saved to disk on our side, and put back into a
fresh kernel, all or nothing.

What is saved: every variable of the user's namespace that can be pickled
(with the transfer machinery: out-of-band buffers for arrays and tensors,
cloudpickle for notebook-defined functions and classes), the modules bound to
names (``np`` for ``import numpy as np``, imported again by name), and the
working directory. What cannot be saved (open files, sockets, threads,
generators, locks, anything whose pickling fails) is named with the reason.
Where each variable's tensors and modules lived (``cpu``, ``cuda:0`` ...) is
recorded, and a wake puts them back there when the new kernel has that device,
or leaves them on the CPU with a note naming the variable and the device (a
missing device never fails a wake). Open comms (displayed widgets) do not
survive a wake: they are listed as left out, by comm target, but never block a
save, not even under ``refuse`` (a kernel that once displayed a widget would
never hibernate otherwise; the widget comes back by running its cell again).

The parts:

- :class:`.store.HibernationStore` (``c.HibernationStore.*``): one directory
  per kernel under a private root, written atomically, listed with sizes,
  deleted, and capped (``max_bytes``, ``min_free_bytes``).
- :func:`.snapshot.save`: reads a kernel's state into the store. The kernel is
  never changed; any failure leaves nothing stored.
- :func:`.restore.restore`: puts an entry back into a kernel. Any failure
  leaves the entry as it was, and assigns no variable.
- :data:`.progress.Progress`: both report ``(step, bytes done, bytes in all)``.

How the provisioner is meant to use it (the idle timer, the kernel id kept
alive and the wake on the next execute request are its part)::

    store = HibernationStore(parent=manager)            # one per server process

    # idle past the target's hibernate time:
    try:
        summary = await save(kernel_manager, kernel_id, store, policy, report)
    except SaveError as exc:        # UnsavableStateError, StoreFullError included
        tell_the_user(exc)          # the kernel runs on as it was: stay awake
    else:
        tell_the_user(summary.left_out)   # what did not come along, and why
        release_the_hardware()            # only now: the state is on disk whole

    # the next execute request, or "wake":
    start_a_fresh_kernel()                 # same target, or the one the user picked
    try:
        woke = await restore(kernel_manager, kernel_id, store, entry_id=kernel_id,
                             device=device, progress=report)
    except RestoreError as exc:
        tell_the_user(exc)          # the entry is intact: offer a retry (into the
                                    # same kernel is safe) or another target
    else:
        tell_the_user(woke.notes)   # a working directory that is not there, a tensor
                                    # left on the CPU, widgets to display again ...
        run_the_waiting_cell()
        # keep the entry until the caller no longer needs it; delete it when the
        # kernel is shut down:  store.delete(kernel_id)

``save`` and ``restore`` take the server's kernel manager and a kernel id, or
the kernel's own manager (the provisioner's ``parent``) and its id: they talk
to the kernel over a transfer client of their own. Saving replaces an older
entry of the same id only once the new one is whole, so a kernel that
hibernates, wakes and hibernates again keeps one entry.
"""

from .errors import (
    CorruptEntryError,
    EntryNotFoundError,
    HibernationError,
    RestoreError,
    SaveError,
    StoreFullError,
    UnsavableStateError,
)
from .progress import Progress
from .restore import RestoreSummary, restore
from .snapshot import POLICIES, Policy, SaveSummary, save
from .store import EntryInfo, HibernationStore

__all__ = [
    "POLICIES",
    "CorruptEntryError",
    "EntryInfo",
    "EntryNotFoundError",
    "HibernationError",
    "HibernationStore",
    "Policy",
    "Progress",
    "RestoreError",
    "RestoreSummary",
    "SaveError",
    "SaveSummary",
    "StoreFullError",
    "UnsavableStateError",
    "restore",
    "save",
]
