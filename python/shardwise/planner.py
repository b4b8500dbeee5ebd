"""shardwise.plan and shardwise.search: the planner of `shardwise plan` from Python.

The model is any of:
- a preset of `shardwise train` by name ("tiny", "gpt2", "smollm2-135m", "qwen3-tiny": see
  preset_names()), planned as `shardwise plan --model NAME` plans it;
- a Hugging Face config (a dict, a config.json's path, or a model folder's): GPT-2, Llama,
  Mistral, Qwen2;
- a manifest (a dict with "parameters", its file, or a ModelManifest; a "transformer" key gives
  the transformer's shape, as the presets' manifests do);
- a .safetensors file (only its header is read);
- a parameter tree: a Flax NNX model or state, a PyTorch module, a dict of name: array or
  shape or (shape, logical axes), or a list of (name, shape[, logical axes]). Names follow the
  dotted paths the planner reads layers from ("layers.3.mlp.up.kernel", "h.3.mlp.c_fc.weight").
"""

import json
import os

from ._shardwise import (
    MAX_SAFETENSORS_HEADER_BYTES,
    Cluster,
    InvalidArgument,
    Layout,
    Mesh,
    ModelManifest,
    TrainingSetup,
    check_layout_axes,
    load_model_description,
    manifest_from_safetensors_header,
    plan_layout,
    search_layouts,
    shape_of,
)

# A config or manifest past this is not one.
_MAX_DESCRIPTION_BYTES = 64 * 1024 * 1024

_DTYPES = {"float32": "f32", "float64": "f64", "bfloat16": "bf16", "float16": "f16",
           "int32": "i32", "int64": "i64", "uint8": "u8", "int8": "i8", "bool": "bool"}


def _text(value, field):
    """``value``, a str UTF-8 encodes; InvalidArgument naming ``field`` for a lone surrogate."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgument(f"{field} is {value!r}, which is not valid text: a lone surrogate "
                              f"at index {e.start}") from None
    return value


def _path_text(path, field):
    """A path as the file system holds it (os.fsdecode's escapes of bytes that are not UTF-8
    pass); InvalidArgument naming ``field`` for a str no file name can be."""
    try:
        os.fsencode(path)
    except UnicodeEncodeError as e:
        raise InvalidArgument(f"{field} is {path!r}, which is not valid text nor a file name: a "
                              f"lone surrogate at index {e.start}") from None
    return path


def _read_text(path, what):
    if not os.path.isfile(path):
        raise InvalidArgument(f"{what} '{path}' is not a readable regular file")
    with open(path, "rb") as file:
        data = file.read(_MAX_DESCRIPTION_BYTES + 1)
    if len(data) > _MAX_DESCRIPTION_BYTES:
        raise InvalidArgument(f"{what} '{path}' is over {_MAX_DESCRIPTION_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidArgument(f"{what} '{path}' is not UTF-8 text: {e}") from None


def _safetensors_manifest(path):
    if not os.path.isfile(path):
        raise InvalidArgument(f"model '{path}' is not a readable regular file")
    size = os.path.getsize(path)
    with open(path, "rb") as file:
        head = file.read(8)
        if len(head) < 8:
            raise InvalidArgument(f"model '{path}' has {len(head)} bytes; a .safetensors file "
                                  "starts with an 8-byte header length")
        length = int.from_bytes(head, "little")
        if length > MAX_SAFETENSORS_HEADER_BYTES or 8 + length > size:
            raise InvalidArgument(f"model '{path}' declares a header of {length} bytes; the "
                                  f"file has {size}")
        try:
            header = file.read(length).decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidArgument(f"model '{path}': the header is not UTF-8 ({e})") from None
    return manifest_from_safetensors_header(header, size - 8 - length)


def _dtype_name(dtype, parameter):
    name = getattr(dtype, "name", None) or str(dtype).replace("torch.", "")
    if name not in _DTYPES:
        raise InvalidArgument(f"parameter '{parameter}' has dtype {name}; the planner counts "
                              f"{', '.join(sorted(_DTYPES))}")
    return _DTYPES[name]


def _entry(name, value, axes=None):
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], (tuple, list)):
        value, axes = value
    if hasattr(value, "shape"):
        shape = tuple(value.shape)
    elif isinstance(value, (tuple, list)):
        shape = tuple(value)
    else:
        raise InvalidArgument(f"parameter '{name}' is {value!r}; expected an array, a shape or "
                              "(shape, logical axes)")
    entry = {"name": _text(str(name), "model: parameter name"), "shape": list(shape),
             "dtype": _dtype_name(value.dtype, name) if hasattr(value, "dtype") else "f32"}
    if axes is not None:
        entry["logical_axes"] = [a if a else None for a in axes]
    return entry


def _nnx_entries(model):
    from .interop import flax_parameters

    return [_entry(p.name, p.value, p.logical_axes) for p in flax_parameters(model)]


def _tree_entries(model):
    try:
        from flax import nnx
        if isinstance(model, (nnx.Module, nnx.State)):
            return _nnx_entries(model)
    except ImportError:
        pass
    if hasattr(model, "named_parameters"):  # a torch.nn.Module
        return [_entry(name, p) for name, p in model.named_parameters()]
    if isinstance(model, dict):
        return [_entry(name, value) for name, value in model.items()]
    if isinstance(model, (list, tuple)):
        entries = []
        for i, item in enumerate(model):
            if not isinstance(item, (list, tuple)) or len(item) not in (2, 3):
                raise InvalidArgument(f"model[{i}] is {item!r}; expected (name, shape) or "
                                      "(name, shape, logical axes)")
            entries.append(_entry(*item))
        return entries
    raise InvalidArgument(
        f"model is {type(model).__name__}; expected a Hugging Face config or folder, a manifest, "
        "a .safetensors file, or a parameter tree (Flax NNX, PyTorch, dict, list)")


# `shardwise train`'s presets, as their families state them (every parameter, the transformer's
# shape): written from the library's registry, which a C++ test holds this file equal to
# (tests/models/python_presets_test.cpp), so that `plan(model="gpt2")` plans the model
# `shardwise plan --model gpt2` plans.
_PRESETS_FILE = os.path.join(os.path.dirname(__file__), "presets.json")
_presets = None


def preset_names():
    """The presets of `shardwise train` the planner takes by name."""
    return list(_preset_manifests())


def _preset_manifests():
    global _presets
    if _presets is None:
        with open(_PRESETS_FILE, encoding="utf-8") as file:
            _presets = json.load(file)
    return _presets


# The keys of `shardwise train`'s own model files: the trainer builds those models (a context of
# block_size positions, its family's layout) from families shardwise::core does not hold; read
# here as Hugging Face configs they would plan another model in silence.
_TRAINER_KEYS = ("block_size", "family")


def _refuse_trainer_models(description, where):
    if isinstance(description, dict) and any(key in description for key in _TRAINER_KEYS):
        raise InvalidArgument(
            f"model {where} is a `shardwise train` model file (it has "
            f"{', '.join(k for k in _TRAINER_KEYS if k in description)}); the Python planner "
            "reads Hugging Face configs, manifests, .safetensors files and parameter trees: plan "
            "it with `shardwise plan --model FILE`")


def manifest_of(model):
    """The ModelManifest of any model the module's documentation lists."""
    if isinstance(model, ModelManifest):
        return model
    if isinstance(model, (str, os.PathLike)):
        path = _path_text(os.fspath(model), "model")
        # A preset's name, taken before a file of that name, as `shardwise plan --model` takes it.
        if path in _preset_manifests():
            return ModelManifest.from_json(json.dumps(_preset_manifests()[path]))
        if path.endswith(".safetensors"):
            return _safetensors_manifest(path)
        if os.path.isdir(path):
            path = os.path.join(path, "config.json")
        text = _read_text(path, "model")
        try:
            description = json.loads(text)
        except ValueError:
            description = None  # load_model_description says what is wrong with the text
        _refuse_trainer_models(description, f"'{path}'")
        return load_model_description(text)
    if isinstance(model, dict) and not _holds_arrays(model):
        _refuse_trainer_models(model, "dict")
        return load_model_description(json.dumps(model))
    return ModelManifest.from_json(json.dumps({"parameters": _tree_entries(model)}))


def _holds_arrays(mapping):
    """A dict of name: array/shape is a tree; a config or manifest holds plain values."""
    if "parameters" in mapping or "model_type" in mapping:
        return False
    return bool(mapping) and all(
        hasattr(v, "shape") or (isinstance(v, (tuple, list)) and
                                (not v or isinstance(v[0], (int, tuple, list))))
        for v in mapping.values())


def _cluster(device, devices, devices_per_node):
    if isinstance(device, Cluster):
        return device
    if isinstance(device, dict):
        return Cluster.from_json(json.dumps(device), devices)
    if isinstance(device, str):
        _path_text(device, "device")
    if isinstance(device, (str, os.PathLike)) and os.path.isfile(device):
        return Cluster.from_json(_read_text(os.fspath(device), "device"), devices)
    if device == "cpu":
        raise InvalidArgument("device 'cpu' is this machine as `shardwise plan --device cpu` "
                              "measures it; the Python package does not measure: give a "
                              "cluster (a dict, a file or a Cluster)")
    if device not in Cluster.preset_names():
        raise InvalidArgument(f"device {device!r} is not a preset "
                              f"({', '.join(Cluster.preset_names())}), a cluster file, a dict or "
                              "a Cluster")
    return Cluster.preset(device, devices, devices_per_node)


def _layout(layout, zero, microbatches, schedule, virtual_stages, stage_layers, recompute,
            sequence_parallel):
    if isinstance(layout, Layout):
        return layout
    if isinstance(layout, str):
        # As `shardwise plan --layout` reads it: a mesh's text.
        _text(layout, "layout")
        try:
            mesh = Mesh.parse(layout)
        except ValueError as e:
            raise InvalidArgument(f"layout: {e}") from None
        degrees = dict(zip(mesh.axis_names, mesh.axis_sizes))
    elif isinstance(layout, dict):
        degrees = dict(layout)
    else:
        raise InvalidArgument(f"layout is {layout!r}; expected 'data=2,fsdp=4', a dict or a Layout")
    # The axes' roles are the library's registry (strategy/mesh_axes.hpp), as `plan --layout`
    # reads them.
    check_layout_axes([str(axis) for axis in degrees], "layout")
    return Layout(**degrees, zero=zero, microbatches=microbatches, schedule=schedule,
                  virtual_stages=virtual_stages, stage_layers=stage_layers, recompute=recompute,
                  sequence_parallel=sequence_parallel)


def _inputs(model, devices, global_batch, seq, device, devices_per_node, micro_batch, precision,
            optimizer, efficiency, overlap, heads, reduce_dtype):
    shape = shape_of(manifest_of(model), heads)
    cluster = _cluster(device, devices, devices_per_node)
    setup = TrainingSetup(global_batch, seq, micro_batch=micro_batch, precision=precision,
                          optimizer=optimizer, compute_efficiency=efficiency, overlap=overlap,
                          reduce_dtype=reduce_dtype)
    return shape, cluster, setup


def plan(model, *, devices, global_batch, seq, layout, zero=0, microbatches=None,
         schedule="1f1b", virtual_stages=1, stage_layers=None, recompute="none",
         sequence_parallel=False, device="h100-80gb", devices_per_node=8, micro_batch=1,
         precision="bf16-mixed", optimizer="adam", efficiency=0.5, overlap=0.5, heads=None,
         reduce_dtype=None):
    """The Prediction of one layout, as ``shardwise plan --layout``.

    layout: 'data=2,fsdp=4', {'data': 2, 'fsdp': 4} or a Layout. device: a preset
    (h100-80gb, a100-80gb, h200), a cluster file or dict, or a Cluster.
    """
    shape, cluster, setup = _inputs(model, devices, global_batch, seq, device, devices_per_node,
                                    micro_batch, precision, optimizer, efficiency, overlap, heads,
                                    reduce_dtype)
    chosen = _layout(layout, zero, microbatches, schedule, virtual_stages, stage_layers,
                     recompute, sequence_parallel)
    return plan_layout(shape, cluster, setup, chosen)


def search(model, *, devices, global_batch, seq, top=5, recompute="none",
           sequence_parallel=False, device="h100-80gb", devices_per_node=8, micro_batch=1,
           precision="bf16-mixed", optimizer="adam", efficiency=0.5, overlap=0.5, heads=None,
           model_within_node=True, reduce_dtype=None):
    """Every valid layout ranked by predicted step time, as ``shardwise plan`` without
    --layout: a SearchResult whose ``ranked`` holds the best first, each with why it lost."""
    shape, cluster, setup = _inputs(model, devices, global_batch, seq, device, devices_per_node,
                                    micro_batch, precision, optimizer, efficiency, overlap, heads,
                                    reduce_dtype)
    return search_layouts(shape, cluster, setup, top=top, recompute=recompute,
                          sequence_parallel=sequence_parallel,
                          model_within_node=model_within_node)
