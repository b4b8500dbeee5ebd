"""shardwise for Python: the reference sharding module's API, JAX-exact layouts and a planner of
parallel layouts, computed by shardwise's C++ library.

    import shardwise as sw
    config = sw.ParallelismConfig.from_sharding_config(
        sw.ShardingConfig(data_parallel_size=2, tensor_parallel_size=4))
    strategy = sw.default_strategies(config)
    spec = strategy.get_combined_partition_spec("mlp.up", ("out_features", "in_features"),
                                                shape=(4096, 1024))       # P('model', None)
    sw.NamedSharding(config.to_mesh(), spec).devices_indices_map((4096, 1024))

Neither JAX nor PyTorch is a dependency. Where JAX is installed, the strategies answer with
jax.sharding.PartitionSpec (imported on the first such answer, not by `import shardwise`),
which shardwise's functions take as they take their own; meshes, specs and shardings convert
with sw.to_jax(...) and sw.from_jax(...), and apply_sharding places JAX arrays and Flax NNX
models with jax.device_put; where PyTorch is installed, sw.to_dtensor_placements gives DTensor's
placements. sw.plan and sw.search predict memory, traffic and step time of layouts.
"""

from ._shardwise import (
    Cluster,
    DataParallelStrategy,
    DeviceMeshManager,
    DeviceShard,
    ExpertParallelStrategy,
    FSDPStrategy,
    InvalidArgument,
    Layout,
    MemoryPerDevice,
    Mesh,
    ModelManifest,
    ModelShape,
    MultiDimensionalStrategy,
    NamedSharding,
    P,
    ParallelismConfig,
    ParameterInfo,
    ParameterPlacement,
    ParseError,
    Partial,
    PartitionSpec,
    PipelineParallelStrategy,
    Prediction,
    RankedLayout,
    Replicate,
    SearchResult,
    Shard,
    ShardingConfig,
    ShardingError,
    ShardingStrategy,
    ShardingWarning,
    ShardwiseError,
    SpecResolution,
    TensorParallelStrategy,
    TrainingSetup,
    create_device_mesh,
    default_strategies,
    get_optimal_mesh_shape,
    optimize_for_transformer,
    shape_of,
    to_partition_spec,
    to_placements,
    validate_mesh_config,
)
from .interop import FlaxParameter, flax_parameters, from_jax, to_dtensor_placements, to_jax
from .placing import HostShards, apply_sharding
from .planner import manifest_of, plan, preset_names, search

__version__ = "0.1.0"

__all__ = [name for name in dir() if not name.startswith("_")]
