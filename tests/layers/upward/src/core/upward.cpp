// A core file that includes a strategy header: the layer check must refuse it.
#include "shardwise/strategy/sharding_strategy.hpp"
