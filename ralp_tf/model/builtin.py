"""Built-in tf_keras models, shared by the examples, the CLI, the benchmarks and the scheduler.

Each builder returns a fresh, built, uncompiled tf_keras model. :func:`resolve_model` turns a
name or a ``module:function`` reference into a builder; a reference's builder checks that the
function returned a tf_keras model. A reference imports and runs user code: only pass
references you trust. What the training jobs feed a model is :mod:`ralp_tf.model.data`.
"""
from __future__ import annotations

import functools
import importlib
import os
import re
from typing import Any, Callable

from ralp_tf.errors import ValidationError
# Importable here too (``ralp_tf.models.synthetic_batch``, ...), as in earlier releases.
from ralp_tf.model.data import output_units, per_sample_loss, synthetic_batch, weights_checksum

__all__ = ["ModelBuilder", "alexnet_cifar", "vgg16_cifar", "resnet_cifar", "ctr_dnn", "small_cnn", "siamese_cnn",
           "reused_dense", "ctr_head", "alexnet_cifar_subclassed", "transfer_classifier", "BUILTIN_MODELS",
           "MODEL_REFERENCE", "resolve_model", "synthetic_batch", "output_units", "per_sample_loss",
           "weights_checksum"]

ModelBuilder = Callable[[], Any]


def _keras() -> Any:
    import tf_keras

    return tf_keras


def alexnet_cifar(num_classes: int = 10) -> Any:
    """AlexNet-style CNN for 32x32x3: 5 conv (64, 192, 384, 256, 256), FC 4096-4096-10.

    35,855,178 parameters, 2,251,584 of them in conv.
    """
    k = _keras()
    L = k.layers
    x = inp = L.Input((32, 32, 3), name="image")
    for i, (filters, pool) in enumerate([(64, True), (192, True), (384, False), (256, False), (256, True)]):
        x = L.Conv2D(filters, 3, padding="same", activation="relu", name=f"conv{i + 1}")(x)
        if pool:
            x = L.MaxPooling2D(2, name=f"pool{i + 1}")(x)
    x = L.Flatten(name="flatten")(x)
    x = L.Dense(4096, activation="relu", name="fc1")(x)
    x = L.Dense(4096, activation="relu", name="fc2")(x)
    out = L.Dense(num_classes, name="logits")(x)
    return k.Model(inp, out, name="alexnet_cifar")


def vgg16_cifar(num_classes: int = 10) -> Any:
    """VGG16's 13 conv layers on 32x32x3 (flatten 512), then FC 4096-4096-10.

    33,638,218 parameters, 14,714,688 of them in conv.
    """
    k = _keras()
    L = k.layers
    x = inp = L.Input((32, 32, 3), name="image")
    blocks = [(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)]
    for b, (filters, n) in enumerate(blocks):
        for i in range(n):
            x = L.Conv2D(filters, 3, padding="same", activation="relu", name=f"block{b + 1}_conv{i + 1}")(x)
        x = L.MaxPooling2D(2, name=f"block{b + 1}_pool")(x)
    x = L.Flatten(name="flatten")(x)
    x = L.Dense(4096, activation="relu", name="fc1")(x)
    x = L.Dense(4096, activation="relu", name="fc2")(x)
    out = L.Dense(num_classes, name="logits")(x)
    return k.Model(inp, out, name="vgg16_cifar")


def resnet_cifar(num_classes: int = 10, depth: int = 20) -> Any:
    """ResNet-20 for CIFAR (He et al. 2016, option B shortcuts): 3 stages of 3 basic blocks
    with 16, 32, 64 filters, global average pooling, Dense 10."""
    k = _keras()
    L = k.layers
    n = (depth - 2) // 6
    x = inp = L.Input((32, 32, 3), name="image")
    x = L.Conv2D(16, 3, padding="same", use_bias=False, name="stem_conv")(x)
    x = L.BatchNormalization(name="stem_bn")(x)
    x = L.Activation("relu", name="stem_relu")(x)
    for s, filters in enumerate([16, 32, 64]):
        for b in range(n):
            stride = 2 if (s > 0 and b == 0) else 1
            p = f"s{s + 1}b{b + 1}"
            y = L.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False, name=f"{p}_conv1")(x)
            y = L.BatchNormalization(name=f"{p}_bn1")(y)
            y = L.Activation("relu", name=f"{p}_relu1")(y)
            y = L.Conv2D(filters, 3, padding="same", use_bias=False, name=f"{p}_conv2")(y)
            y = L.BatchNormalization(name=f"{p}_bn2")(y)
            if stride != 1 or x.shape[-1] != filters:
                x = L.Conv2D(filters, 1, strides=stride, use_bias=False, name=f"{p}_proj")(x)
                x = L.BatchNormalization(name=f"{p}_proj_bn")(x)
            x = L.Add(name=f"{p}_add")([x, y])
            x = L.Activation("relu", name=f"{p}_relu2")(x)
    x = L.GlobalAveragePooling2D(name="gap")(x)
    out = L.Dense(num_classes, name="logits")(x)
    return k.Model(inp, out, name="resnet_cifar")


def ctr_dnn(vocab_sizes: tuple[int, ...] = (200_000, 200_000, 100_000, 50_000), embed_dim: int = 32,
            dense_features: int = 13, hidden: tuple[int, ...] = (512, 256, 128)) -> Any:
    """CTR-DNN (HeterPS's main case): sparse id features through large embeddings, concatenated
    with dense features, then an MLP to one click logit."""
    k = _keras()
    L = k.layers
    sparse_in = [L.Input((1,), dtype="int32", name=f"slot{i}") for i in range(len(vocab_sizes))]
    dense_in = L.Input((dense_features,), name="dense_features")
    embs = [L.Flatten(name=f"flat{i}")(L.Embedding(v, embed_dim, name=f"emb{i}")(s))
            for i, (v, s) in enumerate(zip(vocab_sizes, sparse_in))]
    x = L.Concatenate(name="concat")(embs + [dense_in])
    for i, h in enumerate(hidden):
        x = L.Dense(h, activation="relu", name=f"fc{i + 1}")(x)
    out = L.Dense(1, name="logit")(x)
    return k.Model(sparse_in + [dense_in], out, name="ctr_dnn")


def small_cnn(num_classes: int = 10, fc: int = 512) -> Any:
    """A small conv feature extractor with an FC head that dominates the weights (fast tests)."""
    k = _keras()
    L = k.layers
    return k.Sequential([
        L.Conv2D(8, 3, padding="same", activation="relu", input_shape=(16, 16, 3), name="conv1"),
        L.MaxPooling2D(2, name="pool1"),
        L.Conv2D(16, 3, padding="same", activation="relu", name="conv2"),
        L.MaxPooling2D(2, name="pool2"),
        L.Flatten(name="flatten"),
        L.Dense(fc, activation="relu", name="fc1"),
        L.Dense(fc, activation="relu", name="fc2"),
        L.Dense(num_classes, name="logits"),
    ], name="small_cnn")


def siamese_cnn(num_classes: int = 10, fc: int = 512) -> Any:
    """Two 16x16x3 images through one shared Conv2D(8) and one shared Dense(``fc``) (each layer
    called twice), then Concatenate and Dense(``num_classes``)."""
    k = _keras()
    L = k.layers
    left, right = L.Input((16, 16, 3), name="left"), L.Input((16, 16, 3), name="right")
    conv = L.Conv2D(8, 3, activation="relu", name="shared_conv")
    fc_shared = L.Dense(fc, activation="relu", name="shared_fc")
    towers = [fc_shared(L.Flatten(name=f"flatten_{side}")(conv(x))) for side, x in (("left", left), ("right", right))]
    out = L.Dense(num_classes, name="logits")(L.Concatenate(name="concat")(towers))
    return k.Model([left, right], out, name="siamese_cnn")


def reused_dense(num_classes: int = 10, width: int = 1024, calls: int = 3) -> Any:
    """One Dense(``width``) applied ``calls`` times in a row to a ``width``-wide input, then
    Dense(``num_classes``): a layer whose every call reads the same weights."""
    k = _keras()
    L = k.layers
    x = inp = L.Input((width,), name="features")
    block = L.Dense(width, activation="relu", name="reused")
    for _ in range(calls):
        x = block(x)
    return k.Model(inp, L.Dense(num_classes, name="logits")(x), name="reused_dense")


def ctr_head(vocab: int = 50_000, embed_dim: int = 64, ids: int = 8, hidden: int = 2048) -> Any:
    """A CTR-style model: ``ids`` ids through one Embedding(``vocab``, ``embed_dim``), Flatten,
    then Dense ``hidden``-``hidden``-2. With the head on a PS task the embedding's rows are
    read there and never visit the worker."""
    k = _keras()
    L = k.layers
    inp = L.Input((ids,), dtype="int32", name="ids")
    x = L.Flatten(name="flatten")(L.Embedding(vocab, embed_dim, name="embedding")(inp))
    x = L.Dense(hidden, activation="relu", name="fc1")(x)
    x = L.Dense(hidden, activation="relu", name="fc2")(x)
    return k.Model(inp, L.Dense(2, name="logits")(x), name="ctr_head")


def alexnet_cifar_subclassed(num_classes: int = 10) -> Any:
    """:func:`alexnet_cifar`'s layers (same names) as a subclassed ``tf_keras.Model``, unbuilt:
    build it with ``model.build((None, 32, 32, 3))`` or let ralp_tf build it."""
    k = _keras()
    L = k.layers

    class AlexNetCifar(k.Model):
        def __init__(self) -> None:
            super().__init__(name="alexnet_cifar")
            self.convs = [L.Conv2D(f, 3, padding="same", activation="relu", name=f"conv{i + 1}")
                          for i, f in enumerate([64, 192, 384, 256, 256])]
            self.pools = {0: L.MaxPooling2D(2, name="pool1"), 1: L.MaxPooling2D(2, name="pool2"),
                          4: L.MaxPooling2D(2, name="pool5")}
            self.flatten = L.Flatten(name="flatten")
            self.fc1 = L.Dense(4096, activation="relu", name="fc1")
            self.fc2 = L.Dense(4096, activation="relu", name="fc2")
            self.logits = L.Dense(num_classes, name="logits")

        def call(self, x: Any, training: bool = False) -> Any:
            for i, conv in enumerate(self.convs):
                x = conv(x)
                if i in self.pools:
                    x = self.pools[i](x)
            return self.logits(self.fc2(self.fc1(self.flatten(x))))

    model = AlexNetCifar()
    model.build((None, 32, 32, 3))
    return model


def transfer_classifier(num_classes: int = 10, hidden: int = 1024) -> Any:
    """The transfer-learning shape: a nested conv ``features`` model, GlobalAveragePooling, then a
    nested ``classifier`` model (``classifier/fc1``, ``classifier/fc2``, ``classifier/logits``)."""
    k = _keras()
    L = k.layers
    image = L.Input((32, 32, 3), name="image")
    x = image
    for i, filters in enumerate([32, 64, 128]):
        x = L.Conv2D(filters, 3, padding="same", activation="relu", name=f"conv{i + 1}")(x)
        x = L.MaxPooling2D(2, name=f"pool{i + 1}")(x)
    features = k.Model(image, x, name="features")
    classifier = k.Sequential([L.Dense(hidden, activation="relu", name="fc1", input_shape=(128,)),
                               L.Dense(hidden, activation="relu", name="fc2"),
                               L.Dense(num_classes, name="logits")], name="classifier")
    inp = L.Input((32, 32, 3), name="input_image")
    out = classifier(L.GlobalAveragePooling2D(name="gap")(features(inp)))
    return k.Model(inp, out, name="transfer_classifier")


BUILTIN_MODELS: dict[str, ModelBuilder] = {
    "alexnet_cifar": alexnet_cifar,
    "vgg16_cifar": vgg16_cifar,
    "resnet_cifar": resnet_cifar,
    "ctr_dnn": ctr_dnn,
    "small_cnn": small_cnn,
    "siamese_cnn": siamese_cnn,
    "reused_dense": reused_dense,
    "ctr_head": ctr_head,
    "alexnet_cifar_subclassed": alexnet_cifar_subclassed,
    "transfer_classifier": transfer_classifier,
}

#: A ``package.module:function`` model reference.
MODEL_REFERENCE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__


def _raised_where(exc: BaseException) -> str:
    """``Type: first line of the message (file, line N)``: where a module's import failed."""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" ({tb.tb_frame.f_code.co_filename}, line {tb.tb_lineno})" if tb is not None else ""
    return f"{type(exc).__name__}: {_first_line(exc)}{where}"


def resolve_model(ref: str) -> ModelBuilder:
    """A builder for a built-in name, or for ``package.module:function`` (imports and runs user code)."""
    if not isinstance(ref, str) or not ref:
        raise ValidationError("a model reference is a built-in name or 'module:function'")
    if ref in BUILTIN_MODELS:
        return BUILTIN_MODELS[ref]
    path, _, func = ref.rpartition(":") if ":" in ref else (ref, "", "")
    if re.search(r"[/\\]|\.py$", path):  # a file, as a script would be given
        folder, stem = os.path.split(path[:-3] if path.endswith(".py") else path)
        folder = (folder or ".") if (folder or ".").isprintable() else repr(folder)
        stem = stem if stem.isidentifier() else "<module>"
        raise ValidationError(f"model reference {ref!r} names a file; a reference is 'module:function', "
                              f"imported from PYTHONPATH: run with PYTHONPATH={folder} and pass "
                              f"--model {stem}:{func if func.isidentifier() else 'build'}")
    if ":" not in ref:
        raise ValidationError(f"unknown model {ref!r}; use one of {', '.join(sorted(BUILTIN_MODELS))} "
                              "or a reference 'package.module:function' to a function that builds the model")
    if not MODEL_REFERENCE.match(ref):
        raise ValidationError(f"model reference {ref!r} is malformed; write it as 'package.module:function'")
    module_name, func_name = ref.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValidationError(f"cannot import module {module_name!r} of model reference {ref!r}: "
                              f"{_first_line(exc)}; check the name and that it is on PYTHONPATH") from None
    except (Exception, SystemExit) as exc:  # the module's own code failed (or exited) while it was imported
        raise ValidationError(f"module {module_name!r} of model reference {ref!r} failed while being imported: "
                              f"{_raised_where(exc)}; fix the module (python -c 'import {module_name}' shows the "
                              "traceback)") from None
    fn = getattr(module, func_name, None)
    if not callable(fn):
        raise ValidationError(f"module {module_name!r} has no function {func_name!r} (model reference {ref!r})")

    @functools.wraps(fn)
    def build(*args: Any, **kwargs: Any) -> Any:
        from ralp_tf.model.profiler import check_tf_keras_model

        model = fn(*args, **kwargs)
        check_tf_keras_model(model, source=f"model reference {ref!r}")
        return model

    return build
