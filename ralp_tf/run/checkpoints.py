"""Checkpoints that a kill cannot tear: each one is written under a temporary name and renamed whole.

A checkpoint directory holds, per kept checkpoint, a folder ``ckpt-<step>/`` with TensorFlow's own
files (``ckpt-<step>.index``, ``ckpt-<step>.data-KKKKK-of-NNNNN``) and ``manifest.json`` (every file's
size and the index's SHA-256; the index holds each tensor's CRC32C, which TensorFlow checks as it
restores), and TensorFlow's ``checkpoint`` state file naming them, so ``tf.train.latest_checkpoint(dir)``
and ``tf.train.load_checkpoint(dir)`` keep working.

:meth:`CheckpointStore.save` (one step's checkpoint):

1. ``tf.train.Checkpoint.write`` into ``.ckpt-<step>.tmp-<pid>-<hex>/`` (TensorFlow's shards, its
   ``_temp`` folder and their merge all happen inside that folder; under ParameterServerStrategy the
   PS tasks write their own shards there);
2. ``manifest.json`` into the same folder;
3. one ``rename`` of the folder to ``ckpt-<step>/``: the commit. Before it the new checkpoint does
   not exist under its name; after it, it is whole;
4. the state file, rewritten atomically (a temporary file, then ``os.replace``);
5. checkpoints beyond the newest ``max_to_keep``: renamed to ``.ckpt-<step>.old-<hex>`` (so a
   half-removed one never sits under a checkpoint's name), then removed.

A SIGKILL at any instant therefore leaves every committed checkpoint whole and the previous one kept
until the new one is committed; at worst it leaves a temporary folder. What a kill inside stock
``tf.train.CheckpointManager.save`` can leave (read in TF 2.21 and seen in ``benchmarks/checkpoint_kills.py``
runs): a ``ckpt-N_temp/`` folder with a partial ``.tempstate`` shard; ``ckpt-N.data-*`` without
``ckpt-N.index`` (MergeV2Checkpoints renames the shards, then writes the index in place); a whole
``ckpt-N`` the state file does not name yet; a ``checkpoint.tmp<hex>`` file; a swept checkpoint's
data files without their index, still named by the state file.

:meth:`CheckpointStore.restore` (at start): removes the leftovers of writes a kill interrupted (the
temporary folders above, and TensorFlow's own from checkpoints written by ``CheckpointManager``),
then restores the newest complete checkpoint. A folder whose manifest is missing or disagrees with
its files, or one TensorFlow cannot read (a CRC mismatch), is skipped and removed with a one-line
warning naming it and the checkpoint used instead. Checkpoints in ``CheckpointManager``'s flat layout
(``ckpt-N.index`` beside the state file, earlier ralp_tf versions) are restored too: complete when
the index and every data shard exist, TensorFlow's CRC check deciding the rest.

Only local paths (os renames); nothing here imports TensorFlow at module level.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import shutil
import time
import uuid
from typing import Any, Iterable

from ralp_tf.errors import ClusterRuntimeError

__all__ = ["MANIFEST", "MAX_TO_KEEP", "Found", "Torn", "Scan", "scan", "latest_complete_step", "CheckpointStore",
           "variables_digest", "checkpoint_model_digest", "model_digest"]

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"
MANIFEST_FORMAT = "ralp_tf.checkpoint/1"
MAX_TO_KEEP = 3
STATE_FILE = "checkpoint"
_FOLDER = re.compile(r"^ckpt-(\d+)$")
_FLAT_INDEX = re.compile(r"^ckpt-(\d+)\.index$")
_FLAT_DATA = re.compile(r"^ckpt-(\d+)\.data-(\d{5})-of-(\d{5})$")
#: temporary names: our writes and removals in progress, TensorFlow's shard folders and state-file writes
_LEFTOVER = re.compile(r"^(\.ckpt-\d+\.(tmp|old)-.+|ckpt-\d+_temp|checkpoint\.tmp[0-9a-f]+)$")
#: Words of the error lines that say why a file could not be written.
_WRITE_FAILURES = ("No space left on device", "Permission denied", "Read-only file system", "Disk quota exceeded",
                   "No such file or directory")


@dataclasses.dataclass
class Found:
    """One complete checkpoint: its step, the prefix to restore, the paths that make it up, and
    whether a manifest vouched for its files (False: the flat layout, TensorFlow's CRC check decides)."""

    step: int
    prefix: str
    paths: list[str]
    verified: bool

    @property
    def name(self) -> str:
        return f"ckpt-{self.step}"


@dataclasses.dataclass
class Torn:
    """A checkpoint's name over files that do not make one: what it is called, why, and its paths."""

    name: str
    why: str
    paths: list[str]


@dataclasses.dataclass
class Scan:
    """What a checkpoint directory holds: ``complete`` (newest first), ``torn`` and ``leftovers``
    (temporary names of writes and removals a kill interrupted)."""

    complete: list[Found]
    torn: list[Torn]
    leftovers: list[str]


def _file_digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_folder(path: str, step: int) -> str | None:
    """Why folder ``path`` (``ckpt-<step>/``) is not a whole checkpoint, or None when its manifest
    matches its files."""
    try:
        with open(os.path.join(path, MANIFEST)) as f:
            manifest = json.load(f)
    except FileNotFoundError:
        return "it has no manifest"
    except (OSError, ValueError) as exc:
        return f"its manifest cannot be read ({exc})"
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT or manifest.get("step") != step:
        return f"its manifest is not a {MANIFEST_FORMAT} manifest of step {step}"
    files = manifest.get("files")
    if not isinstance(files, dict) or f"ckpt-{step}.index" not in files:
        return "its manifest lists no index"
    for name, size in sorted(files.items()):
        try:
            actual = os.path.getsize(os.path.join(path, name))
        except OSError:
            return f"{name} is missing"
        if actual != size:
            return f"{name} is {actual} bytes, its manifest says {size}"
    if _file_digest(os.path.join(path, f"ckpt-{step}.index")) != manifest.get("index_sha256"):
        return "its index differs from the one its manifest names"
    return None


def _flat(directory: str, names: list[str]) -> tuple[list[Found], list[Torn]]:
    """Checkpoints of ``tf.train.CheckpointManager``'s flat layout in ``directory``: complete when the
    index and every data shard exist; data shards without their index are torn."""
    data: dict[int, dict[int, int]] = {}
    for name in names:
        m = _FLAT_DATA.match(name)
        if m:
            data.setdefault(int(m[1]), {})[int(m[2])] = int(m[3])
    indexed = {int(m[1]) for m in map(_FLAT_INDEX.match, names) if m}
    complete: list[Found] = []
    torn: list[Torn] = []
    for step in sorted(set(data) | indexed, reverse=True):
        shards = data.get(step, {})
        paths = [os.path.join(directory, f"ckpt-{step}.data-{k:05d}-of-{n:05d}") for k, n in sorted(shards.items())]
        counts = set(shards.values())
        if step in indexed and len(counts) == 1 and len(shards) == counts.pop():
            complete.append(Found(step, os.path.join(directory, f"ckpt-{step}"),
                                  [os.path.join(directory, f"ckpt-{step}.index"), *paths], verified=False))
        else:
            why = "its data files have no index" if step not in indexed else "data shards are missing"
            index = [os.path.join(directory, f"ckpt-{step}.index")] if step in indexed else []
            torn.append(Torn(os.path.join(directory, f"ckpt-{step}.*"), why, index + paths))
    return complete, torn


def scan(directory: str) -> Scan:
    """Sort what ``directory`` holds into complete checkpoints (newest first), torn ones and leftovers
    (see :class:`Scan`; a missing directory holds nothing). Reads manifests and the small index files,
    never the data."""
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return Scan([], [], [])
    complete, torn = _flat(directory, names)
    leftovers = [os.path.join(directory, n) for n in names if _LEFTOVER.match(n)]
    for name in names:
        m = _FOLDER.match(name)
        path = os.path.join(directory, name)
        if not m or not os.path.isdir(path):
            continue
        step = int(m[1])
        why = _check_folder(path, step)
        if why is None:
            complete.append(Found(step, os.path.join(path, name), [path], verified=True))
        else:
            torn.append(Torn(path, why, [path]))
    complete.sort(key=lambda f: (f.step, f.verified), reverse=True)
    return Scan(complete, torn, leftovers)


def latest_complete_step(directory: str | None) -> int:
    """The step of the newest complete checkpoint in ``directory`` (0: none), without TensorFlow."""
    found = scan(directory).complete if directory else []
    return found[0].step if found else 0


def _remove(path: str) -> None:
    """Remove a file or folder; a folder is first renamed to a temporary ``.old`` name, so a removal a
    kill interrupts never leaves a checkpoint's name over part of its files."""
    if os.path.isdir(path) and not os.path.islink(path):
        head, tail = os.path.split(path)
        aside = os.path.join(head, f".{tail}.old-{uuid.uuid4().hex[:8]}") if _FOLDER.match(tail) else path
        if aside != path:
            os.rename(path, aside)
        shutil.rmtree(aside, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _write_state(directory: str, kept: list[Found]) -> None:
    """TensorFlow's ``checkpoint`` state file (CheckpointState text) naming ``kept`` (newest first),
    written to a temporary file and renamed over the old one."""
    rel = [os.path.relpath(f.prefix, directory) for f in reversed(kept)]
    lines = [f'model_checkpoint_path: "{rel[-1]}"'] + [f'all_model_checkpoint_paths: "{p}"' for p in rel]
    tmp = os.path.join(directory, f"{STATE_FILE}.tmp{uuid.uuid4().hex}")
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, os.path.join(directory, STATE_FILE))


def _write_failure(exc: BaseException, step: int, directory: str) -> ClusterRuntimeError:
    """The one-line error of a checkpoint that could not be written (a full disk, a folder gone)."""
    text = getattr(exc, "message", None) or str(exc)
    known = [k for k in _WRITE_FAILURES if k in text]
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().endswith(":")]
    cause = known[0] if known else (lines or [type(exc).__name__])[-1][:200]
    return ClusterRuntimeError(f"cannot write the checkpoint of step {step} to {directory}: {cause}; free space "
                               "there or pass another --checkpoint-dir")


class CheckpointStore:
    """The checkpoints of one ``tf.train.Checkpoint`` in ``directory`` (see the module docstring):
    :meth:`restore` at start, :meth:`save` at each checkpoint step; ``latest`` is the newest complete
    one (None before any), ``restored`` the one :meth:`restore` used."""

    def __init__(self, checkpoint: Any, directory: str, max_to_keep: int = MAX_TO_KEEP, *,
                 read_only: bool = False) -> None:
        self.checkpoint, self.directory, self.max_to_keep = checkpoint, directory, max_to_keep
        #: restore only: leave torn checkpoints and leftovers to the store that writes the folder
        self.read_only = read_only
        self.complete: list[Found] = []
        self.restored: Found | None = None

    @property
    def latest(self) -> Found | None:
        return self.complete[0] if self.complete else None

    def restore(self) -> Found | None:
        """Remove the leftovers of interrupted writes, then restore the newest complete checkpoint,
        skipping (and removing, with a one-line warning each) torn ones and ones TensorFlow cannot
        read. Returns the one restored (None: none to restore, a fresh start). Errors of an
        unreachable cluster propagate. A ``read_only`` store (a ring worker's view of the chief's
        folder) restores the same way but removes nothing and warns about nothing."""
        import tensorflow as tf

        found = scan(self.directory)
        remove = (lambda path: None) if self.read_only else _remove
        for path in [] if self.read_only else found.leftovers:
            log.warning("checkpoint: removed %s, the unfinished write of a run that was stopped during it", path)
            remove(path)
        skipped = [(t.name, t.why) for t in found.torn]
        for t in found.torn:
            for path in t.paths:
                remove(path)
        self.complete = list(found.complete)
        while self.complete:
            candidate = self.complete[0]
            try:
                self.checkpoint.restore(candidate.prefix)
            except (tf.errors.DataLossError, tf.errors.NotFoundError, tf.errors.OutOfRangeError) as exc:
                first = (getattr(exc, "message", None) or str(exc)).strip().splitlines()[0][:160]
                skipped.append((os.path.join(self.directory, candidate.name),
                                f"TensorFlow cannot read it ({type(exc).__name__}: {first})"))
                for path in candidate.paths:
                    remove(path)
                self.complete.pop(0)
                continue
            self.restored = candidate
            break
        instead = f"resuming from {self.restored.name} (step {self.restored.step})" if self.restored else \
            "starting from step 0"
        for path, why in [] if self.read_only else skipped:
            log.warning("checkpoint: skipped torn checkpoint %s (%s) and removed it; %s", path, why, instead)
        return self.restored

    def save(self, step: int) -> Found:
        """Write checkpoint ``step`` (see the module docstring) and return it. The complete checkpoint
        of the same step is kept as it is (the step counter equal, the variables are). A write that
        fails removes its temporary folder: a file-system error raises ClusterRuntimeError naming the
        folder and the cause; TensorFlow's errors of an unreachable task propagate (the caller names
        the last checkpoint)."""
        import tensorflow as tf

        if self.read_only:
            raise ValueError(f"checkpoint store of {self.directory} is read-only")
        same = [f for f in self.complete if f.step == step and f.verified]
        if same:
            return same[0]
        name = f"ckpt-{step}"
        tmp = os.path.join(self.directory, f".{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        t0 = time.perf_counter()
        log.info("checkpoint: writing step %d", step)
        try:
            os.makedirs(tmp)
            self.checkpoint.write(os.path.join(tmp, name))
            self._write_manifest(tmp, step)
            final = os.path.join(self.directory, name)
            if os.path.lexists(final):  # a torn or flat-layout leftover of this step: never a whole one
                _remove(final)
            os.rename(tmp, final)
        except (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.CancelledError,
                tf.errors.DeadlineExceededError, tf.errors.InternalError):
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        except (tf.errors.OpError, OSError) as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise _write_failure(exc, step, self.directory) from None
        saved = Found(step, os.path.join(final, name), [final], verified=True)
        for flat in (f for f in self.complete if f.step == step):  # the flat layout's of this step
            for path in flat.paths:
                _remove(path)
        self.complete = sorted([saved, *(f for f in self.complete if f.step != step)],
                               key=lambda f: f.step, reverse=True)
        self._keep()
        log.info("checkpoint: step %d complete in %.3f s", step, time.perf_counter() - t0)
        return saved

    def _write_manifest(self, folder: str, step: int) -> None:
        files = {n: os.path.getsize(os.path.join(folder, n)) for n in sorted(os.listdir(folder))
                 if n.startswith(f"ckpt-{step}.")}
        manifest = {"format": MANIFEST_FORMAT, "step": step, "files": files,
                    "index_sha256": _file_digest(os.path.join(folder, f"ckpt-{step}.index"))}
        with open(os.path.join(folder, MANIFEST), "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)

    def _keep(self) -> None:
        """Name the newest ``max_to_keep`` in the state file, then remove the others."""
        kept, dropped = self.complete[:self.max_to_keep], self.complete[self.max_to_keep:]
        _write_state(self.directory, kept)
        for old in dropped:
            for path in old.paths:
                _remove(path)
        self.complete = kept


def variables_digest(arrays: Iterable[Any]) -> str:
    """SHA-256 over the sorted SHA-256s of each array's dtype, shape and bytes: equal digests, equal
    variables whatever their order."""
    import numpy as np

    each = []
    for value in arrays:
        a = np.ascontiguousarray(value)
        each.append(hashlib.sha256(f"{a.dtype.str}{a.shape}".encode() + a.tobytes()).hexdigest())
    return hashlib.sha256("".join(sorted(each)).encode()).hexdigest()


def model_digest(model: Any) -> str:
    """:func:`variables_digest` of ``model.weights`` (as restored: on the PS tasks under PSS)."""
    return variables_digest(w.numpy() for w in model.weights)


def checkpoint_model_digest(prefix: str) -> str:
    """:func:`variables_digest` of the model variables a checkpoint holds (its ``model/...`` values,
    optimizer slots left out), read with ``tf.train.load_checkpoint`` (every tensor's CRC checked):
    equal to :func:`model_digest` of a model that restored it."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    keys = sorted(k for k in reader.get_variable_to_shape_map()
                  if k.startswith("model/") and k.endswith("/.ATTRIBUTES/VARIABLE_VALUE") and ".OPTIMIZER_SLOT" not in k)
    return variables_digest(reader.get_tensor(k) for k in keys)
