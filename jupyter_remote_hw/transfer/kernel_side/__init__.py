"""The part of transfers that runs inside kernels: the kernel's transfer handler, its
bulk streams and state files, and the format both sides share (pickling, the restricted
loader and its allowlist, the protocol, errors).

The agent's zipapp carries this package, and only it, to hosts (under a private name:
see :mod:`...agent_client.bundle`), so a module here imports nothing outside it. The
server and the user's kernel use it through :mod:`..client` and the modules beside it.
"""
