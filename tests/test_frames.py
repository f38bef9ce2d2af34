"""verify.frames: whole messages over a stream socket, however the bytes arrive (issue 50: the isolated policy's
round trip)."""

from __future__ import annotations

import os
import socket
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verify.frames import MAX_FRAME, FrameError, Frames


def _in_pieces(payloads: list[bytes], cuts: list[int]) -> list[bytes]:
    """The framed stream of ``payloads`` cut at the positions ``cuts`` (as the kernel may deliver it)."""
    stream = b"".join(struct.pack("!I", len(p)) + p for p in payloads)
    bounds = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    return [stream[a:b] for a, b in zip(bounds, bounds[1:])]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=6), st.lists(st.integers(0, 10 ** 4), max_size=12))
def test_messages_arrive_whole_and_in_order_however_the_stream_is_cut(payloads, cuts):
    ours, theirs = socket.socketpair()
    with ours, theirs:
        for piece in _in_pieces(payloads, cuts):
            theirs.sendall(piece)
        frames = Frames(ours.fileno())
        got = []
        for _ in payloads:
            assert frames.ready(1.0)
            got.append(frames.recv())
        assert got == payloads
        assert not frames.ready(0.01)  # nothing more was sent


def test_a_long_message_sent_slowly_by_another_process():
    """5 MiB in pieces with pauses between them from a forked writer: received whole, then the writer's end."""
    payload = bytes(range(256)) * (5 * 4096)
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        for piece in _in_pieces([payload], [3, 1000, 2 ** 20, 3 * 2 ** 20]):
            theirs.sendall(piece)
            time.sleep(0.02)
        os._exit(0)
    theirs.close()
    with ours:
        frames = Frames(ours.fileno())
        assert frames.recv() == payload
        os.waitpid(pid, 0)
        assert frames.ready(1.0)  # the other end closed: ready, and recv says so
        with pytest.raises(EOFError):
            frames.recv()


def test_send_frames_what_recv_reads():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        Frames(theirs.fileno()).send(b"hello")
        Frames(theirs.fileno()).send(b"")
        frames = Frames(ours.fileno())
        assert (frames.recv(), frames.recv()) == (b"hello", b"")


def test_a_length_above_the_limit_is_refused_without_reading_it():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(struct.pack("!I", MAX_FRAME + 1) + b"x" * 10)
        frames = Frames(ours.fileno())
        assert frames.ready(1.0)
        with pytest.raises(FrameError, match="at most"):
            frames.recv()
