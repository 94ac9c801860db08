"""The one walk over a tf_keras model: what its placeable units are, and their stable paths.

Every part of ralp_tf that names a layer (the profiler, the planners, the Plan validator, the
applier, the verifier, ``explain``) names it by the path this module gives, and sees the same
units. :func:`walk` decides both once.

**Units.** A model is a tree: a ``tf_keras.Model`` (the model itself, or a model nested in it as
a layer: a Functional, Sequential or subclassed model) is a *container*, opened; every other
layer is a *unit*, never opened. A unit is placed as a whole: all its variables, its forward and
its gradient ops on one device. So a custom layer that holds layers (a token + position
embedding, a Transformer block), ``Bidirectional``, ``TimeDistributed`` and
``MultiHeadAttention`` are one unit each, with the ops their ``call`` runs between their
sublayers; a nested model's layers are units of their own. A model class registered with
:func:`ralp_tf.register_layer_kind` is a unit too (placed whole). Model inputs are not units.

**Paths.** A unit's path is the path of its container plus one segment, ``block/att``; the
top model's units have one segment, ``fc1``. Within a container each child gets, in this order
of preference:

1. the name the user gave it (``Dense(10, name="logits")``): a name that is not of the form
   tf_keras's name counter gives an unnamed layer of its class or of any layer class it derives
   from (``dense``, ``dense_3``, ``conv_lstm2d_1``, ``model_2``; the bases are
   :func:`keras_compat.default_name_bases`, which uses tf_keras's own snake-case rule), and is
   not an op layer's (``tf.__operators__.add_1``: users cannot name those);
2. else, in a subclassed model or layer, its public attribute path there (``self.fc1`` is
   ``fc1``, ``self.convs[1]`` is ``convs/1``, ``self.heads["age"]`` is ``heads/age``);
3. else its position: its class's base (``dense``; an op layer's op, ``tf.math.add``) and, from
   the second child of that base on, ``_1``, ``_2`` ... in the container's layer order
   (topological for Functional models), skipping segments already taken.

None of these depends on Keras's process-wide name counter, so two builds of the same builder
give the same paths, in one process or two. The layers inside a unit (a ``Bidirectional``'s
``forward_lstm_3``, an ``RNN``'s cell) draw names from the same counter but are in no path.

Plans written before paths were stable named layers by their Keras names (``classifier/fc1``;
a composite layer's leaves, ``tok_pos/embedding_4``): :meth:`ModelGraph.resolve` maps those
where they are unambiguous for this model instance.
"""
from __future__ import annotations

import collections
import collections.abc
import dataclasses
import difflib
import functools
import re
from typing import Any, Iterable, Iterator

from ralp_tf.errors import PlanError
from ralp_tf.model import keras_compat
from ralp_tf.model.kinds import registered_kind

__all__ = ["Unit", "ModelGraph", "walk", "is_generated_name", "is_container", "layer_and_sublayers"]

#: How deep attribute paths go into nested lists and dicts.
_MAX_ATTRIBUTE_DEPTH = 4


@dataclasses.dataclass(frozen=True)
class Unit:
    """One placeable unit: its stable ``path``, the layer object, and ``keras_path``, the nested
    Keras names of earlier ralp_tf versions (what plans written then call it)."""

    path: str
    layer: Any = dataclasses.field(compare=False, repr=False)
    keras_path: str = ""

    @property
    def name_scope(self) -> str:
        """The layer's own Keras name: the innermost name scope of the ops its ``call`` creates."""
        return str(self.layer.name)


@dataclasses.dataclass
class ModelGraph:
    """The units of one model instance (:func:`walk`), by path in walk order."""

    model: Any
    units: dict[str, Unit]
    #: every path at which a layer object is a unit (a layer shared by two containers has two)
    paths_by_layer: dict[int, list[str]]
    #: an old plan's name -> the unit path it means, where unambiguous (module docstring)
    legacy: dict[str, str]
    #: an old plan's name for a leaf inside a composite unit -> that unit's path
    inside: dict[str, str]

    def __iter__(self) -> Iterator[Unit]:
        return iter(self.units.values())

    def __contains__(self, path: object) -> bool:
        return path in self.units

    @property
    def paths(self) -> list[str]:
        return list(self.units)

    def layer(self, path: str) -> Any:
        """The layer at ``path``; PlanError with close matches when there is none."""
        try:
            return self.units[path].layer
        except KeyError:
            raise PlanError(self._unknown([path])) from None

    def path_of(self, layer: Any) -> str | None:
        """The first path at which ``layer`` is a unit, or None."""
        paths = self.paths_by_layer.get(id(layer))
        return paths[0] if paths else None

    def resolve(self, names: Iterable[str]) -> dict[str, str]:
        """Each of ``names`` (a plan's layer names) -> the unit path it means: itself when it is a
        path, else its unambiguous meaning in an older plan (module docstring). Raises PlanError
        naming every name that means nothing here, with close matches."""
        out: dict[str, str] = {}
        unknown: list[str] = []
        for name in names:
            if name in self.units:
                out[name] = name
            elif name in self.legacy:
                out[name] = self.legacy[name]
            elif name in self.inside:
                out[name] = self.inside[name]
            else:
                unknown.append(name)
        if unknown:
            raise PlanError(self._unknown(unknown))
        return out

    def _unknown(self, names: list[str]) -> str:
        hints = []
        for n in names[:5]:
            close = difflib.get_close_matches(n, self.paths, n=1)
            hints.append(f"{n!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        text = f"plan names {len(names)} layer(s) not in the model: {', '.join(hints)}"
        if any(is_generated_name(n.rsplit("/", 1)[-1]) for n in names):
            text += ("; a name of the form tf_keras gives unnamed layers (dense_3) belongs to one build of a model "
                     "(another build numbers them differently): plan again to name layers by their stable paths")
        return f"{text}; the model's layers are: {', '.join(self.paths)}"



def layer_and_sublayers(layer: Any) -> list[Any]:
    """``layer`` and every Keras layer inside it, at any depth (``Layer.submodules`` holds
    non-layers too: variables' modules, trackable lists)."""
    import tf_keras

    return [layer, *(m for m in layer.submodules if isinstance(m, tf_keras.layers.Layer))]

def is_container(layer: Any) -> bool:
    """Whether the walk opens ``layer``: a tf_keras Model whose class has no registered kind."""
    import tf_keras

    return isinstance(layer, tf_keras.Model) and registered_kind(layer) is None


_GENERATED_OP_LAMBDA = re.compile(r"^tf\.[\w.]+?(_\d+)?$")


def is_generated_name(name: str, layer: Any = None) -> bool:
    """Whether ``name`` has the form tf_keras gives a layer created without ``name=``: of
    ``layer`` when given (a base of :func:`keras_compat.default_name_bases`, optionally ``_<n>``;
    an op layer's name always), else of any layer (the base of a tf_keras layer or model class,
    or any name ending ``_<n>``): ``dense``, ``conv2d_3``, ``model_1``, ``input_2``,
    ``tf.__operators__.add_1``."""
    if _GENERATED_OP_LAMBDA.match(name):
        return True
    if layer is None:
        return bool(re.fullmatch(r"[a-z][a-z0-9_]*?_\d+", name)) or name in _tf_keras_bases()
    if keras_compat.op_layer_name_base(layer) is not None:
        return True
    return any(re.fullmatch(re.escape(base) + r"(_\d+)?", name) for base in keras_compat.default_name_bases(layer))


@functools.lru_cache(maxsize=1)
def _tf_keras_bases() -> frozenset[str]:
    """The bases of the names tf_keras gives unnamed instances of its public layer classes and models."""
    import tf_keras

    classes = [getattr(tf_keras.layers, name) for name in dir(tf_keras.layers)]
    return frozenset({keras_compat.snake_case(c.__name__) for c in classes
                      if isinstance(c, type) and issubclass(c, tf_keras.layers.Layer)}
                     | {"model", "functional", "sequential", "input"})


def _positional_base(layer: Any) -> str:
    """The base of a child's positional segment: its op's base for an op layer, ``input`` for an
    ``InputLayer``, else :func:`keras_compat.snake_case` of its class."""
    op_base = keras_compat.op_layer_name_base(layer)
    if op_base is not None:
        return op_base
    if type(layer).__name__ == "InputLayer":
        return "input"
    return keras_compat.snake_case(type(layer).__name__)


def children(container: Any) -> list[Any]:
    """The layers a container holds directly, in its layer order, model inputs left out."""
    return [l for l in container.layers if type(l).__name__ != "InputLayer"]


def segments(container: Any, kids: list[Any]) -> list[str]:
    """One path segment per child of ``container`` (module docstring, *Paths*)."""
    out: list[str | None] = [None] * len(kids)
    taken: set[str] = set()
    for i, child in enumerate(kids):
        name = str(child.name)
        if not is_generated_name(name, child) and name not in taken:
            out[i] = name
            taken.add(name)
    attrs = attribute_paths(container)
    for i, child in enumerate(kids):
        attr = attrs.get(id(child))
        if out[i] is None and attr is not None and attr not in taken:
            out[i] = attr
            taken.add(attr)
    counters: collections.Counter[str] = collections.Counter()
    for i, child in enumerate(kids):
        if out[i] is not None:
            continue
        base = _positional_base(child)
        while True:
            n = counters[base]
            counters[base] += 1
            candidate = base if n == 0 else f"{base}_{n}"
            if candidate not in taken:
                break
        out[i] = candidate
        taken.add(candidate)
    return [s for s in out if s is not None]


def attribute_paths(container: Any) -> dict[int, str]:
    """``id(layer)`` -> its attribute path in ``container`` (``fc1``, ``convs/0``, ``heads/age``),
    for the layers a subclassed model or layer holds in its own public attributes (a Functional
    or Sequential model's layers are not attributes: they get none)."""
    import tf_keras

    out: dict[int, str] = {}
    if keras_compat.is_graph_network(container):
        return out

    def visit(value: Any, path: str, depth: int) -> None:
        if isinstance(value, tf_keras.layers.Layer):
            out.setdefault(id(value), path)
        elif depth < _MAX_ATTRIBUTE_DEPTH and isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                visit(item, f"{path}/{i}", depth + 1)
        elif depth < _MAX_ATTRIBUTE_DEPTH and isinstance(value, collections.abc.Mapping):  # tf_keras's _DictWrapper too
            for key, item in value.items():
                visit(item, f"{path}/{key}", depth + 1)

    for name, value in vars(container).items():
        if not name.startswith("_"):
            visit(value, name, 0)
    return out


def walk(model: Any) -> ModelGraph:
    """The units of ``model`` and their paths (module docstring)."""
    units: dict[str, Unit] = {}
    paths_by_layer: dict[int, list[str]] = {}
    legacy: dict[str, str] = {}
    inside: dict[str, str] = {}
    ambiguous: set[str] = set()

    def visit(container: Any, prefix: str, keras_prefix: str) -> None:
        kids = children(container)
        for child, segment in zip(kids, segments(container, kids)):
            path, keras_path = prefix + segment, keras_prefix + str(child.name)
            if is_container(child):
                visit(child, path + "/", keras_path + "/")
                continue
            units[path] = Unit(path, child, keras_path)
            paths_by_layer.setdefault(id(child), []).append(path)
            if keras_path in legacy and legacy[keras_path] != path:
                ambiguous.add(keras_path)
            legacy.setdefault(keras_path, path)
            for old in _old_leaf_paths(child, keras_path):
                inside.setdefault(old, path)

    visit(model, "", "")
    for name in ambiguous:
        legacy.pop(name, None)
    return ModelGraph(model=model, units=units, paths_by_layer=paths_by_layer,
                      legacy={k: v for k, v in legacy.items() if k not in units},
                      inside={k: v for k, v in inside.items() if k not in units and k not in legacy})


def _old_leaf_paths(layer: Any, keras_path: str) -> Iterator[str]:
    """The names an earlier ralp_tf gave the leaves inside a composite unit: it opened every
    layer with sublayers and no registered kind, naming the leaves by nested Keras names."""
    if registered_kind(layer) is not None:
        return
    for sub in keras_compat.direct_sublayers(layer):
        path = f"{keras_path}/{sub.name}"
        subs = keras_compat.direct_sublayers(sub)
        if subs and registered_kind(sub) is None:
            yield from _old_leaf_paths(sub, path)
        else:
            yield path
