"""TCP forwarders: ``python -m ctas_devstack.forward LISTEN_HOST:PORT=TARGET_HOST:PORT ...``.

Inside a cluster's own network (``netns.py``) they give its processes the few services of the host
that a cluster reaches in production (the metastore), at the addresses their configuration names.
"""

from __future__ import annotations

import asyncio
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


def _handler(host: str, port: int):  # type: ignore[no-untyped-def]
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))

    return handle


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


async def main(pairs: list[str]) -> None:
    servers = []
    for pair in pairs:
        listen, target = (_address(part) for part in pair.split("=", 1))
        servers.append(await asyncio.start_server(_handler(*target), *listen))
    print("forwarding " + " ".join(pairs), flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
