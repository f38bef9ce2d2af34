"""Length-prefixed messages over one end of a stream socket, for :mod:`verify.isolated` and its policy process.

Why not :class:`multiprocessing.connection.Connection`: an isolated policy costs one round trip per eviction, and a
round trip is most of the cost of fuzzing a plain-Python policy (issue 50: about 48 microseconds per request).  A
``Connection`` reads a message's header and its body in two system calls; here every message that arrives whole
(the usual case: they are short) is taken in one read, and a reader asking with a timeout polls a ``select.poll``
object made once.  A message is a 4-byte big-endian length and that many bytes; a length above ``MAX_FRAME`` is an
error (a policy's process cannot make the engine's process allocate without bound).
"""

from __future__ import annotations

import os
import select
import struct
import time

MAX_FRAME = 1 << 28  # bytes; the engine's messages and a policy's answers are far shorter
_HEADER = struct.Struct("!I")


class FrameError(OSError):
    """The other end sent a frame longer than ``MAX_FRAME``."""


class Frames:
    """Send and receive whole messages on the socket file descriptor ``fd`` (which this object does not own)."""

    def __init__(self, fd: int):
        self.fd = fd
        self._buffer = bytearray()
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)

    def send(self, payload: bytes) -> None:
        view = memoryview(_HEADER.pack(len(payload)) + payload)
        while view:
            view = view[os.write(self.fd, view):]

    def _whole(self) -> bytes | None:
        """The first buffered message, if it has arrived whole."""
        if not self._has_whole():
            return None
        buf = self._buffer
        (n,) = _HEADER.unpack_from(buf)
        if n > MAX_FRAME:
            raise FrameError(f"a message of {n} bytes (at most {MAX_FRAME})")
        message = bytes(buf[4:4 + n])
        del buf[:4 + n]
        return message

    def ready(self, timeout: float | None) -> bool:
        """Whether a whole message can be received within ``timeout`` seconds (None: wait as long as it takes);
        True also when the other end has closed (then :meth:`recv` raises EOFError)."""
        if self._has_whole():
            return True
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if end is None else max(0.0, end - time.monotonic())
            if not self._poll.poll(None if left is None else left * 1000.0):
                return False
            if self._read() == 0 or self._has_whole():
                return True
            if end is not None and time.monotonic() >= end:
                return False

    def recv(self) -> bytes:
        """The next message, waiting for it as long as it takes; EOFError when the other end has closed."""
        while True:
            message = self._whole()
            if message is not None:
                return message
            if self._read() == 0:
                raise EOFError("the other end closed the socket")

    def _has_whole(self) -> bool:
        """A whole message is buffered (or a header too long to wait for, which :meth:`recv` refuses)."""
        buf = self._buffer
        if len(buf) < 4:
            return False
        (n,) = _HEADER.unpack_from(buf)
        return n > MAX_FRAME or len(buf) >= 4 + n

    def _read(self) -> int:
        """One read of what has arrived (as much as the message still missing, at least 64 KiB, at most 4 MiB)."""
        buf = self._buffer
        missing = 4 + _HEADER.unpack_from(buf)[0] - len(buf) if len(buf) >= 4 else 4 - len(buf)
        chunk = os.read(self.fd, min(max(1 << 16, missing), 1 << 22))
        buf += chunk
        return len(chunk)
