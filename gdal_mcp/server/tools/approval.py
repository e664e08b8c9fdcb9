"""The approval console's tool: confirmation_status (registered over HTTP with --console only, server/build.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.server.app import App
from gdal_mcp.server.audit import iso
from gdal_mcp.server.tools.registry import READ, tool


class ConfirmationStatus(BaseModel):
    """What confirmation_status answers."""

    confirmation_id: str
    status: str = Field(
        description="pending (the person has not decided), approved (call the tool again with "
        "confirmation_id), denied, expired, void (the arguments or files changed), "
        "used (an approval runs one call)"
    )
    tool: str
    question: str = Field(description="What the person was asked")
    expires: str
    console_url: str


@tool(title="Confirmation status", annotations=READ, tags={"confirm"}, task=False)
async def confirmation_status(
    app: App,
    confirmation_id: Annotated[str, Field(description="The id a confirmation-required error gave")],
) -> ConfirmationStatus:
    """Whether the person decided a parked confirmation in the approval console (HTTP). Once approved,
    call the tool again with the same arguments plus confirmation_id."""
    if app.approvals is None or app.console is None:  # not registered then (server/build.py)
        raise GdalMcpError("unsupported", "the approval console is off (it runs over HTTP with --console)")
    p = app.approvals.get(confirmation_id)
    if p is None:
        raise GdalMcpError(
            "not-found",
            f"no confirmation {confirmation_id} (unknown, or expired long ago); call the tool again to park a new one",
        )
    return ConfirmationStatus(
        confirmation_id=p.id,
        status=p.status,
        tool=p.question.tool,
        question=p.question.message,
        expires=iso(p.expires),
        console_url=app.console.url(),
    )
