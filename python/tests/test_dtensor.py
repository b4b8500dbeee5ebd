"""PyTorch DTensor: shardwise's placements distribute a tensor over a gloo group of 4 processes
into the local shards shardwise's layout names, uneven (torch.chunk) blocks included. Skipped
where PyTorch is missing."""
import os

import pytest

import shardwise as sw

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("PyTorch without gloo", allow_module_level=True)

CASES = [
    # (mesh, spec, shape, uneven)
    ({"a": 4}, sw.P("a"), (8, 3), False),
    ({"a": 4}, sw.P(None, "a"), (3, 10), True),     # torch.chunk: 3, 3, 3, 1
    ({"a": 4}, sw.P("a"), (2, 5), True),             # two empty blocks
    ({"a": 2, "b": 2}, sw.P("a", "b"), (6, 5), True),
    ({"a": 2, "b": 2}, sw.P(("a", "b")), (8, 2), False),
    ({"a": 2, "b": 2}, sw.P(None, "b"), (4, 6), False),
    ({"a": 2, "b": 2}, sw.P(), (3, 3), False),
]


def _run(rank, world, store_path, results):
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import distribute_tensor

    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank,
                            world_size=world)
    try:
        for case, (axes, spec, shape, uneven) in enumerate(CASES):
            mesh = sw.Mesh(axes)
            torch_mesh = DeviceMesh("cpu", torch.tensor(mesh.devices).reshape(mesh.axis_sizes),
                                    mesh_dim_names=mesh.axis_names)
            whole = torch.arange(int(torch.tensor(shape).prod())).reshape(shape)
            local = distribute_tensor(whole, torch_mesh,
                                      sw.to_dtensor_placements(mesh, spec, shape=shape)).to_local()
            results.put((case, rank, tuple(local.shape), local.flatten().tolist()))
    finally:
        dist.destroy_process_group()


def test_dtensor_local_shards_are_shardwises(tmp_path):
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    results = context.Queue()
    world = 4
    processes = [context.Process(target=_run, args=(rank, world, str(tmp_path / "store"), results))
                 for rank in range(world)]
    for process in processes:
        process.start()
    got = {}
    for _ in range(world * len(CASES)):
        case, rank, shape, values = results.get(timeout=300)
        got[case, rank] = (shape, values)
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    for case, (axes, spec, shape, uneven) in enumerate(CASES):
        sharding = sw.NamedSharding(sw.Mesh(axes), spec, uneven=uneven)
        whole = torch.arange(int(torch.tensor(shape).prod())).reshape(shape)
        for shard in sharding.shards(shape):
            block = whole[tuple(slice(a, b) for a, b in shard.index)]
            assert got[case, shard.device] == (tuple(block.shape), block.flatten().tolist()), \
                (case, shard.device)


def test_placements_dtensor_cannot_hold_are_refused():
    from torch.distributed.tensor import Replicate, Shard

    mesh = sw.Mesh({"data": 2, "model": 4})
    assert sw.to_dtensor_placements(mesh, sw.P(None, "data")) == [Shard(1), Replicate()]
    assert sw.to_dtensor_placements(mesh, sw.P(("data", "model"))) == [Shard(0), Shard(0)]
    # DTensor orders the axes of one dimension as the mesh does.
    with pytest.raises(sw.InvalidArgument, match="dimension 0"):
        sw.to_dtensor_placements(mesh, sw.P(("model", "data")))
    # DTensor cuts such a dimension axis by axis (10 -> 5, 5 -> 2, 2, 1, 1 + ...), not in eight
    # torch.chunk blocks: refused where the axes do not divide it.
    with pytest.raises(sw.InvalidArgument, match="dimension 0 of size 10"):
        sw.to_dtensor_placements(mesh, sw.P(("data", "model")), shape=(10,))
    with pytest.raises(sw.InvalidArgument, match="axis 'fsdp'"):
        sw.to_dtensor_placements(mesh, sw.P("fsdp"))
