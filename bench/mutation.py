"""``python -m bench.mutation --module PATH [--module PATH ...] [--sample N] [--seed S] [--workers W]``: a mutation
score, measured (issue 51).  Needs the ``[mutation]`` extra (cosmic-ray); not part of the test run.

For each module, cosmic-ray's core operators list every mutation of the source (an operator replaced, a comparison
flipped, a number moved by one, a ``break`` made ``continue``, ...); ``--sample N`` of them are drawn with ``--seed``
(all with ``--sample 0``) and each is applied by cosmic-ray (:func:`cosmic_ray.mutating.mutate_and_test`) in a
scratch copy of the checkout, where the module's tests run under the CI profile (``CI=1``, ``pytest -x -q -p
no:cacheprovider``).  A mutant is *killed* when the tests fail or time out (``--timeout``, default 300 s: a mutant
that loops forever), *survives* when they pass, and is *incompetent* when they cannot even start; the score is
killed / (killed + survived).  ``--workers`` copies (default 2, one per core) run the sample in parallel, each in its
own copy and numba cache, so the checkout itself is never mutated.

The modules it is configured for are :data:`SCOPE` (``kvcore/``, ``verify/``, ``policies/``, the significance
margin, the quality schedules, the reference cache).  The tests of a module: ``--tests FILE`` (repeatable), else
every ``tests/test_*.py`` and ``theorems/test_*.py`` naming the module's dotted name (``kvcore.optima.allocation``).
Printed: one line per module (mutations, sampled, killed, survived, incompetent, score, wall seconds);
``--survivors FILE`` also writes every survivor with its diff as JSON, the list ``bench/mutation_survivors.md``
accounts for.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from kvcore.command import Command, output_file
from kvcore.errors import ParameterError
from kvcore.numbers import whole_number

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("kvcore", "policies", "adversary", "figures", "realtrace", "verify", "theorems", "paper_check", "bench",
          "tests", "conftest.py", "pyproject.toml")
# what the benchmark is configured for (issue 51): the core, the fuzzer, the policies, the significance margin, the
# quality schedules and the reference cache's keys
SCOPE = ("kvcore/", "verify/", "policies/", "theorems/claims/significance.py", "realtrace/quality/schedule.py",
         "realtrace/quality/cache.py")
SKIPPED = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", "*.nbi", "*.nbc")


def all_mutations(module: str) -> list:
    """Every mutation cosmic-ray's core operators make of ``module`` (a path relative to the checkout), in its order
    (cosmic-ray's own enumeration, the one ``cosmic-ray init`` stores), each naming the module relative to the
    checkout, so that it applies in a copy."""
    import attrs
    from cosmic_ray.commands.init import _all_work_items

    return [attrs.evolve(item.mutations[0], module_path=module) for item in _all_work_items([ROOT / module], {})]


def tests_for(module: str) -> list[str]:
    """The test files that name the module's dotted name (module docstring)."""
    dotted = module.removesuffix(".py").replace("/", ".")
    pattern = re.compile(rf"\b{re.escape(dotted)}\b|from {re.escape(dotted.rsplit('.', 1)[0])} import .*\b"
                         rf"{re.escape(dotted.rsplit('.', 1)[1])}\b")
    return [str(p.relative_to(ROOT)) for folder in ("tests", "theorems")
            for p in sorted((ROOT / folder).glob("test_*.py")) if pattern.search(p.read_text(encoding="utf-8"))]


def _copy(dest: Path) -> None:
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=SKIPPED)
        else:
            shutil.copy2(src, dest / name)


def _work(args: tuple) -> list[dict]:
    """One worker: its own copy of the checkout, its mutations applied and tested one at a time."""
    from cosmic_ray.mutating import mutate_and_test

    mutations, tests, timeout = args
    scratch = Path(tempfile.mkdtemp(prefix="kv-mutation-"))
    try:
        _copy(scratch)
        os.chdir(scratch)
        os.environ.update({"PYTHONPATH": str(scratch), "CI": "1", "NUMBA_CACHE_DIR": str(scratch / ".numba")})
        command = f"{sys.executable} -m pytest -x -q -p no:cacheprovider " + " ".join(tests)
        out = []
        for m in mutations:
            t0 = time.monotonic()
            result = mutate_and_test([m], command, timeout)
            outcome = (result.test_outcome or result.worker_outcome).value
            out.append({"operator": m.operator_name, "occurrence": m.occurrence, "line": m.start_pos[0],
                        "definition": m.definition_name, "outcome": outcome, "diff": result.diff,
                        "seconds": round(time.monotonic() - t0, 1)})
        return out
    finally:
        os.chdir(ROOT)
        shutil.rmtree(scratch, ignore_errors=True)


def measure(module: str, sample: int, seed: int, workers: int, timeout: float, tests: list[str] | None = None,
            say=lambda msg: None) -> dict:
    """The score of ``module`` on a sample of its mutations (module docstring)."""
    if not module.endswith(".py") or not (ROOT / module).is_file():
        raise ParameterError(f"--module {module}: no such source file in {ROOT}")
    if not module.startswith(SCOPE):
        raise ParameterError(f"--module {module}: outside the configured scope ({', '.join(SCOPE)})")
    tests = tests or tests_for(module)
    if not tests:
        raise ParameterError(f"--module {module}: no test file names it; give --tests FILE")
    everything = all_mutations(module)
    chosen = everything if sample == 0 or sample >= len(everything) else \
        random.Random(seed).sample(everything, sample)
    say(f"{module}: {len(chosen)} of {len(everything)} mutations, tests {' '.join(tests)}")
    t0 = time.monotonic()
    shares = [(chosen[w::workers], tests, timeout) for w in range(workers) if chosen[w::workers]]
    with ProcessPoolExecutor(max_workers=len(shares)) as pool:
        results = [r for part in pool.map(_work, shares) for r in part]
    killed = sum(r["outcome"] == "killed" for r in results)
    survived = [r for r in results if r["outcome"] == "survived"]
    return {"module": module, "mutations": len(everything), "sampled": len(chosen), "seed": seed, "tests": tests,
            "killed": killed, "survived": len(survived),
            "incompetent": len(results) - killed - len(survived),
            "score": killed / max(killed + len(survived), 1), "seconds": round(time.monotonic() - t0, 1),
            "survivors": survived}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--module", action="append", required=True, metavar="PATH",
                    help="a source file relative to the checkout, e.g. kvcore/optima/allocation.py (repeatable)")
    ap.add_argument("--sample", type=whole_number(0), default=40,
                    help="mutations drawn per module (default 40; 0: every one)")
    ap.add_argument("--seed", type=whole_number(0), default=0, help="the sample's seed (default 0)")
    ap.add_argument("--workers", type=whole_number(1), default=2, help="parallel copies (default 2: one per core)")
    ap.add_argument("--timeout", type=whole_number(1), default=300,
                    help="seconds a mutant's tests may take before it counts as killed (default 300)")
    ap.add_argument("--tests", action="append", default=None, metavar="FILE",
                    help="the test files to run (repeatable; default: every test file naming the module)")
    ap.add_argument("--survivors", type=output_file, default=None, metavar="FILE",
                    help="also write every survivor with its diff as JSON")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON document")


def run(args: argparse.Namespace) -> int:
    try:
        import cosmic_ray  # noqa: F401 -- checked before any copy is made
    except ImportError:
        raise ParameterError("the mutation benchmark needs cosmic-ray: pip install -e '.[mutation]'") from None
    say = (lambda msg: sys.stderr.write(msg + "\n"))
    res = [measure(m, args.sample, args.seed, args.workers, args.timeout, args.tests, say) for m in args.module]
    if args.survivors:
        from kvcore.atomic import write_text

        write_text(args.survivors, json.dumps([{k: r[k] for k in ("module", "seed", "sampled", "survivors")}
                                               for r in res], indent=1) + "\n")
    if args.json:
        sys.stdout.write(json.dumps(res, indent=1) + "\n")
        return 0
    lines = [f"mutation score (cosmic-ray core operators, seed {args.seed}): killed / (killed + survived)"]
    for r in res:
        lines.append(f"  {r['module']:<40} {r['sampled']:>4} of {r['mutations']:>5} mutations  killed {r['killed']:>4}"
                     f"  survived {r['survived']:>3}  incompetent {r['incompetent']:>3}  score {r['score']:.1%}  "
                     f"({r['seconds']:.0f} s)")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


COMMAND = Command(prog="python -m bench.mutation", description="A mutation score per module: a seeded sample of "
                  "cosmic-ray's mutations, each tested in a scratch copy of the checkout.", add_arguments=add_arguments,
                  run=run)

if __name__ == "__main__":
    from kvcore.command import entry

    entry(COMMAND.prog, lambda: COMMAND.main)
