"""The reference module's classes by their own names, holding what the reference's own tests
expect and what shardwise does instead where the reference is wrong."""
import warnings

import pytest

import shardwise as sw


def test_sharding_config():
    assert sw.ShardingConfig(2, 4, 2).get_total_device_count() == 16
    assert sw.ShardingConfig.from_device_count(8).get_total_device_count() == 8
    # The reference wastes a device on 10 (3 x 3); every answer here uses them all.
    for n in (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 100):
        assert sw.ShardingConfig.from_device_count(n).get_total_device_count() == n
    config = sw.ShardingConfig(data_parallel_size=2, fsdp_enabled=True, fsdp_min_weight_size=512)
    assert config.fsdp_min_weight_size == 512 and config.fsdp_enabled
    assert sw.ShardingConfig.from_json(config.to_json()) == config
    assert "data_parallel_size=2" in repr(config)
    for bad in (dict(data_parallel_size=0), dict(tensor_parallel_size=-2),
                dict(fsdp_min_weight_size=-1)):
        with pytest.raises(sw.InvalidArgument, match=next(iter(bad))):
            sw.ShardingConfig(**bad)
    with pytest.raises(sw.InvalidArgument, match="device count is 0"):
        sw.ShardingConfig.from_device_count(0)


def test_parallelism_config():
    config = sw.ParallelismConfig((2, 4), ("data", "model"),
                                  sw.ShardingConfig(data_parallel_size=2, tensor_parallel_size=4))
    assert config.is_valid() and config.get_total_device_count() == 8
    assert not sw.ParallelismConfig((2, 2), ("data", "model"),
                                    sw.ShardingConfig(data_parallel_size=2,
                                                      tensor_parallel_size=4)).is_valid()
    built = sw.ParallelismConfig.from_sharding_config(
        sw.ShardingConfig(data_parallel_size=2, tensor_parallel_size=4, pipeline_parallel_size=2))
    # The tensor-parallel axis innermost (neighbouring devices have the fastest links).
    assert built.mesh_axis_names == ("pipeline", "data", "model")
    assert built.mesh_shape == (2, 2, 4)
    assert built.get_total_device_count() == 16
    assert sw.ParallelismConfig.from_device_count(8).get_total_device_count() == 8
    assert built.to_mesh().size == 16
    with pytest.raises(sw.InvalidArgument, match="ParallelismConfig"):
        sw.ParallelismConfig((2, 2), ("data", "data")).validate()


def test_data_parallel():
    dp = sw.DataParallelStrategy("data", 0)
    assert dp.get_partition_spec(("batch", "sequence", "hidden")) == sw.P("data", None, None)
    assert repr(dp) == "DataParallelStrategy(axis_name='data', mesh_axis=0)"
    assert dp.get_sharding_constraints() == {"axis_name": "data", "mesh_axis": 0}


def test_fsdp():
    fsdp = sw.FSDPStrategy("fsdp", min_weight_size=512)
    assert fsdp.should_shard_weight((2048, 768))
    assert not fsdp.should_shard_weight((256, 768))
    assert fsdp.get_gradient_partition_spec(("out_features", "in_features")) == sw.P("fsdp", None)
    with pytest.raises(sw.InvalidArgument, match="fallback"):
        sw.FSDPStrategy(fallback="sometimes")


def test_tensor_parallel():
    tp = sw.TensorParallelStrategy("model", shard_dimension="in_features")
    assert tp.get_linear_weight_spec() == sw.P(None, "model")
    # The reference's QKV and output specs assume Flax's (in, out) kernels; shardwise answers in
    # the layout the strategy is told (PyTorch's (out, in) by default).
    flax = sw.TensorParallelStrategy("model", shard_dimension="in_features", layout="in_out")
    assert flax.get_attention_qkv_spec() == sw.P(None, "model")
    assert flax.get_attention_output_spec() == sw.P("model", None)
    assert tp.get_attention_qkv_spec() == sw.P("model", None)
    assert tp.get_attention_output_spec() == sw.P(None, "model")
    # Megatron's column- and row-parallel layers in either layout.
    out_in = sw.TensorParallelStrategy(layout="out_in")
    in_out = sw.TensorParallelStrategy(layout="in_out")
    assert out_in.get_linear_weight_spec("column") == sw.P("model", None)
    assert out_in.get_linear_weight_spec("row") == sw.P(None, "model")
    assert in_out.get_linear_weight_spec("column") == sw.P(None, "model")
    with pytest.raises(sw.InvalidArgument, match="layout"):
        sw.TensorParallelStrategy(layout="sideways")


def test_pipeline():
    pp = sw.PipelineParallelStrategy(num_stages=4)
    assert pp.assign_layers_to_stages(12) == [3, 3, 3, 3]
    assert pp.assign_layers_to_stages(10) == [3, 3, 2, 2]
    assert pp.get_forward_communication_pattern() == [(0, 1), (1, 2), (2, 3)]
    assert pp.get_backward_communication_pattern() == [(1, 0), (2, 1), (3, 2)]
    with pytest.raises(sw.InvalidArgument):
        pp.assign_layers_to_stages(3)
    with pytest.raises(sw.InvalidArgument, match="num_stages"):
        sw.PipelineParallelStrategy(num_stages=2 ** 64)


def test_multi_dimensional_never_drops_an_axis_in_silence():
    config = sw.ParallelismConfig.from_sharding_config(
        sw.ShardingConfig(data_parallel_size=2, tensor_parallel_size=4, fsdp_enabled=True))
    strategy = sw.MultiDimensionalStrategy(
        {"data": sw.DataParallelStrategy("data"),
         "fsdp": sw.FSDPStrategy("data", min_weight_size=1),
         "tensor": sw.TensorParallelStrategy("model", shard_dimension="out_features")}, config)
    # Both want dimension 0: combined there ('model' major), not one dropped as the reference
    # drops it.
    combined = strategy.get_combined_partition_spec("w", ("out_features", "in_features"))
    assert combined == sw.P(("model", "data"), None)
    resolved = strategy.resolve_sharding_conflicts(
        "w", {"tensor": sw.P("model", None), "fsdp": sw.P("data", None)})
    assert resolved == sw.P(("model", "data"), None)
    # A dimension of 6 rows takes neither 4 'model' shards nor 8: the axis cannot stay, and a
    # warning says so; the resolution holds the notes.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = strategy.get_combined_partition_spec("w", ("out_features",), shape=(6,))
    resolution = strategy.resolve_combined_partition_spec("w", ("out_features",), shape=(6,))
    assert resolution.spec == spec and resolution.dropped_axes
    assert [str(w.message) for w in caught] == resolution.notes
    assert all(issubclass(w.category, sw.ShardingWarning) for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sw.ShardingWarning)
        with pytest.raises(sw.ShardingWarning):
            strategy.get_combined_partition_spec("w", ("out_features",), shape=(6,))


def test_default_strategies_and_create_partition_spec():
    config = sw.ParallelismConfig.from_sharding_config(
        sw.ShardingConfig(data_parallel_size=2, tensor_parallel_size=4, pipeline_parallel_size=2))
    strategy = sw.default_strategies(config)
    spec = strategy.get_combined_partition_spec("mlp.up.weight", ("out_features", "in_features"),
                                                shape=(4096, 1024))
    assert spec == sw.P("model", None)
    first = strategy.create_partition_spec((4096, 1024), "model.layers.0.mlp.up_proj.weight",
                                           num_layers=24)
    last = strategy.create_partition_spec((4096, 1024), "model.layers.23.mlp.up_proj.weight",
                                          num_layers=24)
    assert (first.stage, last.stage) == (0, 1)
    assert first.spec == sw.P("model", None) and first.logical_axes == ["mlp", "embed"]


def test_an_expert_axis_splits_the_experts_and_the_batch():
    config = sw.ShardingConfig(data_parallel_size=2, expert_parallel_size=4)
    assert config.expert_parallel_size == 4 and config.get_total_device_count() == 8
    assert "expert_parallel_size=4" in repr(config)
    parallelism = sw.ParallelismConfig.from_sharding_config(config)
    assert list(parallelism.mesh_axis_names) == ["data", "expert"]
    strategy = sw.default_strategies(parallelism)
    spec = strategy.get_combined_partition_spec("model.layers.0.mlp.experts.down_proj",
                                                ("experts", "embed", "mlp"), shape=(8, 32, 16))
    assert spec == sw.P("expert", None, None)
    batch = strategy.get_combined_partition_spec("x", ("batch", "embed"))
    assert batch == sw.P(("data", "expert"), None)
    assert repr(sw.ExpertParallelStrategy()) == "ExpertParallelStrategy(axis_name='expert', mesh_axis=None)"
    layout = sw.Layout(data=2, expert=4)
    assert layout.expert == 4 and layout.devices == 8
    # With a model axis the experts fold over it too, model major, each expert whole.
    folded = sw.default_strategies(sw.ParallelismConfig.from_sharding_config(
        sw.ShardingConfig(tensor_parallel_size=2, expert_parallel_size=2)))
    spec = folded.get_combined_partition_spec("model.layers.0.mlp.experts.gate_up_proj",
                                              ("experts", "expert_mlp", "embed"), shape=(8, 64, 32))
    assert spec == sw.P(("model", "expert"), None, None)


def test_mesh_utilities():
    assert sw.get_optimal_mesh_shape(8, 2) == [4, 2]
    assert sw.get_optimal_mesh_shape(16, 3) == [4, 2, 2]
    assert sw.get_optimal_mesh_shape(10, 2) == [5, 2]  # exactly n, as the reference's is not
    assert sw.validate_mesh_config((2, 4), 8) and not sw.validate_mesh_config((3, 3), 8)
    manager = sw.DeviceMeshManager(8)
    assert manager.create_mesh((2, 4), ("data", "model")) == sw.Mesh({"data": 2, "model": 4})
    with pytest.raises(sw.InvalidArgument):
        manager.create_mesh((4, 4), ("data", "model"))
    assert sw.create_device_mesh((2, 2), ("a", "b"), devices=[3, 2, 1, 0]).devices == (3, 2, 1, 0)
    config, note = sw.optimize_for_transformer(8, "7B", 2048)
    assert config.get_total_device_count() == 8 and note


def test_apply_sharding_on_host_arrays():
    numpy = pytest.importorskip("numpy")
    mesh = sw.Mesh({"data": 4})
    batch = numpy.arange(8 * 3).reshape(8, 3)
    shards = sw.DataParallelStrategy("data").apply_sharding(batch, mesh)
    assert isinstance(shards, sw.HostShards)
    assert sorted(shards.blocks) == [0, 1, 2, 3]
    for device, block in shards.blocks.items():
        assert (block == batch[2 * device:2 * device + 2]).all()
    with pytest.raises(sw.InvalidArgument, match="array"):
        sw.DataParallelStrategy("data").apply_sharding(object(), mesh)


def test_reprs_name_every_setting():
    assert repr(sw.FSDPStrategy(min_weight_size=64)) == \
        "FSDPStrategy(axis_name='fsdp', mesh_axis=None, min_weight_size=64, fallback='replicate')"
    assert repr(sw.TensorParallelStrategy(shard_dimension="in_features", layout="in_out")) == \
        ("TensorParallelStrategy(axis_name='model', mesh_axis=None, "
         "shard_dimension='in_features', layout='in_out')")
    assert repr(sw.PipelineParallelStrategy(4)) == \
        "PipelineParallelStrategy(num_stages=4, axis_name='pipeline', mesh_axis=None)"
    config = sw.ParallelismConfig.from_sharding_config(sw.ShardingConfig(data_parallel_size=2))
    assert repr(config) == ("ParallelismConfig(mesh_shape=(2,), mesh_axis_names=('data',), "
                            "sharding_config=" + repr(config.sharding_config) + ")")
    assert "MultiDimensionalStrategy(strategies=[" in repr(sw.default_strategies(config))


@pytest.mark.parametrize("call, field", [
    (lambda: sw.get_optimal_mesh_shape(8, 100000), "mesh dimensions"),
    (lambda: sw.get_optimal_mesh_shape(2 ** 62, 2), "device count"),
    (lambda: sw.DeviceMeshManager(2 ** 62), "num_devices"),
    (lambda: sw.PipelineParallelStrategy(2 ** 40), "num_stages"),
    (lambda: sw.PipelineParallelStrategy(4).assign_layers_to_stages(True), "num_layers"),
    (lambda: sw.ShardingConfig(data_parallel_size=2 ** 40, tensor_parallel_size=2 ** 40),
     "multiply"),
    (lambda: sw.ParallelismConfig((-1, -1), ("a", "b")).get_total_device_count(), "mesh_shape"),
    (lambda: sw.DataParallelStrategy(mesh_axis=2 ** 31), "mesh_axis"),
    (lambda: sw.DataParallelStrategy(mesh_axis=True), "mesh_axis"),
    (lambda: sw.FSDPStrategy(min_weight_size=2.5), "min_weight_size"),
    (lambda: sw.default_strategies(sw.ParallelismConfig.from_device_count(2))
     .create_partition_spec((4, 4), "layers.3.w", num_layers=-1), "num_layers is -1"),
])
def test_hostile_sizes_are_refused_naming_the_argument(call, field):
    with pytest.raises(sw.InvalidArgument, match=field):
        call()


def test_equal_values_hash_alike():
    for a, b in [(sw.ShardingConfig(2, 4), sw.ShardingConfig(data_parallel_size=2,
                                                            tensor_parallel_size=4)),
                 (sw.ParallelismConfig((2,), ("data",)), sw.ParallelismConfig([2], ["data"]))]:
        assert a == b and hash(a) == hash(b)
    assert sw.ShardingConfig(2) != sw.ShardingConfig(4)


def test_the_warning_outlives_the_modules_name_for_it():
    """The bindings keep their own reference to ShardingWarning: deleting the module's names
    for it and making new types must not leave a freed type behind the warnings."""
    import subprocess
    import sys
    program = """
import gc, warnings
import shardwise as sw
import shardwise._shardwise as native
category = sw.ShardingWarning
del sw.ShardingWarning, native.ShardingWarning, category
gc.collect()
junk = [type(f"Junk{i}", (Exception,), {}) for i in range(2000)]
config = sw.ParallelismConfig.from_sharding_config(sw.ShardingConfig(tensor_parallel_size=4))
strategy = sw.MultiDimensionalStrategy(
    {"tensor": sw.TensorParallelStrategy("model", shard_dimension="out_features")}, config)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    strategy.get_combined_partition_spec("w", ("out_features",), shape=(6,))
print(caught[0].category.__name__)
"""
    out = subprocess.run([sys.executable, "-c", program], check=True, capture_output=True,
                         text=True).stdout
    assert out.strip() == "ShardingWarning"
