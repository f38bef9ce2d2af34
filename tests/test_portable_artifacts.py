"""The committed artifacts do not depend on the CPU (issue 53): the main job run under a different CPU-feature set --
numpy's run-time dispatch (``NPY_DISABLE_CPU_FEATURES``, every SIMD target this machine has turned off, so numpy
runs its baseline loops instead of AVX2/AVX-512 and SVML) and glibc's (``GLIBC_TUNABLES``, its FMA/AVX2 builds of
``exp``/``log``/``pow`` turned off) -- writes every figure, counterexample and report byte for byte as committed.
It runs serially (``--jobs 1``) while ``tests/test_paper_check_run.py`` runs on every core: both equal to the committed
files, the parallel main job's output equals the serial one's (issue 54).

Before :mod:`kvcore.portable_math` this failed on this project's AVX-512 machine with four log-axis PNGs and two
persistent-trace counterexamples differing, the same files a machine without AVX-512 reported."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# glibc >= 2.33 spells these without the old "_Usable" suffix; names it does not know are ignored, hence both
GLIBC_OFF = "glibc.cpu.hwcaps=-AVX2,-FMA,-FMA4,-AVX512F,-AVX2_Usable,-FMA_Usable,-FMA4_Usable,-AVX512F_Usable"
_DISPATCH = ("import json, numpy; c = getattr(numpy, '_core', None) or numpy.core; m = c._multiarray_umath; "
             "print(json.dumps([f for f in m.__cpu_dispatch__ if m.__cpu_features__.get(f)]))")


def _dispatch_targets(env: dict) -> list[str]:
    """numpy's SIMD dispatch targets enabled in a child started with ``env``."""
    out = subprocess.run([sys.executable, "-c", _DISPATCH], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout)


def test_the_main_job_writes_the_committed_bytes_under_another_cpu_feature_set(tmp_path):
    dispatch = _dispatch_targets(dict(os.environ))
    env = {**os.environ, "GLIBC_TUNABLES": GLIBC_OFF}
    if dispatch:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(dispatch)
    still = _dispatch_targets(env)
    assert not still, f"numpy kept {still} enabled: the child would run the same loops"
    p = subprocess.run([sys.executable, "-m", "paper_check", "--jobs", "1", "--out", str(tmp_path)], capture_output=True, text=True,
                       timeout=1200, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    written = sorted(f.relative_to(tmp_path) for f in tmp_path.rglob("*") if f.is_file())
    assert written, "the run wrote nothing"
    differ = [str(rel) for rel in written if (tmp_path / rel).read_bytes() != (ROOT / rel).read_bytes()]
    assert not differ, f"with {dispatch or 'no SIMD target'} disabled these differ from the committed files: {differ}"
