"""A user's policy in a child process that receives only what the information rule allows (issue 14, item 5).

Why: a policy running inside the engine's process can walk the call stack to the trace (reading the future), to the
checker (playing honest only while :func:`verify.check.assert_prefix_consistent` runs), or to the simulator
(zeroing ``cost``, re-marking evicted tokens resident).  Here the engine talks to a stand-in,
:class:`IsolatedPolicy`, whose five interface methods (:mod:`kvcore.engine`) forward the engine's calls as messages
to another process.  That process holds the policy and nothing else of the run: no trace, no simulator, no
optimum -- so none of the tricks above has anything to find, and nothing the policy does there can change the
engine's accounting.

Processes
    :class:`PolicyHost` starts a *host*: a fresh Python interpreter (same executable, same working directory, its
    own session) that has never seen a trace, running :mod:`verify.policy_process`.  It imports the user's
    module (:func:`policies.resolve`: a failure -- including ``sys.exit`` at import -- is one
    :class:`~kvcore.errors.ParameterError` line) and waits.  Every
    run (every engine ``reset``) is served by a fresh fork of the host, which ends with the run: a policy cannot
    carry memory from one run to the next (so it cannot learn a trace in the run that builds an adaptive
    construction and replay it in the run that is measured).  The policy's prints go to stderr.  This is
    isolation from the engine, not a security sandbox: the policy's code still runs with the user's rights
    (files, network).

Protocol (one socket, length-prefixed messages of :mod:`verify.frames`; the engine's calls go as :mod:`marshal`
data, the answers come back as JSON: nothing the policy sends is unpickled or unmarshalled)
    The parent buffers ``reset``/``admit``/``hit``/``observe`` and sends them with the next call that needs an
    answer (``evict``, or ``end`` when the run is over), so a run costs one round trip per eviction.  The run's
    process first announces its pid, answers each message (victims, ``null``, or an error naming the call and the
    step), and after ``end`` or an error exits; the host then reports the exit.  Every answer is awaited at most
    ``call_timeout`` seconds: a policy that does not answer is killed and reported as
    :class:`PolicyTimeout` ("the policy did not answer within S s").  An exception in the policy is a
    :class:`PolicyFailed` naming the call and step; a victim the base class refused is the
    :class:`~kvcore.errors.ContractViolation` it raised.
"""

from __future__ import annotations

import json
import marshal
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from kvcore.errors import ContractViolation, KVToolkitError, ParameterError

from .frames import FrameError, Frames

# How long to wait for the host to report a killed run's exit before giving the host up.
_REAP_SECONDS = 5.0
# Starting the interpreter and importing the policy's module may take longer than one call.
_START_SECONDS = 30.0
_PROJECT_ROOT = str(Path(__file__).resolve().parents[1])


class PolicyFailed(KVToolkitError):
    """The policy raised, or its process ended, while the engine waited for it (one line: call, step, error)."""


class PolicyTimeout(PolicyFailed):
    """The policy did not answer a call within the per-call timeout."""


class _ReportedViolation(ContractViolation):
    """A ContractViolation raised inside the policy's process (by the base class's victim check), re-raised here."""

    def __init__(self, text: str, policy: str, step: int, item: Any):
        Exception.__init__(self, text)
        self.policy, self.step, self.item = policy, step, item


class _NotAnItem:
    """Stands for a victim the policy returned that is not an integer id; the engine refuses it by its repr."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


class PolicyHost:
    """A host process for the policy ``spec`` (``module:Class`` or a registered name) and the stand-ins that talk
    to it.  Create it before any trace exists; :meth:`factory` gives the engine-facing policy factory."""

    def __init__(self, spec: str, params: dict | None = None, call_timeout: float = 2.0):
        if not (isinstance(call_timeout, (int, float)) and np.isfinite(call_timeout) and call_timeout > 0):
            raise ParameterError(f"call timeout = {call_timeout!r}: must be a positive number of seconds")
        self.spec = spec
        self.call_timeout = float(call_timeout)
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([_PROJECT_ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
        code = "from verify.policy_process import host_entry; host_entry()"
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", code, str(theirs.fileno()), json.dumps([spec, params])],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        finally:
            theirs.close()
        self.pid = self._proc.pid
        self._sock = ours
        self._frames = Frames(ours.fileno())
        self._info: dict | None = None
        self._owner: IsolatedPolicy | None = None
        self._pending: list = []
        self._run_pid: int | None = None
        self._dead: str | None = None

    # -- what the engine sees ----------------------------------------------------------------------------------------
    @property
    def info(self) -> dict:
        """The policy's declared metadata; the first access waits for the host to import and build it."""
        if self._info is None:
            reply = self._receive("starting, importing its module and building it", max(_START_SECONDS,
                                                                                         self.call_timeout))
            if "error" in reply:
                self._dead = reply["error"]
                raise ParameterError(reply["error"])
            self._info = reply["ok"]
        return self._info

    def factory(self) -> Callable[[], "IsolatedPolicy"]:
        self.info  # noqa: B018 -- import errors surface here, once
        return lambda: IsolatedPolicy(self)

    def finish(self) -> None:
        """End the current run: deliver its last hook calls and wait for them (raises what the policy raised)."""
        if self._owner is not None:
            self._round_trip(["end"])

    def close(self) -> None:
        """Kill the host and every run process (safe to call twice, from any process)."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self._sock.close()
        except OSError:
            pass
        try:  # reap it when this process started it
            self._proc.wait()
        except ChildProcessError:
            pass

    def detach(self) -> None:
        """Close this process's end of the socket (a process forked after the host, which talks to it, keeps its
        own)."""
        self._sock.close()

    # -- calls from the stand-ins ------------------------------------------------------------------------------------
    def _start_run(self, owner: "IsolatedPolicy", capacity: int, rng: np.random.Generator, model: str) -> None:
        self.finish()
        self._owner = owner
        self._pending = [["reset", int(capacity), str(model), rng.bit_generator.state]]

    def _call(self, owner: "IsolatedPolicy", op: list) -> None:
        self._check_owner(owner)
        self._pending.append(op)

    def _evict(self, owner: "IsolatedPolicy", t: int, need: int, protected) -> list:
        self._check_owner(owner)
        raw = self._round_trip(["evict", int(t), int(need), sorted(int(i) for i in protected)])
        return [_NotAnItem(v["not_an_item"]) if isinstance(v, dict) else v for v in raw]

    def _check_owner(self, owner: "IsolatedPolicy") -> None:
        if owner is not self._owner:
            raise RuntimeError("an isolated policy was called outside its run (another run of its host started)")

    # -- the protocol ------------------------------------------------------------------------------------------------
    def _round_trip(self, op: list):
        if self._dead:
            raise PolicyFailed(f"the policy's process is gone ({self._dead})")
        message = self._pending + [op]
        self._pending = []
        what = _calls(message)
        try:
            self._frames.send(marshal.dumps(message))
            reply = self._receive(what)
            if self._run_pid is None and "pid" in reply:  # a new run's process announces itself first
                self._run_pid = int(reply["pid"])
                reply = self._receive(what)
        except BaseException:  # a timeout, or an interrupted exchange (Ctrl-C): leave the host usable
            self._abort_run()
            raise
        if "ended" in reply:  # the run's process died without answering
            raise self._ended(reply, what)
        if "error" in reply:
            self._await_exit(what)
            if "contract" in reply:
                pol, step, item = reply["contract"]
                raise _ReportedViolation(reply["error"], pol, step, item)
            raise PolicyFailed(f"the policy raised {reply['error']} (in {reply['call']} at step {reply['step']})")
        if op[0] == "end":
            self._await_exit(what)
        elif not isinstance(reply.get("ok"), list):
            raise PolicyFailed(f"the policy's process sent something that is not a list of victims ({what})")
        return reply["ok"]

    def _ended(self, notice: dict, what: str) -> PolicyFailed:
        self._run_pid, self._owner = None, None
        return PolicyFailed(f"the policy's process {notice['ended']} during {what}")

    def _await_exit(self, what: str) -> None:
        try:
            notice = self._receive(what)
        except BaseException:
            self._abort_run()
            raise
        if "ended" not in notice:
            raise RuntimeError(f"isolated policy protocol: expected the run's exit, got {notice!r}")
        self._run_pid, self._owner = None, None

    def _receive(self, what: str, timeout: float | None = None) -> dict:
        timeout = self.call_timeout if timeout is None else timeout
        try:
            ready = self._frames.ready(timeout)
        except OSError:
            ready = True  # recv below reports it
        if not ready:
            raise PolicyTimeout(f"the policy did not answer within {timeout:g} s ({what})")
        try:
            raw = self._frames.recv()
        except FrameError:
            raw = b""  # refused below as not an answer
        except (EOFError, OSError):
            self._dead = "its host process exited"
            raise PolicyFailed(f"the policy's process exited ({what})") from None
        try:
            message = json.loads(raw)
        except ValueError:
            message = None
        if not isinstance(message, dict) or not message.keys() & {"ok", "error", "pid", "ended"}:
            raise PolicyFailed(f"the policy's process sent something that is not an answer ({what})")
        return message

    def _abort_run(self) -> None:
        """Kill the run's process (if any) and read until the host reports its exit; give the host up if it does
        not (it is then killed)."""
        self._pending, self._owner = [], None
        if self._dead:
            return
        if self._run_pid is not None:
            try:
                os.kill(self._run_pid, signal.SIGKILL)
            except OSError:
                pass
        end = time.monotonic() + _REAP_SECONDS
        try:
            while time.monotonic() < end:
                if not self._frames.ready(max(0.0, end - time.monotonic())):
                    break
                notice = json.loads(self._frames.recv())
                if "pid" in notice:
                    self._run_pid = int(notice["pid"])
                    os.kill(self._run_pid, signal.SIGKILL)
                elif "ended" in notice:
                    self._run_pid = None
                    return
        except (EOFError, OSError):
            pass
        self._dead = "it stopped answering"
        self.close()


def _calls(message: list) -> str:
    """The calls a message delivers, for an error: ``calls: observe at step 3, admit at step 4, evict at step 4``."""
    named = [op[0] if op[0] in ("reset", "end") else f"{op[0]} at step {op[1]}" for op in message]
    if len(named) > 4:
        return f"{len(named)} calls: {named[0]} ... {named[-1]}"
    return "calls: " + ", ".join(named)


class IsolatedPolicy:
    """The engine-facing stand-in of a policy held by a :class:`PolicyHost` (the five methods of
    :mod:`kvcore.engine`; metadata read from the policy's declarations)."""

    def __init__(self, host: PolicyHost):
        self._host = host
        info = host.info
        self.name = info["name"]
        self.deterministic = info["deterministic"]
        self.guarantee = info["guarantee"]
        self.weighted = info["weighted"]
        self.lazy = info["lazy"]
        self.signal = info["signal"]
        if info["models"] is not None:
            self.models = frozenset(info["models"])

    def reset(self, capacity: int, rng: np.random.Generator, model: str = "rm") -> None:
        self._host._start_run(self, capacity, rng, model)

    def admit(self, t: int, item: int, cost: float) -> None:
        self._host._call(self, ["admit", int(t), int(item), float(cost)])

    def hit(self, t: int, item: int, cost: float) -> None:
        self._host._call(self, ["hit", int(t), int(item), float(cost)])

    def evict(self, t: int, need: int, protected: frozenset) -> list:
        return self._host._evict(self, t, need, protected)

    def observe(self, t: int, items: np.ndarray, weights: np.ndarray) -> None:
        self._host._call(self, ["observe", int(t), np.asarray(items).tolist(), np.asarray(weights).tolist()])
