"""A cell on every rank of an allocation: the engines beside each GPU (or node), and
the ``%%ranks`` magic in the notebook's kernel that drives them.

The notebook's kernel runs on the allocation's first node. ``%%ranks`` starts one
engine per rank there and on every other node, each in a step of the job
(``srun --overlap``), with the environment ``torchrun`` gives (``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``...). An engine's
only channel is its step's standard input and output, which SLURM carries: no port
is opened for it, and only the job's owner can start or reach a step of the job.

Like the rest of this package it runs on hosts: Python 3.8 syntax, standard library
and cloudpickle only (IPython, where the kernel has it, for the engines' cells).
"""

#: The notebook kernel's variable that holds every rank's variables while a hibernation
#: saves the kernel, and after a wake until the first ``%%ranks`` cell gives them back
#: (see :mod:`.saving`). Here, so that the kernel's listing and the server name it
#: without loading the ranks' machinery.
SAVED_NAME = "_ranks_hibernated"
