"""The exceptions ralp_tf raises for bad input. Every message names the problem and the fix."""
from __future__ import annotations

import enum
import json
import math
import os
from typing import Any

__all__ = ["RalpError", "ValidationError", "PlanError", "ClusterConfigError", "CalibrationError", "PlacementMismatchError",
           "ModelError", "KerasVersionError", "ClusterRuntimeError", "CommandFailed", "ExitCode", "exit_code_for", "check_int",
           "writable_dir", "writable_file", "max_json_bytes", "parse_json", "read_json_file"]


class RalpError(Exception):
    """Base class of every error ralp_tf raises on purpose."""


class ValidationError(RalpError, ValueError):
    """An input (plan, cluster, workload, argument) is malformed or inconsistent."""


class PlanError(ValidationError):
    """A Plan names layers or devices that do not exist, or cannot be applied."""


class ClusterConfigError(ValidationError):
    """A cluster description (TF_CONFIG, ClusterSpec, bandwidth, local shape) is invalid."""


class CalibrationError(ValidationError):
    """A calibration file (``ralp-tf calibrate``) is malformed, stale, or of another cluster."""


class PlacementMismatchError(PlanError):
    """A placed model's variables or ops are not where its Plan says (found by tracing a step)."""


class ModelError(ValidationError):
    """A model cannot be profiled or placed (wrong Keras, not built, subclassed...)."""


class KerasVersionError(ModelError, TypeError):
    """A Keras 3 model was given where tf_keras (Keras 2) is required."""


class ClusterRuntimeError(RalpError, RuntimeError):
    """A local cluster task failed to start or died."""


class CommandFailed(RalpError):
    """A command's input was valid but the request cannot be carried out (e.g. no schedule meets
    the constraints, a port is taken): command-line exit status 3."""


class ExitCode(enum.IntEnum):
    """The exit statuses of every ralp_tf command (the table of :mod:`ralp_tf.cli.args`)."""

    OK = 0
    FAILURE = 1
    BAD_INPUT = 2
    NOT_DONE = 3
    INTERRUPTED = 130


def exit_code_for(exc: BaseException) -> ExitCode:
    """The exit status a command ends with when it raised ``exc``: 3 when a cluster task failed or
    the request could not be carried out, 2 for bad input, 130 for Ctrl-C, 1 for anything else."""
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    if isinstance(exc, (ClusterRuntimeError, CommandFailed)):
        return ExitCode.NOT_DONE
    if isinstance(exc, RalpError):
        return ExitCode.BAD_INPUT
    return ExitCode.FAILURE


def check_int(value: Any, name: str, *, minimum: int = 1, error: type[ValidationError] = ValidationError,
              hint: str = "") -> int:
    """Return ``value`` as an ``int`` if it is a whole number (``int`` or a NumPy integer, never a
    ``bool``) of at least ``minimum``; else raise ``error`` naming ``name``: "<name> must be a
    positive integer, got 0" (``minimum`` 1), "... a non-negative integer ..." (0) or "... an integer
    >= <minimum> ...", followed by "; <hint>" when ``hint`` is given. The one validator of integer
    arguments of the Python API; command-line arguments use :mod:`ralp_tf.cli.args`."""
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        kind = {1: "a positive integer", 0: "a non-negative integer"}.get(minimum, f"an integer >= {minimum}")
        raise error(f"{name} must be {kind}, got {value!r}" + (f"; {hint}" if hint else ""))
    return int(value)


#: Deepest nesting of arrays/objects any input JSON may have. Real plans, profiles, TF_CONFIGs,
#: workloads and catalogs nest at most 4 levels; 64 leaves ample room.
MAX_JSON_DEPTH = 64
#: Largest input JSON, in bytes (characters for text given as ``str``): far above any real plan,
#: profile or workload (the largest shipped workload is under 100 KB). Override with the
#: environment variable named by :data:`MAX_JSON_BYTES_ENV`.
#: Longest integer literal in input JSON (Python's own default cap on int/str conversion).
MAX_JSON_INT_DIGITS = 4300
DEFAULT_MAX_JSON_BYTES = 64 * 2**20
MAX_JSON_BYTES_ENV = "RALP_TF_MAX_JSON_BYTES"


def _path_text(path: str | os.PathLike[str], what: str) -> str:
    """``path`` as text, or ValidationError when no file can have that name (empty, a NUL byte)."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text or "\0" in text:
        raise ValidationError(f"{what} {text!r} is not a usable path (empty or holding a NUL byte); pass a real path")
    return text


def _cannot(what: str, text: str, doing: str, exc: OSError, fix: str) -> ValidationError:
    return ValidationError(f"{what} {text!r} cannot be written: {doing} fails with {exc.strerror or exc!s}; {fix}")


def _try_in_folder(folder: str, what: str, text: str, fix: str) -> None:
    """Create and remove a file in ``folder``, the one test that holds for root (``os.access`` says
    yes to root on ``/proc`` or a read-only mount)."""
    import tempfile

    try:
        fd, probe = tempfile.mkstemp(prefix=".ralp-tf-probe-", dir=folder)
    except OSError as exc:
        raise _cannot(what, text, f"creating a file in {folder!r}", exc, fix) from None
    os.close(fd)
    os.unlink(probe)


def _nearest_existing(text: str) -> tuple[str, list[str]]:
    """The nearest folder of ``text`` (``text`` itself first) that exists, and the missing names below it."""
    here, missing = os.path.abspath(text), []
    while not os.path.lexists(here):
        here, name = os.path.split(here)
        missing.insert(0, name)
    return here, missing


def writable_dir(path: str | os.PathLike[str], what: str) -> str:
    """``path`` as a directory this process can write in or create (with its parents, like
    ``mkdir -p``), checked by trying, without creating it: an existing one must take a new file; for
    a missing one, the nearest folder above it that exists must be a folder that takes a new one
    (made and removed here). Else raise ValidationError naming ``what`` (e.g. ``--checkpoint-dir``),
    the path, why and the fix: a file where a folder is expected, a folder that cannot be written."""
    text = _path_text(path, what)
    fix = "pass a folder you can write"
    try:
        here, missing = _nearest_existing(text)
        if not os.path.isdir(here):
            where = "is a file" if not missing else f"is below {here!r}, a file"
            raise ValidationError(f"{what} {text!r} {where}, where a folder is expected; {fix}")
        if not missing:
            _try_in_folder(here, what, text, fix)
            return text
        first = os.path.join(here, missing[0])
        os.mkdir(first)
        os.rmdir(first)
    except ValidationError:
        raise
    except FileExistsError:  # made meanwhile by someone else: as good as existing
        return writable_dir(path, what)
    except OSError as exc:
        raise _cannot(what, text, f"making {os.path.join(here, missing[0])!r}", exc, fix) from None
    return text


def writable_file(path: str | os.PathLike[str], what: str, *, parents: bool = False) -> str:
    """``path`` as a file this process can create or overwrite, checked by trying, changing
    nothing: an existing regular file is opened for appending (nothing written), a missing one is
    created and removed; a device or pipe (``/dev/null``) must grant write access. Its folder must
    exist, unless ``parents`` (the writer creates it: then it is checked as :func:`writable_dir`
    checks). Else raise ValidationError naming ``what`` (e.g. ``--png``), the path, why and the fix:
    a missing folder, a directory where a file is expected, a folder that cannot be written."""
    text = _path_text(path, what)
    fix = "pass a path in a folder you can write"
    folder = os.path.dirname(os.path.abspath(text))
    doing = f"creating it in {folder!r}"
    try:
        if os.path.isdir(text):
            raise ValidationError(f"{what} {text!r} is a directory, where a file is expected; pass a file path "
                                  "(e.g. a name inside it)")
        if parents and not os.path.isdir(folder):
            writable_dir(folder, f"{what} {text!r}: folder")
            return text
        if os.path.lexists(folder) and not os.path.isdir(folder):
            raise ValidationError(f"{what} {text!r}: {folder!r} is a file, not a folder; {fix}")
        if not os.path.isdir(folder):
            raise ValidationError(f"{what} {text!r}: folder {folder!r} does not exist; create it or pass another path")
        if os.path.lexists(text):
            doing = "opening it for writing"
            if os.path.isfile(text):
                os.close(os.open(text, os.O_WRONLY | os.O_APPEND))
            elif not os.access(text, os.W_OK):
                raise ValidationError(f"{what} {text!r} is not writable by this process; {fix}")
            return text
        os.close(os.open(text, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.unlink(text)
    except ValidationError:
        raise
    except OSError as exc:
        raise _cannot(what, text, doing, exc, fix) from None
    return text


def max_json_bytes() -> int:
    """The size cap on input JSON: ``$RALP_TF_MAX_JSON_BYTES`` when set (a positive integer),
    else :data:`DEFAULT_MAX_JSON_BYTES`. A malformed override raises :class:`ValidationError`."""
    raw = os.environ.get(MAX_JSON_BYTES_ENV)
    if raw is None or raw.strip() == "":
        return DEFAULT_MAX_JSON_BYTES
    try:
        cap = int(raw)
    except ValueError:
        cap = 0
    if cap < 1:
        raise ValidationError(f"{MAX_JSON_BYTES_ENV}={raw!r} is not a positive whole number of bytes; "
                              f"unset it for the default {DEFAULT_MAX_JSON_BYTES} (64 MiB)")
    return cap


def _check_size(size: int, error: type[ValidationError], what: str) -> None:
    cap = max_json_bytes()
    if size > cap:
        raise error(f"{what} is {size} bytes, over the {cap}-byte limit on input JSON; no real plan, profile "
                    f"or workload is that large. Check you gave the right file, or raise the limit with the "
                    f"environment variable {MAX_JSON_BYTES_ENV}")


def _depth(doc: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0, ``[]`` is 1), without recursion."""
    deepest, stack = 0, [(doc, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            depth += 1
            deepest = max(deepest, depth)
            if depth > MAX_JSON_DEPTH:
                break
            stack.extend((v, depth) for v in (value.values() if isinstance(value, dict) else value))
    return deepest


def parse_json(text: str | bytes, error: type[ValidationError], what: str, hint: str = "") -> Any:
    """Parse input JSON ``text`` or raise ``error`` with a message that starts with ``what``.

    Refused, each with its own message: malformed JSON ("<what> is not valid JSON: ..."),
    text over :func:`max_json_bytes`, arrays/objects nested deeper than :data:`MAX_JSON_DEPTH`,
    integers over :data:`MAX_JSON_INT_DIGITS` digits,
    and non-finite numbers (``NaN``, ``Infinity``, ``-Infinity``, or a literal such as ``1e999``
    that overflows to infinity). ``hint`` (e.g. an example of the expected shape) is appended to
    the malformed-JSON message. Never raises anything but ``error`` for bad text.
    """
    if not isinstance(text, (str, bytes, bytearray)):
        raise error(f"{what} must be JSON text (str or bytes), got {type(text).__name__}")
    _check_size(len(text), error, what)

    def reject_constant(name: str) -> Any:
        raise error(f"{what} contains {name}, which is not a JSON number; write a finite number")

    def finite_float(literal: str) -> float:
        value = float(literal)
        if not math.isfinite(value):
            raise error(f"{what} contains the number {literal[:40]}, which overflows to infinity; "
                        "write a finite number")
        return value

    def bounded_int(literal: str) -> int:
        digits = len(literal.lstrip("-"))
        if digits > MAX_JSON_INT_DIGITS:
            raise error(f"{what} contains an integer of {digits} digits, over the {MAX_JSON_INT_DIGITS}-digit "
                        "limit on input JSON; write a smaller number")
        return int(literal)

    too_deep = error(f"{what} nests arrays/objects deeper than {MAX_JSON_DEPTH} levels, the limit on input "
                     "JSON; no real plan, profile or workload nests that deep")
    try:
        doc = json.loads(text, parse_constant=reject_constant, parse_float=finite_float,
                         parse_int=bounded_int)
    except ValidationError:
        raise
    except RecursionError:
        raise too_deep from None
    except (ValueError, TypeError) as exc:  # JSONDecodeError, UnicodeDecodeError, over-long integers
        raise error(f"{what} is not valid JSON: {exc}{'; ' + hint if hint else ''}") from None
    if _depth(doc) > MAX_JSON_DEPTH:
        raise too_deep
    return doc


def read_json_file(path: str | os.PathLike[str], error: type[ValidationError], what: str) -> Any:
    """Read and parse the JSON file ``path`` as :func:`parse_json` does, checking its size against
    :func:`max_json_bytes` before reading it. An unreadable file raises ``error`` ("cannot read
    <what> <path>: <reason>"); ``what`` in other messages is ``"<what> <path>"``."""
    label = f"{what} {str(path)!r}"
    try:
        with open(path, "rb") as f:
            _check_size(os.fstat(f.fileno()).st_size, error, label)
            text = f.read(max_json_bytes() + 1)
    except OSError as exc:
        raise error(f"cannot read {label}: {exc.strerror}") from None
    return parse_json(text, error, label)
