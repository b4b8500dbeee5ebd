#pragma once
// Everything public in shardwise.

#include "shardwise/core/check.hpp"
#include "shardwise/core/dtype.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/mesh.hpp"
#include "shardwise/core/named_sharding.hpp"
#include "shardwise/core/partition_spec.hpp"
#include "shardwise/core/placement.hpp"
#include "shardwise/core/shape.hpp"
#include "shardwise/strategy/data_parallel_strategy.hpp"
#include "shardwise/strategy/fsdp_strategy.hpp"
#include "shardwise/strategy/multi_dimensional_strategy.hpp"
#include "shardwise/strategy/parallelism_config.hpp"
#include "shardwise/strategy/pipeline_parallel_strategy.hpp"
#include "shardwise/strategy/sharding_config.hpp"
#include "shardwise/strategy/sharding_strategy.hpp"
#include "shardwise/strategy/tensor_parallel_strategy.hpp"
