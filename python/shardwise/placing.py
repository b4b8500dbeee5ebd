"""apply_sharding: a strategy's layout on real data.

- a JAX array: placed with ``jax.device_put`` on the strategy's NamedSharding;
- a Flax NNX model or state: every parameter placed so, the model updated in place;
- anything else with a shape and slicing (a NumPy array, a PyTorch tensor): a HostShards,
  each device's block as a view, in mesh order.

The mesh is a shardwise Mesh (device id i is ``jax.devices()[i]``) or a jax.sharding.Mesh.
"""

import sys

from ._shardwise import (InvalidArgument, Mesh, MultiDimensionalStrategy, NamedSharding,
                         ShardingStrategy)
from .interop import flax_parameters, from_jax, to_jax


class HostShards:
    """An array split as a NamedSharding says: ``blocks[device]`` is that device's view."""

    def __init__(self, array, sharding):
        if not isinstance(sharding, NamedSharding):
            raise InvalidArgument(f"sharding is {sharding!r}; expected a shardwise NamedSharding")
        if not hasattr(array, "shape"):
            raise InvalidArgument(f"array is {type(array).__name__}; expected an array with a "
                                  "shape")
        self.sharding = sharding
        self.shape = tuple(array.shape)
        self.blocks = {}
        for shard in sharding.shards(self.shape):
            self.blocks[shard.device] = array[tuple(slice(a, b) for a, b in shard.index)]

    def __repr__(self):
        return f"HostShards(shape={self.shape}, sharding={self.sharding!r})"


def _is_jax_array(value):
    # An array of JAX's exists only once JAX is imported: no import for NumPy's sake.
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(value, jax.Array)


def _nnx():
    if "flax" not in sys.modules:  # a Flax model exists only once Flax is imported
        return None
    from flax import nnx

    return nnx


def _shardwise_mesh(mesh):
    if isinstance(mesh, Mesh):
        return mesh
    try:
        return from_jax(mesh)
    except (ImportError, InvalidArgument):
        raise InvalidArgument(f"mesh is {mesh!r}; expected a shardwise or JAX Mesh") from None


def apply_sharding(strategy, array, mesh):
    """``array`` laid out by ``strategy`` on ``mesh`` (see the module's documentation)."""
    if not isinstance(strategy, ShardingStrategy):
        raise InvalidArgument(f"strategy is {strategy!r}; expected a ShardingStrategy")
    mesh = _shardwise_mesh(mesh)
    nnx = _nnx()
    if nnx is not None and isinstance(array, (nnx.Module, nnx.State)):
        import jax

        state = nnx.state(array) if isinstance(array, nnx.Module) else array
        placed = jax.tree.map(
            lambda leaf: jax.device_put(leaf, to_jax(strategy.sharding_for(leaf.shape, mesh))),
            state)
        if isinstance(array, nnx.Module):
            nnx.update(array, placed)
            return array
        return placed
    if _is_jax_array(array):
        import jax

        return jax.device_put(array, to_jax(strategy.sharding_for(array.shape, mesh)))
    if not hasattr(array, "shape"):
        raise InvalidArgument(f"array is {type(array).__name__}; expected an array with a shape")
    return HostShards(array, strategy.sharding_for(array.shape, mesh))


def apply_combined_sharding(strategy, model, mesh=None):
    """A Flax NNX model's parameters placed by a MultiDimensionalStrategy: each parameter's
    spec is get_combined_partition_spec(name, logical axes, shape) (its nnx.with_partitioning
    names; none: replicated), placed with jax.device_put on ``mesh`` (default: the strategy's
    own). The model is updated in place and returned; every axis that could not stay warns
    (ShardingWarning) as get_combined_partition_spec does."""
    import jax

    mesh = strategy.mesh if mesh is None else _shardwise_mesh(mesh)
    jax_mesh = to_jax(mesh)
    for parameter in flax_parameters(model):
        value = parameter.value
        axes = parameter.logical_axes or (None,) * value.ndim
        spec = strategy.get_combined_partition_spec(parameter.name, axes, shape=value.shape)
        placed = jax.device_put(value, jax.sharding.NamedSharding(jax_mesh, to_jax(spec)))
        if hasattr(parameter.variable, "set_value"):
            parameter.variable.set_value(placed)
        else:
            parameter.variable.value = placed
    return model


ShardingStrategy.apply_sharding = apply_sharding
MultiDimensionalStrategy.apply_sharding = apply_combined_sharding
