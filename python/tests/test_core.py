"""Meshes, specs, named shardings and placements from Python: the layouts JAX gives, Python's
manners (keywords, reprs, equality, hashing) and errors that name the argument."""
import pytest

import shardwise as sw


def test_mesh_spellings_are_one_mesh():
    a = sw.Mesh({"data": 2, "model": 4})
    b = sw.Mesh((2, 4), ("data", "model"))
    c = sw.Mesh.parse("data=2,model=4")
    assert a == b == c and hash(a) == hash(c)
    assert repr(a) == "Mesh('data': 2, 'model': 4)"
    assert a.shape == {"data": 2, "model": 4}
    assert a.devices == tuple(range(8)) and a.size == 8
    assert a.groups("model") == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert a.groups(["data"]) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    reordered = sw.Mesh((2, 2), ("x", "y"), devices=[3, 2, 1, 0])
    assert reordered.devices == (3, 2, 1, 0) and reordered != sw.Mesh((2, 2), ("x", "y"))


def test_partition_spec_is_canonical_as_jax():
    spec = sw.P("data", None, ("fsdp", "model"))
    assert repr(spec) == "P('data', None, ('fsdp', 'model'))"
    assert tuple(spec) == ("data", None, ("fsdp", "model"))
    assert len(spec) == 3 and spec[2] == ("fsdp", "model") and spec[-3] == "data"
    assert sw.P(("x",), ()) == sw.P("x", None)
    assert sw.PartitionSpec.parse("PartitionSpec('data', None)") == sw.P("data", None)
    assert sw.P("a") != sw.P("b") and sw.P("a") != ("a",)
    assert len({sw.P("a"), sw.P(("a",))}) == 1
    with pytest.raises(IndexError):
        spec[3]


def test_devices_indices_map_is_jaxs():
    # P(None, ('data', 'model')) on data=2, model=2 over a (4, 8) array: dimension 1 in four
    # blocks, 'data' major; dimension 0 whole (slice(None) as JAX writes it).
    mesh = sw.Mesh({"data": 2, "model": 2})
    sharding = sw.NamedSharding(mesh, sw.P(None, ("data", "model")))
    assert sharding.devices_indices_map((4, 8)) == {
        0: (slice(None), slice(0, 2)), 1: (slice(None), slice(2, 4)),
        2: (slice(None), slice(4, 6)), 3: (slice(None), slice(6, 8))}
    assert sharding.shard_shape((4, 8)) == (4, 2)
    # Replicas: P('model') leaves 'data' to replicate; replica ids count earlier holders.
    rows = sw.NamedSharding(mesh, sw.P("model"))
    assert [s.replica_id for s in rows.shards((4, 8))] == [0, 0, 1, 1]
    assert [s.index for s in rows.shards((4, 8))][:2] == [((0, 2), (0, 8)), ((2, 4), (0, 8))]
    assert rows.num_replicas == 2 and not rows.is_fully_replicated
    assert sw.NamedSharding(mesh, sw.P()).is_fully_replicated
    # A spec given as a tuple or as text is the same sharding.
    assert sw.NamedSharding(mesh, ("model",)) == sw.NamedSharding(mesh, "P('model')") == rows


def test_uneven_shards_are_torch_chunks():
    mesh = sw.Mesh({"x": 4})
    with pytest.raises(sw.ShardingError, match="not divisible"):
        sw.NamedSharding(mesh, sw.P("x")).shard_shape((10,))
    uneven = sw.NamedSharding(mesh, sw.P("x"), uneven=True)
    # torch.chunk(10, 4): 3, 3, 3, 1.
    assert [s.index for s in uneven.shards((10,))] == [((0, 3),), ((3, 6),), ((6, 9),), ((9, 10),)]


def test_equal_placements_hash_alike_and_stay_as_made():
    assert hash(sw.Shard(1)) == hash(sw.Shard(1)) and sw.Shard(1) == sw.Shard(1)
    assert hash(sw.Replicate()) == hash(sw.Replicate())
    assert hash(sw.Partial("sum")) == hash(sw.Partial()) and sw.Partial() == sw.Partial("sum")
    assert len({sw.Shard(0), sw.Shard(0), sw.Shard(1), sw.Replicate(), sw.Replicate()}) == 3
    with pytest.raises(AttributeError):
        sw.Shard(0).dim = 3


def test_placements_convert_both_ways():
    mesh = sw.Mesh({"data": 2, "model": 4})
    assert sw.to_placements(mesh, sw.P(None, "data")) == [sw.Shard(1), sw.Replicate()]
    spec = sw.P(("model", "data"))
    placements = sw.to_placements(mesh, spec)
    assert placements == [sw.Shard(0, position=1), sw.Shard(0, position=0)]
    assert sw.to_partition_spec(mesh, placements) == spec
    assert repr(sw.Partial("max")) == "Partial(max)"
    with pytest.raises(sw.ShardingError):
        sw.to_partition_spec(mesh, [sw.Partial(), sw.Replicate()])


@pytest.mark.parametrize("call, field", [
    (lambda: sw.Mesh((2, -1), ("a", "b")), "size"),
    (lambda: sw.Mesh((2, 2 ** 63), ("a", "b")), "shape[1]"),
    (lambda: sw.Mesh((2, True), ("a", "b")), "shape[1]"),
    (lambda: sw.Mesh((2, 2.0), ("a", "b")), "shape[1]"),
    (lambda: sw.Mesh((2, 2), ("a",)), "axis_names"),
    (lambda: sw.Mesh((2,)), "axis_names"),
    (lambda: sw.Mesh((2 ** 20, 2 ** 20), ("a", "b")), "devices"),
    (lambda: sw.P("a", 3), "PartitionSpec entry 1"),
    (lambda: sw.P(("a", ("b",))), "PartitionSpec entry 0[1]"),
    (lambda: sw.NamedSharding(sw.Mesh({"a": 2}), sw.P("b")), "'b'"),
    (lambda: sw.NamedSharding(sw.Mesh({"a": 2}), sw.P("a")).shard_shape((-3,)), "shape[0]"),
    (lambda: sw.NamedSharding(sw.Mesh({"a": 2}), sw.P("a")).shard_shape((2 ** 62, 8)), "shape"),
    (lambda: sw.PartitionSpec.parse("P(('a', ('b',)))"), "nested"),
    (lambda: sw.NamedSharding(sw.Mesh({"a": 2}), sw.P("a")).num_shards(2 ** 31 - 1), "ndim"),
    (lambda: sw.NamedSharding(sw.Mesh({"a": 2}), sw.P()).is_equivalent_to(
        sw.NamedSharding(sw.Mesh({"a": 2}), sw.P()), 2 ** 40), "ndim"),
    (lambda: sw.Shard(2 ** 31 - 1), "dim"),
    (lambda: sw.Shard(True), "dim"),
    (lambda: sw.to_partition_spec(sw.Mesh({"a": 2}), [sw.Replicate()], ndim=2 ** 40), "ndim"),
    (lambda: sw.NamedSharding(sw.Mesh({"a": 2}), __import__("itertools").repeat(None)), "spec"),
    (lambda: sw.NamedSharding(sw.Mesh({"a": 2}), {"a"}), "spec"),
    (lambda: sw.NamedSharding(sw.Mesh({"a": 2}), (None,) * 65), "spec"),
    (lambda: sw.NamedSharding(sw.Mesh({"a": 2}), sw.P()).shard_shape((1,) * 65), "shape"),
    (lambda: sw.Mesh({"a": 2}).coords_of(2 ** 63), "device"),
    (lambda: sw.P("a")[True], "index"),
])
def test_bad_input_is_one_error_naming_the_argument(call, field):
    with pytest.raises(sw.ShardwiseError) as raised:
        call()
    assert isinstance(raised.value, ValueError)
    assert field in str(raised.value)
