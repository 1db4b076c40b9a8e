"""A TCP echo server for test hosts: ``python echo_server.py HOST PORT``.

Started on a test host (inside its network namespace, when it has one) so that
forwards can be checked end to end. Exits on SIGTERM.
"""

from __future__ import annotations

import asyncio
import sys


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def _main(host: str, port: int) -> None:
    server = await asyncio.start_server(_echo, host, port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1], int(sys.argv[2])))
