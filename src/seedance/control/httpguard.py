"""``GuardedHttpToolsProtocol``: uvicorn's httptools protocol with a request-header size limit and a
header timeout.

uvicorn's httptools protocol has neither: a 64 MB header is buffered and answered, and a client
that connects and never finishes its request line keeps its connection (and file descriptor)
forever (``timeout_keep_alive`` only runs *between* requests). This subclass

* answers ``431 Request Header Fields Too Large`` and closes once the request line plus headers
  pass ``config.h11_max_incomplete_event_size`` bytes (the same option bounds uvicorn's h11
  protocol, so the limit is one setting whichever parser runs);
* closes a connection whose request headers are not complete ``config.timeout_keep_alive``
  seconds after it opened or after its previous answer (nginx's ``client_header_timeout``).

``seedancectl serve`` passes the class as uvicorn's ``http`` option with the settings
``max_header_bytes`` and ``idle_timeout_s``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

DEFAULT_MAX_HEADER_BYTES = 16 * 1024


class _HeaderTooLarge(Exception):
    """Stops the parser once the header limit is passed (the 431 is already written)."""


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """httptools HTTP/1.1 protocol with a header-size limit and a header timeout (see module doc)."""

    def __init__(self, config: Any, server_state: Any, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.max_header_bytes = int(config.h11_max_incomplete_event_size or DEFAULT_MAX_HEADER_BYTES)
        self.header_timeout_s = float(config.timeout_keep_alive)
        self._header_bytes = 0
        self._header_timer: asyncio.TimerHandle | None = None
        self._refused = False

    # -- header timeout -------------------------------------------------------------------------
    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._header_timeout)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_bytes = 0
        self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._disarm_header_timer()
        super().on_headers_complete()

    # -- header size ----------------------------------------------------------------------------
    def _count(self, n: int) -> None:
        self._header_bytes += n
        if self._header_bytes > self.max_header_bytes and not self._refused:
            self._refused = True
            body = f"request line and headers larger than {self.max_header_bytes} bytes".encode()
            self.transport.write(
                b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
                b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body)
            self.transport.close()
            raise _HeaderTooLarge

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def data_received(self, data: bytes) -> None:
        if not self._refused:
            super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        if not self._refused:  # the parser error is our own stop: the 431 is out already
            super().send_400_response(msg)
