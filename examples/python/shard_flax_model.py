"""A Flax NNX model sharded by the reference module's strategies, on 8 host devices.

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python examples/python/shard_flax_model.py

Each parameter's name, logical axes (from nnx.with_partitioning) and shape go through
shardwise's combined strategy (data parallel 2 with FSDP over 'data', tensor parallel 4) to a
PartitionSpec, which places it with jax.device_put (strategy.apply_sharding); then the planner
says what the model would cost on 8 H100s.
"""
import contextlib

import jax
from flax import nnx

import shardwise as sw


def partitioned(*axes):
    return nnx.with_partitioning(nnx.initializers.lecun_normal(), axes)


class Mlp(nnx.Module):
    def __init__(self, width, inner, rngs):
        self.up = nnx.Linear(width, inner, kernel_init=partitioned("embed", "mlp"), rngs=rngs)
        self.down = nnx.Linear(inner, width, kernel_init=partitioned("mlp", "embed"), rngs=rngs)


class Block(nnx.Module):
    def __init__(self, width, inner, rngs):
        self.mlp = Mlp(width, inner, rngs)


class Model(nnx.Module):
    def __init__(self, rngs):
        self.embed = nnx.Embed(1024, 256, embedding_init=partitioned("vocab", "embed"), rngs=rngs)
        blocks = [Block(256, 1024, rngs) for _ in range(4)]
        self.layers = nnx.List(blocks) if hasattr(nnx, "List") else blocks


def main():
    config = sw.ParallelismConfig.from_sharding_config(
        sw.ShardingConfig(data_parallel_size=2, tensor_parallel_size=4, fsdp_enabled=True,
                          fsdp_min_weight_size=256))
    strategy = sw.default_strategies(config)
    mesh = config.to_mesh()
    # The variables are made whole; shardwise's specs place them (Flax's eager sharding would
    # need a mesh of the logical names).
    eager = nnx.use_eager_sharding(False) if hasattr(nnx, "use_eager_sharding") else None
    with eager or contextlib.nullcontext():
        model = Model(nnx.Rngs(0))
    print(f"{mesh!r} on {len(jax.devices())} JAX devices")
    # Each parameter's spec from its name, logical axes and shape; jax.device_put places it.
    strategy.apply_sharding(model)
    for parameter in sw.flax_parameters(model):
        spec = parameter.value.sharding.spec
        shard = parameter.value.addressable_shards[0].data.shape
        print(f"{parameter.name:26} {str(parameter.value.shape):12} {sw.from_jax(spec)!r:22} "
              f"shard {shard}")

    best = sw.search(model, heads=4, devices=8, global_batch=64, seq=512, top=1).ranked[0]
    print(f"planned on 8 H100s: {best.prediction.layout!r}, "
          f"{best.prediction.step_time_s * 1e3:.3f} ms a step, "
          f"{best.prediction.memory.total / 2**20:.1f} MiB a device")


if __name__ == "__main__":
    main()
