"""The fake upstream's WebSocket endpoint, a stand-in for the Realtime API and the Responses
API's WebSocket mode: it records each handshake, accepts with the first subprotocol offered,
says `session.created`, then echoes (text as `echo:<text>`, binary reversed). The text
`close` makes it close with 4001 "bye"; `?deny=1` refuses the handshake with a 403."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.responses import Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from tests.fakes import openai_rules as rules

DENIED = rules.error_body("Realtime is not enabled for this key.", None, "forbidden")


def realtime_endpoint(
    record: Callable[[WebSocket], None], closed: list[int]
) -> Callable[[WebSocket], Awaitable[None]]:
    """The endpoint; `record` notes each handshake, `closed` gets each client close code."""

    async def endpoint(websocket: WebSocket) -> None:
        record(websocket)
        if websocket.query_params.get("deny"):
            denial = Response(DENIED, 403, {"content-type": "application/json"})
            await websocket.send_denial_response(denial)
            return
        offered = websocket.scope.get("subprotocols") or []
        await websocket.accept(subprotocol=offered[0] if offered else None)
        await websocket.send_text('{"type": "session.created"}')
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    closed.append(message.get("code", 1000))
                    return
                text = message.get("text")
                if text == "close":
                    await websocket.close(4001, "bye")
                    return
                if text is not None:
                    await websocket.send_text(f"echo:{text}")
                else:
                    await websocket.send_bytes(bytes(message.get("bytes") or b"")[::-1])
        except WebSocketDisconnect as gone:
            closed.append(gone.code)

    return endpoint
