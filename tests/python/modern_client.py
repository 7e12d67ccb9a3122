"""Drives dossier with the Python MCP SDK (2.3.0), a client nobody on the project wrote.

Usage: modern_client.py URL TOKEN MODE KEY_PREFIX
MODE is the SDK's `mode`: a revision ('2026-07-28') or 'auto' (probe server/discover, fall
back to the handshake). Prints one JSON object: what each step saw, for the test to judge.
"""

import asyncio
import json
import sys
from typing import Any, Literal

import httpx2
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, ElicitResult, Request, Result
from pydantic import BaseModel, ConfigDict, Field

TASKS = "io.modelcontextprotocol/tasks"


class CreateTaskResult(Result):
    """The extension's CreateTaskResult, as SEP-2663 puts it on the wire."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str
    ttl_ms: int | None = Field(default=None, alias="ttlMs")
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")


class TaskParams(BaseModel):
    taskId: str


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class DetailedTask(Result):
    model_config = ConfigDict(extra="allow")
    taskId: str
    status: str
    result: dict[str, Any] | None = None
    inputRequests: dict[str, Any] | None = None


class UpdateParams(BaseModel):
    taskId: str
    inputResponses: dict[str, Any]


class UpdateTask(Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class Ack(Result):
    model_config = ConfigDict(extra="allow")


seen_tasks: list[dict[str, Any]] = []


async def follow(created: CreateTaskResult, ctx: ClaimContext) -> CallToolResult:
    """Polls tasks/get until the task is terminal, answering what it asks through tasks/update
    (the same human as the elicitation callback); its inline result is the call's result."""
    seen = {"task_id": created.task_id, "status": created.status, "ttl_ms": created.ttl_ms, "statuses": []}
    seen_tasks.append(seen)
    for _ in range(240):
        task = await ctx.session.send_request(GetTask(params=TaskParams(taskId=created.task_id)), DetailedTask)
        seen["statuses"].append(task.status)
        if task.status == "input_required":
            answers = {}
            for key, request in (task.inputRequests or {}).items():
                params = request["params"]
                asked.append(params["message"])
                answers[key] = {"action": "accept", "content": {"approve": True}}
            params = UpdateParams(taskId=created.task_id, inputResponses=answers)
            await ctx.session.send_request(UpdateTask(params=params), Ack)
            continue
        if task.status != "working":
            seen_tasks[-1]["final"] = task.status
            return CallToolResult.model_validate(task.result or {"content": [], "isError": True})
        await asyncio.sleep((created.poll_interval_ms or 500) / 1000)
    raise TimeoutError("the task did not finish")


class Tasks(ClientExtension):
    identifier = TASKS

    def claims(self):
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=follow)]


asked: list[str] = []


async def approve(context, params) -> ElicitResult:
    asked.append(params.message)
    return ElicitResult(action="accept", content={"approve": True})


async def main() -> None:
    url, token, mode, prefix = sys.argv[1:5]
    out: dict[str, Any] = {}
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=130) as http:
        # A client without the tasks extension: the approval comes as input_required, answered by the SDK.
        async with Client(
            streamable_http_client(url, http_client=http), mode=mode, elicitation_callback=approve
        ) as client:
            out["protocol_version"] = client.session.protocol_version
            tools = await client.list_tools()
            out["tools"] = [t.name for t in tools.tools]
            args = {"executable": "/usr/bin/uname", "args": ["-s"], "idempotency_key": f"{prefix}-capture"}
            first = await client.call_tool("capture_process_scenario", args)
            out["capture"] = first.structured_content
            out["asked"] = list(asked)
            again = await client.call_tool("capture_process_scenario", args)
            out["retry"] = again.structured_content
            out["asked_after_retry"] = len(asked)
            evidence = out["capture"]["evidence_id"]
            read = await client.read_resource(f"dossier://evidence/{evidence}")
            out["resource"] = json.loads(read.contents[0].text)
        # A client with the tasks extension: the capture is a task that asks, then runs, followed to its end.
        async with Client(
            streamable_http_client(url, http_client=http),
            mode=mode,
            elicitation_callback=approve,
            extensions=[Tasks()],
        ) as client:
            slow = {
                "executable": "/usr/bin/sleep",
                "args": ["2"],
                "idempotency_key": f"{prefix}-task",
                "wait_ms": 100,
            }
            followed = await client.call_tool("capture_process_scenario", slow)
            out["task"] = {"result": followed.structured_content, "seen": seen_tasks, "asked": len(asked)}
    print(json.dumps(out, default=str))


asyncio.run(main())
