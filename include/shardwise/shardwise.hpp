#pragma once
// Everything public in shardwise.

#include "shardwise/core/check.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/mesh.hpp"
#include "shardwise/core/named_sharding.hpp"
#include "shardwise/core/partition_spec.hpp"
#include "shardwise/core/placement.hpp"
#include "shardwise/core/shape.hpp"
