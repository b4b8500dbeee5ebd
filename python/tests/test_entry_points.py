"""Every public function, method and constructor of the package, called with a str that is not
valid text (a lone surrogate) in each of its arguments: a ValueError or TypeError naming the
argument, never a RuntimeError ("std::bad_cast") or a crash. The entry points are enumerated
from the modules, so that a new one, or a new argument of one, fails here until it is covered.
"""
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys

import pytest

import shardwise as sw
import shardwise._shardwise as native

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY_MANIFEST = os.path.join(REPOSITORY, "examples", "models", "tiny_manifest.json")

BAD = ("\ud800", "a\udfffb")

# Record types a user builds with any values: they convert nothing.
RECORDS = {"FlaxParameter"}

TREE = [("embed.weight", (256, 64)), ("layers.0.attn.qkv.weight", (192, 64)),
        ("layers.0.attn.out.weight", (64, 64)), ("layers.0.mlp.up.weight", (256, 64)),
        ("layers.0.mlp.down.weight", (64, 256)), ("lm_head.weight", (256, 64))]
CLUSTER = {"devices_per_node": 8, "memory_bytes": 80e9, "peak_flops_fp32": 60e12,
           "peak_flops_bf16": 900e12, "intra_node": {"bandwidth": 400e9, "latency": 1e-5},
           "inter_node": {"bandwidth": 50e9, "latency": 1e-5}}
HEADER = json.dumps({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}})


def has(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


class Case:
    """One entry point: `call(**kwargs)` succeeds; each kwarg made bad must be refused naming
    `names.get(kwarg, kwarg)`. `needs`: a module the entry point needs (skipped without it)."""

    def __init__(self, name, call, kwargs, names=None, needs=None, signature=True):
        self.name, self.call, self.kwargs = name, call, kwargs
        self.names = names or {}
        self.needs = needs
        self.signature = signature  # whether kwargs are the entry point's own parameters


def cases():
    mesh = sw.Mesh({"data": 2, "model": 2})
    config = sw.ParallelismConfig.from_sharding_config(
        sw.ShardingConfig(data_parallel_size=2, tensor_parallel_size=2))
    multi = sw.default_strategies(config)
    sharding = sw.NamedSharding(mesh, sw.P("data"))
    manifest = sw.manifest_of(TREE)
    shape = sw.shape_of(manifest, heads=4)
    cluster = sw.Cluster.preset("h100-80gb", 8)
    setup = sw.TrainingSetup(8, 128)
    layout = sw.Layout(data=8)
    data = sw.DataParallelStrategy("data")
    fsdp = sw.FSDPStrategy("fsdp", min_weight_size=1)
    tensor = sw.TensorParallelStrategy("model")
    pipeline = sw.PipelineParallelStrategy(2)
    numpy = pytest.importorskip("numpy")
    array = numpy.zeros((4, 4))
    plan_args = dict(model=TREE, heads=4, devices=8, global_batch=8, seq=128, device="h100-80gb",
                     devices_per_node=8, micro_batch=1, precision="bf16-mixed",
                     optimizer="adam", efficiency=0.5, overlap=0.5, recompute="none",
                     sequence_parallel=False, reduce_dtype=None)
    return [
        # Meshes, specs, shardings, placements.
        Case("Mesh", sw.Mesh, dict(shape={"data": 2, "model": 2}, axis_names=None,
                                   devices=None)),
        Case("Mesh", sw.Mesh, dict(shape=(2, 2), axis_names=("data", "model"),
                                   devices=[0, 1, 2, 3])),
        Case("Mesh.parse", sw.Mesh.parse, dict(text="data=2,model=2")),
        Case("Mesh.axis_size", mesh.axis_size, dict(name="data")),
        Case("Mesh.coords_of", mesh.coords_of, dict(device=1)),
        Case("Mesh.device_at", mesh.device_at, dict(coords=(1, 1))),
        Case("Mesh.groups", mesh.groups, dict(axes="model")),
        Case("Mesh.groups", mesh.groups, dict(axes=("data", "model"))),
        Case("PartitionSpec", lambda first, second: sw.P(first, second),
             dict(first="data", second=("fsdp", "model")),
             names=dict(first="PartitionSpec entry 0", second="PartitionSpec entry 1"),
             signature=False),
        Case("PartitionSpec.parse", sw.PartitionSpec.parse, dict(text="P('data', None)")),
        Case("NamedSharding", sw.NamedSharding, dict(mesh=mesh, spec=("data", None),
                                                     uneven=False)),
        Case("NamedSharding", sw.NamedSharding, dict(mesh=mesh, spec="P('data')")),
        Case("NamedSharding.validate", sharding.validate, dict(shape=(4, 4))),
        Case("NamedSharding.shard_shape", sharding.shard_shape, dict(shape=(4, 4))),
        Case("NamedSharding.devices_indices_map", sharding.devices_indices_map,
             dict(shape=(4, 4))),
        Case("NamedSharding.shards", sharding.shards, dict(shape=(4, 4))),
        Case("NamedSharding.num_shards", sharding.num_shards, dict(ndim=2)),
        Case("NamedSharding.replica_id", sharding.replica_id, dict(shape=(4, 4), device=0)),
        Case("NamedSharding.is_equivalent_to", sharding.is_equivalent_to,
             dict(other=sharding, ndim=2)),
        Case("Shard", sw.Shard, dict(dim=0, position=-1)),
        Case("Partial", sw.Partial, dict(op="max")),
        Case("to_placements", sw.to_placements, dict(mesh=mesh, spec=("data",))),
        Case("to_partition_spec", sw.to_partition_spec,
             dict(mesh=mesh, placements=[sw.Shard(0), sw.Replicate()], ndim=2)),
        # Configurations and mesh utilities.
        Case("ShardingConfig", sw.ShardingConfig,
             dict(data_parallel_size=2, tensor_parallel_size=1, pipeline_parallel_size=1,
                  fsdp_enabled=False, fsdp_min_weight_size=1024, fsdp_parallel_size=1,
                  expert_parallel_size=1)),
        Case("ShardingConfig.from_device_count", sw.ShardingConfig.from_device_count, dict(n=4)),
        Case("ShardingConfig.from_json", sw.ShardingConfig.from_json,
             dict(text=sw.ShardingConfig(2).to_json())),
        Case("ParallelismConfig", sw.ParallelismConfig,
             dict(mesh_shape=(2, 2), mesh_axis_names=("data", "model"), sharding_config=None)),
        Case("ParallelismConfig.from_sharding_config",
             sw.ParallelismConfig.from_sharding_config, dict(config=sw.ShardingConfig(2))),
        Case("ParallelismConfig.from_device_count", sw.ParallelismConfig.from_device_count,
             dict(n=4)),
        Case("ParallelismConfig.to_mesh", config.to_mesh, dict(devices=[3, 2, 1, 0])),
        Case("ParallelismConfig.from_json", sw.ParallelismConfig.from_json,
             dict(text=config.to_json())),
        Case("create_device_mesh", sw.create_device_mesh,
             dict(shape=(2, 2), names=("a", "b"), devices=[0, 1, 2, 3])),
        Case("DeviceMeshManager", sw.DeviceMeshManager, dict(devices=8)),
        Case("DeviceMeshManager.create_mesh", sw.DeviceMeshManager(4).create_mesh,
             dict(shape=(2, 2), names=("a", "b"))),
        Case("DeviceMeshManager.create_mesh_from_config",
             sw.DeviceMeshManager(4).create_mesh_from_config, dict(config=config)),
        Case("get_optimal_mesh_shape", sw.get_optimal_mesh_shape, dict(n=8, num_dims=2)),
        Case("validate_mesh_config", sw.validate_mesh_config, dict(shape=(2, 2),
                                                                   num_devices=4)),
        Case("optimize_for_transformer", sw.optimize_for_transformer,
             dict(num_devices=8, model_size="7B", sequence_length=2048)),
        # The strategies.
        Case("DataParallelStrategy", sw.DataParallelStrategy,
             dict(axis_name="data", mesh_axis=None)),
        Case("ExpertParallelStrategy", sw.ExpertParallelStrategy,
             dict(axis_name="expert", mesh_axis=None)),
        Case("FSDPStrategy", sw.FSDPStrategy,
             dict(axis_name="fsdp", mesh_axis=0, min_weight_size=8, fallback="replicate")),
        Case("TensorParallelStrategy", sw.TensorParallelStrategy,
             dict(axis_name="model", mesh_axis=None, shard_dimension="in_features",
                  layout="in_out")),
        Case("PipelineParallelStrategy", sw.PipelineParallelStrategy,
             dict(num_stages=2, axis_name="pipeline", mesh_axis=None)),
        Case("ShardingStrategy.get_partition_spec", data.get_partition_spec,
             dict(dim_names=("batch", None))),
        Case("ShardingStrategy.sharding_for", data.sharding_for, dict(shape=(4, 4), mesh=mesh)),
        Case("ShardingStrategy.apply_sharding", data.apply_sharding,
             dict(array=array, mesh=mesh)),
        Case("apply_sharding", sw.apply_sharding, dict(strategy=data, array=array, mesh=mesh)),
        Case("HostShards", sw.HostShards, dict(array=array, sharding=sharding)),
        Case("FSDPStrategy.should_shard_weight", fsdp.should_shard_weight,
             dict(weight=(4, 4))),
        Case("FSDPStrategy.get_gradient_partition_spec", fsdp.get_gradient_partition_spec,
             dict(dim_names=("out_features", "in_features"))),
        Case("TensorParallelStrategy.get_linear_weight_spec", tensor.get_linear_weight_spec,
             dict(kind="row")),
        Case("PipelineParallelStrategy.assign_layers_to_stages",
             pipeline.assign_layers_to_stages, dict(num_layers=4, allow_empty_stages=False)),
        Case("MultiDimensionalStrategy", sw.MultiDimensionalStrategy,
             dict(strategies={"data": data, "tensor": tensor}, config=config)),
        Case("MultiDimensionalStrategy.get_combined_partition_spec",
             multi.get_combined_partition_spec,
             dict(tensor_name="mlp.up", dim_names=("out_features", "in_features"),
                  shape=(8, 8))),
        Case("MultiDimensionalStrategy.resolve_combined_partition_spec",
             multi.resolve_combined_partition_spec,
             dict(tensor_name="mlp.up", dim_names=("out_features", None), shape=None)),
        Case("MultiDimensionalStrategy.resolve_sharding_conflicts",
             multi.resolve_sharding_conflicts,
             dict(tensor_name="w", proposed={"tensor": ("model", None)}, shape=(8, 8))),
        Case("MultiDimensionalStrategy.resolve_sharding_conflicts",
             multi.resolve_sharding_conflicts,
             dict(tensor_name="w", proposed={"tensor": "P('model', None)"}, shape=None),
             names=dict(proposed="proposed")),
        Case("MultiDimensionalStrategy.create_partition_spec", multi.create_partition_spec,
             dict(param_shape=(8, 8), param_name="model.layers.0.mlp.up_proj.weight",
                  num_layers=2, strict=False)),
        Case("MultiDimensionalStrategy.apply_sharding", multi.apply_sharding,
             dict(model=None, mesh=None), needs="flax.nnx", signature=True),
        Case("default_strategies", sw.default_strategies, dict(config=config)),
        # Interop.
        Case("to_jax", sw.to_jax, dict(value=mesh, devices=None), needs="jax"),
        Case("from_jax", sw.from_jax, dict(value=sw.P("data")), needs="jax"),
        Case("to_dtensor_placements", sw.to_dtensor_placements,
             dict(mesh=mesh, spec=("data", None), shape=(4, 4)), needs="torch"),
        Case("flax_parameters", sw.flax_parameters, dict(model=None), needs="flax.nnx"),
        # The planner.
        Case("manifest_of", sw.manifest_of, dict(model=TINY_MANIFEST)),
        Case("manifest_of", sw.manifest_of, dict(model=TREE)),
        Case("shape_of", sw.shape_of, dict(manifest=manifest, heads=4)),
        Case("ModelManifest.from_json", sw.ModelManifest.from_json,
             dict(text=manifest.to_json())),
        Case("load_model_description", native.load_model_description,
             dict(text=manifest.to_json())),
        Case("manifest_from_safetensors_header", native.manifest_from_safetensors_header,
             dict(header=HEADER, data_bytes=16)),
        Case("Cluster.preset", sw.Cluster.preset,
             dict(name="h100-80gb", devices=8, devices_per_node=8)),
        Case("Cluster.from_json", sw.Cluster.from_json, dict(text=json.dumps(CLUSTER),
                                                             devices=8)),
        Case("TrainingSetup", sw.TrainingSetup,
             dict(global_batch=8, seq=128, micro_batch=1, precision="bf16-mixed",
                  optimizer="adam", compute_efficiency=0.5, overlap=0.5, reduce_dtype=None)),
        Case("Layout", sw.Layout,
             dict(data=2, fsdp=1, model=1, pipeline=2, zero=1, microbatches=2, schedule="1f1b",
                  virtual_stages=1, stage_layers=[1, 1], recompute="none",
                  sequence_parallel=False, expert=1)),
        Case("check_layout_axes", native.check_layout_axes,
             dict(axes=["data", "model"], field="layout")),
        Case("plan_layout", native.plan_layout,
             dict(model=shape, cluster=cluster, setup=setup, layout=layout)),
        Case("search_layouts", native.search_layouts,
             dict(model=shape, cluster=cluster, setup=setup, top=2, recompute="none",
                  sequence_parallel=False, model_within_node=True)),
        Case("plan", sw.plan, dict(plan_args, layout="data=8", zero=0,
                                   microbatches=None, schedule="1f1b", virtual_stages=1,
                                   stage_layers=None), names=dict(efficiency="efficiency")),
        Case("plan", sw.plan, dict(plan_args, layout={"data": 8})),
        Case("search", sw.search, dict(plan_args, top=2, model_within_node=True)),
    ]


def parameters_of(entry, method=False):
    """The names of an entry point's parameters (self, *args and **kwargs left out); `method`:
    a Python function set on a class, whose first parameter is the instance."""
    signatures = getattr(entry, "__nb_signature__", None)
    if signatures is None:
        names = [p.name for p in inspect.signature(entry).parameters.values()
                 if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        return names[1:] if method or names[:1] == ["self"] else names
    names = []
    for text, *_ in signatures:
        inner = text[text.index("(") + 1:text.rindex(")")]
        depth, part, parts = 0, "", []
        for char in inner:  # split at the commas outside brackets
            depth += char in "[(" and 1 or 0
            depth -= char in "])" and 1 or 0
            if char == "," and depth == 0:
                parts.append(part)
                part = ""
            else:
                part += char
        parts.append(part)
        for part in parts:
            name = re.split(r"[:=]", part.strip())[0].strip()
            if name and name not in ("self", "/", "*") and not name.startswith("*"):
                names.append(name)
    return names


def takes_text(entry, parameter):
    """Whether the binding declares `parameter` a str (nanobind's signature says so)."""
    for text, *_ in getattr(entry, "__nb_signature__", ()):
        if re.search(rf"\b{parameter}: str\b", text):
            return True
    return False


def entry_points():
    """{name: callable} for every public function, constructor and method taking an argument,
    of the package and of its native module."""
    found = {}
    for module in (sw, native):
        for name in dir(module):
            if name.startswith("_") or name in RECORDS:
                continue
            value = getattr(module, name)
            if inspect.isclass(value):
                if issubclass(value, BaseException):
                    continue
                init = value.__dict__.get("__init__")
                if init is not None and (hasattr(init, "__nb_signature__") or
                                         inspect.isfunction(init)):
                    found[value.__name__] = (init, False)
                for attr, member in vars(value).items():
                    if attr.startswith("_"):
                        continue
                    member = getattr(value, attr)
                    if callable(member) and not inspect.isclass(member):
                        found[f"{value.__name__}.{attr}"] = (member, inspect.isfunction(member))
            elif callable(value):
                found[getattr(value, "__name__", name)] = (value, False)
    return {name: parameters_of(*entry) for name, entry in found.items() if parameters_of(*entry)}


def test_every_entry_point_taking_an_argument_is_covered_with_every_argument():
    covered = {}
    for case in cases():
        if case.signature:
            covered.setdefault(case.name, set()).update(case.kwargs)
        else:
            covered.setdefault(case.name, None)
    missing = []
    for name, parameters in sorted(entry_points().items()):
        if name not in covered:
            missing.append(f"{name}: not covered")
        elif covered[name] is not None:
            left = set(parameters) - covered[name]
            if left:
                missing.append(f"{name}: {sorted(left)} not covered")
    assert not missing, "add a Case for each:\n" + "\n".join(missing)


def variants(value, bad):
    """`bad` as the value itself, inside a sequence of names, or as a dict's key."""
    yield bad
    if isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            if isinstance(item, str):
                yield type(value)(bad if j == i else x for j, x in enumerate(value))
                break
            if isinstance(item, tuple) and item and isinstance(item[0], str):
                yield type(value)((bad,) + item[1:] if j == i else x for j, x in enumerate(value))
                break
    if isinstance(value, dict) and value and all(isinstance(k, str) for k in value):
        items = list(value.items())
        yield dict([(bad, items[0][1])] + items[1:])


@pytest.mark.parametrize("bad", BAD, ids=["alone", "inside"])
def test_a_lone_surrogate_is_refused_naming_the_argument(bad):
    import warnings

    checked, failures = 0, []
    for case in cases():
        if case.needs and not has(case.needs):
            continue
        if case.needs != "flax.nnx":  # those need a model; every bad argument is refused first
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                case.call(**case.kwargs)  # the good call works
        for parameter, value in case.kwargs.items():
            for wrong in variants(value, bad):
                where = f"{case.name}({parameter}={wrong!r})"
                checked += 1
                try:
                    case.call(**dict(case.kwargs, **{parameter: wrong}))
                except (ValueError, TypeError) as error:
                    message = str(error)
                    if isinstance(error, (RuntimeError, SystemError)) or "bad_cast" in message:
                        failures.append(f"{where}: {type(error).__name__}: {message}")
                    elif case.names.get(parameter, parameter) not in message:
                        failures.append(f"{where}: does not name {parameter}: {message}")
                    elif (isinstance(wrong, str) and case.signature and
                          takes_text(case.call, parameter) and
                          (not isinstance(error, sw.InvalidArgument) or
                           "not valid text" not in message)):
                        failures.append(f"{where}: not InvalidArgument 'not valid text': "
                                        f"{type(error).__name__}: {message}")
                except Exception as error:  # noqa: BLE001 - what else is raised is the failure
                    failures.append(f"{where}: {type(error).__name__}: {error}")
                else:
                    failures.append(f"{where}: accepted")
    assert not failures, "\n".join(failures)
    assert checked > 150


@pytest.mark.parametrize("call, field", [
    (lambda s: sw.Mesh.parse(s), "text"),
    (lambda s: sw.Mesh({s: 2}), "a key of shape"),
    (lambda s: sw.Mesh((2,), (s,)), "axis_names[0]"),
    (lambda s: sw.P("data", s), "PartitionSpec entry 1"),
    (lambda s: sw.P(("data", s)), "PartitionSpec entry 0[1]"),
    (lambda s: sw.NamedSharding(sw.Mesh({"a": 2}), s), "spec"),
    (lambda s: sw.FSDPStrategy(axis_name=s), "axis_name"),
    (lambda s: sw.TensorParallelStrategy(shard_dimension=s), "shard_dimension"),
    (lambda s: sw.DataParallelStrategy().get_partition_spec(("batch", s)), "dim_names[1]"),
    (lambda s: sw.default_strategies(sw.ParallelismConfig.from_device_count(2))
     .get_combined_partition_spec(s, ("batch",)), "tensor_name"),
    (lambda s: sw.MultiDimensionalStrategy({s: sw.DataParallelStrategy()},
                                           sw.ParallelismConfig.from_device_count(2)),
     "a key of strategies"),
    (lambda s: sw.TrainingSetup(8, 128, precision=s), "precision"),
    (lambda s: sw.TrainingSetup(8, 128, reduce_dtype=s), "reduce_dtype"),
    (lambda s: sw.plan(TREE, heads=4, devices=8, global_batch=8, seq=128, layout=s), "layout"),
    (lambda s: sw.plan(TREE, heads=4, devices=8, global_batch=8, seq=128, layout="data=8",
                       device=s), "device"),
    (lambda s: sw.manifest_of(s), "model"),
    (lambda s: sw.manifest_of([(s, (2, 2))]), "model: parameter name"),
])
def test_the_message_says_the_text_is_not_valid(call, field):
    for bad in BAD:
        with pytest.raises(sw.InvalidArgument) as raised:
            call(bad)
        message = str(raised.value)
        assert message.startswith(field) and "not valid text" in message, message
        assert "lone surrogate" in message
        message.encode("utf-8")  # the message itself is text a terminal prints


def test_a_failed_cast_is_an_invalid_argument_not_a_runtime_error():
    # The safety net: nb::cast of a str that is not valid text, as no binding does any more.
    for value in ("\ud800", 3):
        with pytest.raises(sw.InvalidArgument, match="could not be converted"):
            native._cast_to_text(value)
    assert native._cast_to_text("text") == "text"


def test_a_wrong_type_where_a_str_belongs_is_a_type_error():
    with pytest.raises(TypeError, match="text"):
        sw.Mesh.parse(3)
    with pytest.raises(TypeError, match="axis_name"):
        sw.DataParallelStrategy(axis_name=b"data")


def test_a_file_name_of_bytes_that_are_not_utf8_is_a_path_still(tmp_path):
    # os.fsdecode escapes such bytes as U+DC80..U+DCFF: the planner opens the file by them.
    folder = os.fsdecode(os.fsencode(str(tmp_path)) + b"/\xff")
    os.mkdir(folder)
    with open(os.path.join(folder, "config.json"), "w") as file:
        json.dump(json.load(open(os.path.join(REPOSITORY, "examples", "models", "gpt2.json"))),
                  file)
    assert sw.manifest_of(folder).num_parameters == 124439808


def test_strategies_answer_with_specs_without_jax():
    """Where JAX cannot be imported the strategies answer with shardwise's PartitionSpec, and
    `import shardwise` imports no JAX either way."""
    program = """
import sys
import shardwise as sw
assert "jax" not in sys.modules
sys.modules["jax"] = None  # as if JAX were not installed
spec = sw.DataParallelStrategy("data").get_partition_spec(("batch", None))
assert type(spec) is sw.PartitionSpec and spec == sw.P("data", None), spec
config = sw.ParallelismConfig.from_device_count(4)
strategy = sw.default_strategies(config)
placed = strategy.create_partition_spec((8, 8), "layers.0.mlp.up.weight", num_layers=2)
assert type(placed.spec) is sw.PartitionSpec
shards = sw.DataParallelStrategy("data").apply_sharding(__import__("numpy").zeros((4, 2)),
                                                         sw.Mesh({"data": 2}))
assert sorted(shards.blocks) == [0, 1]
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", program], check=True, capture_output=True,
                         text=True).stdout
    assert out.strip() == "ok"


def test_apply_sharding_of_a_numpy_array_imports_no_jax():
    program = """
import sys
import numpy
import shardwise as sw
shards = sw.DataParallelStrategy("data").apply_sharding(numpy.zeros((4, 2)), sw.Mesh({"data": 2}))
assert sorted(shards.blocks) == [0, 1]
print("jax" in sys.modules, "flax" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", program], check=True, capture_output=True,
                         text=True).stdout
    assert out.split() == ["False", "False"]
