#pragma once
// Every rank of a run must train with the same settings and data: a rank with another seed or
// learning rate would otherwise train a different model without any collective noticing (their
// sizes agree). Each rank checksums each setting's text (CRC-32C, the same on every platform and
// build, unlike std::hash); rank 0's row is compared with every other rank's.

#include <string>
#include <utility>
#include <vector>

#include "shardwise/comm/communicator.hpp"

namespace shardwise::train {

// A setting's name as the user gave it ("--seed") and its value in words.
using Setting = std::pair<std::string, std::string>;

// Collective over every rank of `comm`: InvalidArgument on every rank where any rank's value of
// a setting differs from rank 0's, naming the first such rank and setting ("rank 1 runs with
// another --seed than rank 0; every rank of a run needs the same flags and data").
void check_ranks_agree(Communicator& comm, const std::vector<Setting>& settings);

}  // namespace shardwise::train
