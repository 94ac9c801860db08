"""Quiet by default: TensorFlow's start-up noise is dropped from a command's stderr.

On a CPU-only machine every TensorFlow import writes, from C++, before any Python code can
configure logging: absl's ``WARNING: All log messages before absl::InitializeLog() is called are
written to STDERR``, the oneDNN notice (``port.cc``), the cudart stub's ``Could not find cuda
drivers`` and ``failed call to cuInit: ... UNKNOWN ERROR (303)`` -- which users read as a failure.
:func:`filter_stderr` routes file descriptor 2 through a small filter process that drops exactly
those lines (:func:`is_noise`) and passes everything else through at once, real errors and
warnings included (``TF_CPP_MIN_LOG_LEVEL`` is not raised, since that would hide them too).

The filter is a forked child, not a thread, so output written just before ``os._exit`` or a
crash still arrives; it ignores SIGINT/SIGTERM and exits when the last writer closes the pipe.
Processes the command ``exec``s or starts with inherited stderr are filtered too. A text without
a newline yet (a progress bar redrawn with ``\\r``) is passed through at once unless it may be
the start of a noise line. ``ralp-tf --verbose`` leaves stderr alone.
"""
from __future__ import annotations

import os
import re
import signal
import sys

__all__ = ["NOISE", "is_noise", "stderr_is_tty", "filter_stderr"]

#: Lines dropped: the absl pre-init banner and TF's CPU-only start-up notices.
NOISE = re.compile(
    r"^(?:WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|I\d{4} [\d:.]+\s+\d+ port\.cc:\d+\] oneDNN custom operations are on\..*"
    r"|[IW]\d{4} [\d:.]+\s+\d+ cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine.*"
    r"|E\d{4} [\d:.]+\s+\d+ cuda_platform\.cc:\d+\] failed call to cuInit: .*\(303\)"
    r"|I\d{4} [\d:.]+\s+\d+ cpu_feature_guard\.cc:\d+\] This TensorFlow binary is optimized to use .*"
    r")\s*$")
_MAY_START_NOISE = re.compile(r"^(?:W(?:A(?:R(?:N(?:I(?:N(?:G(?::.*)?)?)?)?)?)?)?|[IWE]\d{0,4}(?: .*)?)$")
#: Set in the environment once stderr is filtered: the pipe's inode, and whether the real stderr is a TTY.
ENV_PIPE, ENV_TTY = "RALP_TF_STDERR_FILTER", "RALP_TF_STDERR_TTY"


def is_noise(line: str) -> bool:
    """Whether ``line`` (without its newline) is TensorFlow start-up noise (:data:`NOISE`)."""
    return bool(NOISE.match(line))


def stderr_is_tty() -> bool:
    """Whether this process's stderr reaches a terminal, through the filter or not."""
    if os.environ.get(ENV_PIPE) and _fd2_inode() == os.environ[ENV_PIPE]:
        return os.environ.get(ENV_TTY) == "1"
    return sys.stderr.isatty()


def _fd2_inode() -> str:
    try:
        return str(os.fstat(2).st_ino)
    except OSError:
        return ""


def _pump(src: int, dst: int) -> None:
    """Copy ``src`` to ``dst`` until EOF, dropping noise lines (see the module docstring)."""
    pending = b""
    while True:
        chunk = os.read(src, 65536)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        out = b"".join(line + b"\n" for line in lines if not is_noise(line.decode("utf-8", "replace")))
        tail = pending.decode("utf-8", "replace")
        if pending and not _MAY_START_NOISE.match(tail.rsplit("\r", 1)[-1]):
            out, pending = out + pending, b""
        if out:
            os.write(dst, out)
    if pending and not is_noise(pending.decode("utf-8", "replace")):
        os.write(dst, pending)


def filter_stderr() -> bool:
    """Route fd 2 through a noise filter process (once per stderr); return whether one was installed."""
    if os.environ.get(ENV_PIPE) and _fd2_inode() == os.environ[ENV_PIPE]:
        return False  # already filtered (e.g. this process was re-executed)
    try:
        tty = os.isatty(2)
        read_fd, write_fd = os.pipe()
    except OSError:
        return False
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the filter
        try:
            os.close(write_fd)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)  # a reader of the command's stdout must not wait for this process
            _pump(read_fd, 2)
        finally:
            os._exit(0)
    os.close(read_fd)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    os.environ[ENV_PIPE] = _fd2_inode()
    os.environ[ENV_TTY] = "1" if tty else "0"
    return True
