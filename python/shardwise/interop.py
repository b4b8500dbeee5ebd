"""Conversions to and from JAX's and PyTorch's types, importing neither until asked.

A shardwise Mesh's device ids are positions in ``jax.devices()``: device id i is
``jax.devices()[i]``, and a JAX mesh converts back by its devices' ids.
"""

import operator
from typing import Any, NamedTuple, Optional, Tuple

from ._shardwise import (InvalidArgument, Mesh, NamedSharding, PartitionSpec, _spec_from,
                         to_placements)


def _jax():
    try:
        import jax
    except ImportError as missing:  # pragma: no cover - the message is the point
        raise ImportError("shardwise's JAX interop needs jax: pip install jax") from missing
    return jax


def _jax_mesh(mesh, devices=None):
    import numpy as np

    jax = _jax()
    available = list(devices) if devices is not None else jax.devices()
    if isinstance(devices, str) or not all(isinstance(d, jax.Device) for d in available):
        raise InvalidArgument(f"devices is {devices!r}; expected a sequence of JAX devices")
    ids = mesh.devices
    if max(ids) >= len(available):
        raise InvalidArgument(
            f"mesh {mesh!r} names device {max(ids)}, but JAX has {len(available)} devices "
            "(set XLA_FLAGS=--xla_force_host_platform_device_count=N for N host devices)")
    grid = np.array([available[i] for i in ids], dtype=object).reshape(mesh.axis_sizes)
    return jax.sharding.Mesh(grid, mesh.axis_names)


def to_jax(value, devices=None):
    """A shardwise Mesh, PartitionSpec or NamedSharding as JAX's own type; JAX's own types as
    they are (the strategies' specs are JAX's already where JAX is installed).

    devices: the JAX devices that device ids index (default ``jax.devices()``).
    """
    jax = _jax()
    if isinstance(value, (jax.sharding.PartitionSpec, jax.sharding.Mesh,
                          jax.sharding.NamedSharding)):
        return value
    if isinstance(value, PartitionSpec):
        return jax.sharding.PartitionSpec(*value)
    if isinstance(value, Mesh):
        return _jax_mesh(value, devices)
    if isinstance(value, NamedSharding):
        if value.uneven:
            raise InvalidArgument(
                f"{value!r} is uneven (torch.chunk blocks); JAX's NamedSharding needs every "
                "split dimension divisible")
        return jax.sharding.NamedSharding(_jax_mesh(value.mesh, devices),
                                          jax.sharding.PartitionSpec(*value.spec))
    raise InvalidArgument(f"value is {value!r}; to_jax takes a Mesh, PartitionSpec or "
                          "NamedSharding")


def from_jax(value):
    """A jax.sharding Mesh, PartitionSpec or NamedSharding as shardwise's type; shardwise's own
    types as they are."""
    if isinstance(value, (PartitionSpec, Mesh, NamedSharding)):
        return value
    jax = _jax()
    if isinstance(value, jax.sharding.PartitionSpec):
        return _spec_from(value, "value")
    if isinstance(value, jax.sharding.Mesh):
        return Mesh(tuple(value.devices.shape), tuple(value.axis_names),
                    devices=[d.id for d in value.devices.flat])
    if isinstance(value, jax.sharding.NamedSharding):
        return NamedSharding(from_jax(value.mesh), from_jax(value.spec))
    raise InvalidArgument(
        f"value is {value!r}; from_jax takes a jax.sharding Mesh, PartitionSpec or NamedSharding")


def to_dtensor_placements(mesh, spec, shape=None):
    """The DTensor placements of ``spec`` on ``mesh``: one per mesh axis, ``Shard(d)`` or
    ``Replicate()`` from torch.distributed.tensor. spec: shardwise's or JAX's PartitionSpec, a
    tuple of entries or a spec's text.

    Where several mesh axes split one dimension, DTensor orders them by mesh axis (the earlier
    axis major), as ``P(('data', 'model'))`` on a mesh of ('data', 'model') does; a spec that
    orders them otherwise (``P(('model', 'data'))`` there) has no placements of ``Shard`` and
    is refused naming the dimension. shape, where given, is the array's: the spec must fit its
    rank, and a dimension split by several axes must be divisible by their product, since
    DTensor cuts it axis by axis where shardwise (and torch.chunk) cut it once, and the two
    differ on uneven blocks.
    """
    try:
        from torch.distributed.tensor import Replicate, Shard
    except ImportError:  # torch before 2.4 kept them in the private module
        try:
            from torch.distributed._tensor import Replicate, Shard
        except ImportError as missing:
            raise ImportError("to_dtensor_placements needs PyTorch: pip install torch") \
                from missing
    if not isinstance(mesh, Mesh):
        raise InvalidArgument(f"mesh is {mesh!r}; expected a shardwise Mesh")
    spec = _spec_from(spec, "spec")
    if shape is not None:
        shape = _sizes(shape, "shape")
    if shape is not None and len(spec) > len(shape):
        raise InvalidArgument(f"{spec!r} has {len(spec)} entries; the array has {len(shape)} "
                              "dimensions")
    for dim, entry in enumerate(spec):
        for axis in (entry if isinstance(entry, tuple) else (entry,)):
            if axis is not None and axis not in mesh.axis_names:
                raise InvalidArgument(f"dimension {dim} of {spec!r} names axis '{axis}', which "
                                      f"{mesh!r} does not have")
        if isinstance(entry, tuple):
            order = [mesh.axis_names.index(axis) for axis in entry]
            if order != sorted(order):
                raise InvalidArgument(
                    f"dimension {dim} of {spec!r} is split by {entry} in another order than "
                    f"the mesh's {mesh.axis_names}; DTensor's Shard orders the axes of one "
                    "dimension as the mesh does")
            shards = 1
            for axis in entry:
                shards *= mesh.shape[axis]
            if shape is not None and shape[dim] % shards != 0:
                raise InvalidArgument(
                    f"dimension {dim} of size {shape[dim]} is split by {entry} into {shards} "
                    "uneven blocks; DTensor cuts it axis by axis, into other blocks than "
                    "shardwise's")
    placements = []
    for placement in to_placements(mesh, spec):
        placements.append(Shard(placement.dim) if hasattr(placement, "dim") else Replicate())
    return placements


def _sizes(shape, field):
    """A shape (a tuple of sizes, or an array's) as a tuple of ints, or InvalidArgument."""
    shape = getattr(shape, "shape", shape)
    if not isinstance(shape, (tuple, list)):
        raise InvalidArgument(f"{field} is {shape!r}; expected a tuple of sizes or an array")
    sizes = []
    for d, size in enumerate(shape):
        try:
            if isinstance(size, bool):
                raise TypeError
            sizes.append(operator.index(size))
        except TypeError:
            raise InvalidArgument(f"{field}[{d}] is {size!r}; expected a size") from None
        if sizes[-1] < 0:
            raise InvalidArgument(f"{field}[{d}] is {size}; a size is 0 or more")
    return tuple(sizes)


class FlaxParameter(NamedTuple):
    """One parameter of a Flax NNX model: its dotted path, the nnx Variable, the Variable's
    array, and the logical names nnx.with_partitioning gave it (None where it gave none)."""
    name: str
    variable: Any
    value: Any
    logical_axes: Optional[Tuple[Optional[str], ...]]


def flax_parameters(model):
    """Each nnx.Param of a Flax NNX model or state, as a FlaxParameter, in Flax's order."""
    try:
        from flax import nnx
    except ImportError as missing:
        raise ImportError("flax_parameters needs Flax: pip install flax") from missing
    if not isinstance(model, (nnx.Module, nnx.State)):
        raise InvalidArgument(f"model is {model!r}; expected a Flax NNX model or state")
    state = nnx.state(model, nnx.Param) if isinstance(model, nnx.Module) else model
    flat = nnx.to_flat_state(state) if hasattr(nnx, "to_flat_state") else state.flat_state()
    parameters = []
    for path, variable in flat:
        # get_value where Flax has it (.value is deprecated there).
        value = variable.get_value() if hasattr(variable, "get_value") else variable.value
        metadata = variable.get_metadata() if hasattr(variable, "get_metadata") else {}
        axes = None
        # nnx.with_partitioning's names, under the key each version of Flax keeps them.
        for key in ("out_sharding", "sharding_names", "sharding"):
            if metadata.get(key) is not None:
                axes = tuple(metadata[key])
                break
        parameters.append(FlaxParameter(".".join(str(p) for p in path), variable, value, axes))
    return parameters
