"""The child side of :mod:`verify.isolated`: the *host* process that imports and builds a user's policy once, and
the per-run processes forked from it that hold the policy and answer the engine's calls (the protocol is described
in :mod:`verify.isolated`).

Started as ``python -c "from verify.policy_process import host_entry; host_entry()" FD JSON`` by
:class:`verify.isolated.PolicyHost`; everything it sends is JSON, and everything the policy does -- an exception,
``sys.exit``, a victim that is not an item id -- becomes one answer naming the call and the step.  It reads the
engine's messages as :mod:`marshal` data (they come from the engine's process, which it trusts) and answers in
JSON (which the engine's process reads without trusting it).
"""

from __future__ import annotations

import importlib
import json
import marshal
import os
import signal
import sys
from typing import Any

import numpy as np

from kvcore.engine import policy_name, takes_model
from kvcore.errors import ContractViolation, ParameterError
from kvcore.numbers import is_integer
from policies import resolve

from .frames import Frames


def _describe(probe: Any) -> dict:
    """What the engine and the fuzzer may read of a policy: its declared metadata, as JSON-safe values."""
    models = getattr(probe, "models", None)
    guarantee = getattr(probe, "guarantee", None)
    return {"name": policy_name(probe), "deterministic": bool(getattr(probe, "deterministic", True)),
            "guarantee": guarantee if isinstance(guarantee, str) else None,
            "models": sorted(str(m) for m in models) if isinstance(models, (set, frozenset, list, tuple)) else None,
            "weighted": bool(getattr(probe, "weighted", False)), "lazy": bool(getattr(probe, "lazy", True)),
            "signal": getattr(probe, "signal", None) if isinstance(getattr(probe, "signal", None), str) else None}


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__


def _send(conn, obj) -> None:
    conn.send(json.dumps(obj).encode())


def host_entry() -> None:
    """``python -c`` entry of the host process: ``argv = [fd, json([spec, params])]``."""
    conn = Frames(int(sys.argv[1]))
    spec, params = json.loads(sys.argv[2])
    try:
        _host_main(conn, spec, params)
    finally:
        os._exit(0)


def _host_main(conn, spec: str, params: dict | None) -> None:
    """The host: import and build the policy once, then fork one process per run until the socket closes."""
    os.dup2(2, 1)  # the policy's prints go to stderr, never into the fuzzer's report on stdout
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C and kills this process group
    importlib.invalidate_caches()  # a module file written just now must be found
    try:
        factory = resolve(spec, params)
        info = _describe(factory())
    except ParameterError as exc:
        _send(conn, {"error": str(exc)})
        return
    except BaseException as exc:  # noqa: BLE001 -- whatever the user's code does, one line
        _send(conn, {"error": f"policy {spec!r}: cannot build it: {_one_line(exc)}"})
        return
    _send(conn, {"ok": info})
    while True:
        try:
            first = marshal.loads(conn.recv())
        except (EOFError, OSError):
            return
        sys.stdout.flush()
        sys.stderr.flush()
        if not (isinstance(first, list) and first and first[0][0] == "reset"):
            _send(conn, {"ended": "was out of step with the engine (a run must start with reset)"})
            continue
        pid = os.fork()
        if pid == 0:
            try:
                _serve_run(conn, factory, first)
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        how = (f"was killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exited with status {os.WEXITSTATUS(status)}")
        try:  # exactly one notice per run: the answer awaited if the process died without answering
            _send(conn, {"ended": how})
        except OSError:
            return


def _victims(raw) -> list:
    """The policy's victims as JSON: integer ids stay ints, bools stay bools (the engine refuses both kinds of
    non-id), anything else becomes its repr."""
    out = []
    for v in ([] if raw is None else list(raw)):
        if isinstance(v, (bool, np.bool_)):
            out.append(bool(v))
        elif isinstance(v, (int, np.integer)):
            out.append(int(v))
        else:
            out.append({"not_an_item": repr(v)[:80]})
    return out


def _serve_run(conn, factory, message: list) -> None:
    """One run: build a fresh policy, apply every message's calls in order, answer each message."""
    _send(conn, {"pid": os.getpid()})
    policy = None
    while True:
        op = ["reset", None]
        try:
            result = None
            for op in message:
                kind = op[0]
                if kind == "reset":
                    _, k, model, state = op
                    policy = factory()
                    bits = getattr(np.random, state["bit_generator"])()
                    bits.state = state
                    rng = np.random.Generator(bits)
                    policy.reset(k, rng, model) if takes_model(policy.reset) else policy.reset(k, rng)
                elif kind == "admit":
                    policy.admit(op[1], op[2], op[3])
                elif kind == "hit":
                    policy.hit(op[1], op[2], op[3])
                elif kind == "observe":
                    items = np.asarray(op[2], dtype=np.int64)
                    weights = np.asarray(op[3], dtype=np.float64)
                    items.setflags(write=False)
                    weights.setflags(write=False)
                    policy.observe(op[1], items, weights)
                elif kind == "evict":
                    result = _victims(policy.evict(op[1], op[2], frozenset(op[3])))
                elif kind == "end":
                    _send(conn, {"ok": None})
                    return
            _send(conn, {"ok": result})
        except ContractViolation as exc:
            item = exc.item
            item = int(item) if is_integer(item) else (
                None if item is None else repr(item))
            _send(conn, {"error": str(exc), "contract": [str(exc.policy), int(exc.step), item]})
            return
        except BaseException as exc:  # noqa: BLE001 -- the policy's failure, reported in one line
            _send(conn, {"error": _one_line(exc), "call": op[0], "step": op[1] if len(op) > 1 else None})
            return
        message = marshal.loads(conn.recv())
