"""JAX and Flax NNX: specs and shardings as JAX's types, and a Flax NNX model's parameters
placed on 8 host devices by shardwise's specs, every shard's device, index and shape the C++
layout's. Skipped where JAX or Flax is missing."""
import pytest

import shardwise as sw

jax = pytest.importorskip("jax")
nnx = pytest.importorskip("flax.nnx")
np = pytest.importorskip("numpy")

pytestmark = pytest.mark.skipif(len(jax.devices()) < 8, reason="needs 8 JAX devices (conftest "
                                "sets XLA_FLAGS before JAX starts)")


def partitioned(axes):
    return nnx.with_partitioning(nnx.initializers.lecun_normal(), axes)


class Mlp(nnx.Module):
    def __init__(self, width, inner, rngs):
        self.up = nnx.Linear(width, inner, kernel_init=partitioned(("embed", "mlp")), rngs=rngs)
        self.down = nnx.Linear(inner, width, kernel_init=partitioned(("mlp", "embed")), rngs=rngs)


class Block(nnx.Module):
    def __init__(self, width, inner, rngs):
        self.mlp = Mlp(width, inner, rngs)


def make_model(seed):
    """A TinyModel whose variables are not placed when made: shardwise places them."""
    if hasattr(nnx, "use_eager_sharding"):
        with nnx.use_eager_sharding(False):
            return TinyModel(nnx.Rngs(seed))
    return TinyModel(nnx.Rngs(seed))


class TinyModel(nnx.Module):
    def __init__(self, rngs):
        self.embed = nnx.Embed(256, 64, embedding_init=partitioned(("vocab", "embed")), rngs=rngs)
        blocks = [Block(64, 256, rngs) for _ in range(2)]
        self.layers = nnx.List(blocks) if hasattr(nnx, "List") else blocks


def assert_placed_as(array, sharding):
    """Every addressable shard of a JAX array where `sharding` (shardwise's) puts it."""
    expected = sharding.devices_indices_map(array.shape)
    assert len(array.addressable_shards) == sharding.mesh.size
    for shard in array.addressable_shards:
        assert shard.index == expected[shard.device.id], (shard.device.id, shard.index)
        assert shard.data.shape == sharding.shard_shape(array.shape)
        assert np.array_equal(np.asarray(shard.data), np.asarray(array)[shard.index])


def test_specs_and_shardings_are_jaxs_types():
    mesh = sw.Mesh({"data": 2, "model": 4})
    spec = sw.P("data", None, ("model",))
    assert sw.to_jax(spec) == jax.sharding.PartitionSpec("data", None, "model")
    assert sw.from_jax(jax.sharding.PartitionSpec(("data", "model"), None)) == \
        sw.P(("data", "model"), None)
    named = sw.to_jax(sw.NamedSharding(mesh, sw.P(None, ("data", "model"))))
    assert isinstance(named, jax.sharding.NamedSharding)
    assert sw.from_jax(named) == sw.NamedSharding(mesh, sw.P(None, ("data", "model")))
    # JAX's own devices_indices_map on random layouts: ours, device by device.
    rng = np.random.default_rng(0)
    for _ in range(50):
        first = int(rng.choice([1, 2, 4, 8]))
        sizes = (first, int(rng.choice([s for s in (1, 2, 4, 8) if first * s <= 8])))
        names = ("a", "b")
        mesh = sw.Mesh(sizes, names)
        axes = list(names) + [None]
        spec = sw.P(*[axes[int(i)] for i in rng.permutation(len(axes))[:2]])
        shape = (8, 16)
        ours = sw.NamedSharding(mesh, spec)
        theirs = sw.to_jax(ours).devices_indices_map(shape)
        assert {d.id: index for d, index in theirs.items()} == ours.devices_indices_map(shape)


def test_the_strategies_specs_are_jaxs_and_jax_takes_them():
    """Where JAX is installed every spec the strategies answer with is
    jax.sharding.PartitionSpec: JAX's NamedSharding takes it as a user writes it, it equals
    shardwise's spec of the same entries, and shardwise's functions take it back."""
    config = sw.ParallelismConfig.from_sharding_config(
        sw.ShardingConfig(data_parallel_size=2, tensor_parallel_size=4))
    mesh = config.to_mesh()
    jax_mesh = sw.to_jax(mesh)
    strategy = sw.default_strategies(config)
    tensor = sw.TensorParallelStrategy("model", shard_dimension="out_features")
    fsdp = sw.FSDPStrategy("data", min_weight_size=1)
    specs = {
        "get_partition_spec": (sw.DataParallelStrategy("data").get_partition_spec(
            ("batch", None)), sw.P("data", None)),
        "get_gradient_partition_spec": (fsdp.get_gradient_partition_spec(
            ("out_features", "in_features")), sw.P("data", None)),
        "get_linear_weight_spec": (tensor.get_linear_weight_spec(), sw.P("model", None)),
        "get_linear_weight_spec(row)": (tensor.get_linear_weight_spec("row"),
                                        sw.P(None, "model")),
        "get_attention_qkv_spec": (tensor.get_attention_qkv_spec(), sw.P("model", None)),
        "get_attention_output_spec": (tensor.get_attention_output_spec(), sw.P(None, "model")),
        "get_combined_partition_spec": (strategy.get_combined_partition_spec(
            "mlp.up", ("out_features", "in_features"), shape=(64, 16)), sw.P("model", None)),
        "resolve_combined_partition_spec": (strategy.resolve_combined_partition_spec(
            "mlp.up", ("out_features", "in_features")).spec, sw.P("model", None)),
        "resolve_sharding_conflicts": (strategy.resolve_sharding_conflicts(
            "w", {"tensor": jax.sharding.PartitionSpec("model", None)}), sw.P("model", None)),
        "create_partition_spec": (strategy.create_partition_spec(
            (64, 16), "model.layers.0.mlp.up_proj.weight", num_layers=2).spec,
            sw.P("model", None)),
    }
    for name, (spec, expected) in specs.items():
        assert type(spec) is jax.sharding.PartitionSpec, name
        assert spec == expected and expected == spec and not spec != expected, name
        assert spec == sw.to_jax(expected), name
        named = jax.sharding.NamedSharding(jax_mesh, spec)  # as a user writes it
        assert named.spec == spec
        ours = sw.NamedSharding(mesh, spec)  # and shardwise takes JAX's spec back
        assert ours.spec == expected
        assert {d.id: i for d, i in named.devices_indices_map((64, 16)).items()} == \
            ours.devices_indices_map((64, 16))
        assert sw.to_placements(mesh, spec) == sw.to_placements(mesh, expected)
        assert sw.to_jax(spec) is spec and sw.from_jax(spec) == expected
    assert sw.P("data") != jax.sharding.PartitionSpec("model")
    assert sw.P("data") != jax.sharding.PartitionSpec(jax.sharding.PartitionSpec.UNCONSTRAINED)
    with pytest.raises(sw.InvalidArgument, match="unreduced"):
        sw.NamedSharding(mesh, jax.sharding.PartitionSpec("data", unreduced={"model"}))


def test_a_flax_nnx_model_is_placed_by_shardwises_specs():
    config = sw.ParallelismConfig.from_sharding_config(
        sw.ShardingConfig(data_parallel_size=2, tensor_parallel_size=4, fsdp_enabled=True,
                          fsdp_min_weight_size=1))
    strategy = sw.default_strategies(config)
    mesh = config.to_mesh()
    model = make_model(0)
    before = {p.name: np.asarray(p.value) for p in sw.flax_parameters(model)}
    assert strategy.apply_sharding(model) is model
    placed = 0
    split_over_model = 0
    for parameter in sw.flax_parameters(model):
        axes = parameter.logical_axes or (None,) * parameter.value.ndim  # biases: replicated
        spec = strategy.get_combined_partition_spec(parameter.name, axes,
                                                    shape=parameter.value.shape)
        assert_placed_as(parameter.value, sw.NamedSharding(mesh, spec))
        assert np.array_equal(np.asarray(parameter.value), before[parameter.name])
        placed += 1
        split_over_model += "model" in sw.from_jax(spec).all_axes()  # spec is JAX's
    assert placed == 9  # the embedding, and per block two kernels and two biases
    assert split_over_model == 5  # the vocabulary and every MLP kernel
    # The names and logical axes nnx.with_partitioning gave.
    kernel = {p.name: p for p in sw.flax_parameters(model)}["layers.1.mlp.down.kernel"]
    assert kernel.logical_axes == ("mlp", "embed") and kernel.value.shape == (256, 64)


def test_apply_sharding_places_a_flax_model_and_a_jax_array():
    mesh = sw.Mesh({"fsdp": 8})
    fsdp = sw.FSDPStrategy("fsdp", min_weight_size=64)
    model = make_model(1)
    before = {p.name: np.asarray(p.value) for p in sw.flax_parameters(model)}
    assert fsdp.apply_sharding(model, mesh) is model
    for parameter in sw.flax_parameters(model):
        assert_placed_as(parameter.value, fsdp.sharding_for(parameter.value.shape, mesh))
        assert np.array_equal(np.asarray(parameter.value), before[parameter.name])
    batch = jax.numpy.arange(16 * 4, dtype=jax.numpy.float32).reshape(16, 4)
    data = sw.DataParallelStrategy("data")
    placed = data.apply_sharding(batch, sw.to_jax(sw.Mesh({"data": 8})))
    assert_placed_as(placed, data.sharding_for(batch.shape, sw.Mesh({"data": 8})))


def test_a_flax_nnx_model_is_a_model_to_plan():
    model = make_model(2)
    manifest = sw.manifest_of(model)
    names = [p.name for p in manifest.parameters]
    assert "layers.1.mlp.up.kernel" in names and "embed.embedding" in names
    up = manifest.parameters[names.index("layers.1.mlp.up.kernel")]
    assert up.shape == (64, 256) and up.logical_axes == ["embed", "mlp"]
    shape = sw.shape_of(manifest, heads=4)
    assert (shape.layers, shape.hidden, shape.ffn, shape.vocab) == (2, 64, 256, 256)
    assert shape.parameters == sum(int(np.prod(p.value.shape)) for p in sw.flax_parameters(model))
    replicated = sw.plan(model, heads=4, devices=8, global_batch=8, seq=128, layout="data=8")
    split = sw.plan(model, heads=4, devices=8, global_batch=8, seq=128, layout="data=2,model=4")
    assert split.memory.params < replicated.memory.params
