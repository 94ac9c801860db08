"""Quiet by default: TensorFlow's start-up noise is dropped from stderr, real errors are not."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from ralp_tf.cli.quiet import is_noise

NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795992409.736671   26235 port.cc:153] oneDNN custom operations are on. You may see slightly "
    "different numerical results due to floating-point round-off errors from different computation orders.",
    "I0000 00:00:1795992409.737830   26235 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will "
    "not be used.",
    "E0000 00:00:1795992412.962624   26235 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed "
    "call to cuInit: UNKNOWN ERROR (303)",
]
REAL = [
    "E0000 00:00:1795992518.402724   28670 add_port.cc:83] Failed to add port to server: No address added",
    "W0000 00:00:1795992518.1   1 grpc_server_lib.cc:618] something the user must see",
    "ralp-tf: error: unknown model 'nosuch'",
    "E0000 00:00:1.0   1 cuda_platform.cc:52] failed call to cuInit: CUDA_ERROR_OUT_OF_MEMORY (2)",
]


def test_noise_and_real_lines_told_apart() -> None:
    assert all(is_noise(line) for line in NOISE)
    assert not any(is_noise(line) for line in REAL)


def _filtered(payload: str) -> str:
    script = textwrap.dedent(f"""
        import os, sys
        from ralp_tf.cli.quiet import filter_stderr
        assert filter_stderr()
        assert not filter_stderr()          # once per stderr
        os.write(2, {payload!r}.encode())
        os._exit(0)                         # what reached the pipe still arrives
    """)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120).stderr.decode()


def test_filter_drops_noise_keeps_errors_and_partial_lines() -> None:
    err = _filtered("\n".join(NOISE[:2] + REAL[:2] + NOISE[2:] + REAL[2:]) + "\nprogress 3/10\r")
    assert err.splitlines()[:-1] == REAL and err.endswith("progress 3/10\r")


@pytest.mark.slow
def test_ralp_tf_is_quiet_unless_verbose() -> None:
    cmd = [sys.executable, "-m", "ralp_tf.cli.main"]
    env = dict(os.environ)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    quiet = subprocess.run(cmd + ["plan", "--model", "small_cnn", "--json"], capture_output=True, text=True,
                           timeout=120, env=env)
    assert quiet.returncode == 0 and quiet.stdout.startswith("{")
    assert not any(is_noise(line) for line in quiet.stderr.splitlines()), quiet.stderr
    loud = subprocess.run(cmd + ["--verbose", "plan", "--model", "small_cnn"], capture_output=True, text=True,
                          timeout=120, env=env)
    assert loud.returncode == 0 and any(is_noise(line) for line in loud.stderr.splitlines())
