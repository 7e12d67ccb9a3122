"""Drives `dossier mcp --stdio` with the Python MCP SDK (2.3.0) in a given mode.

Usage: stdio_client.py MODE KEY_PREFIX COMMAND [ARGS...]
MODE is the SDK's `mode`: '2026-07-28', 'auto' or 'legacy'. The server process gets this
process's environment (DOSSIER_TOKEN and the rest). Prints one JSON object: what each step saw.
"""

import asyncio
import json
import os
import sys
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def main() -> None:
    mode, prefix, command, *args = sys.argv[1:]
    server = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    out: dict[str, Any] = {}
    async with Client(server, mode=mode) as client:
        out["protocol_version"] = client.session.protocol_version
        out["tools"] = [t.name for t in (await client.list_tools()).tools]
        out["whoami"] = (await client.call_tool("whoami", {})).structured_content
        key = {"executable": "/usr/bin/true", "idempotency_key": f"{prefix}-true"}
        out["capture"] = (await client.call_tool("capture_process_scenario", key)).structured_content
        out["retry"] = (await client.call_tool("capture_process_scenario", key)).structured_content
        enabled = await client.call_tool("enable_toolsets", {"toolsets": ["devices"]})
        out["enable"] = enabled.structured_content
    print(json.dumps(out, default=str))


asyncio.run(main())
