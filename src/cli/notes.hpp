#pragma once
// What a library reader took without knowing it (a config.json field transformers added), shown
// once on stderr: by the process of rank 0 under mpirun, by the one process otherwise.

#include <string>
#include <vector>

namespace shardwise::cli {

// "shardwise train: note: <note>" per note.
void show_notes(const std::string& command, const std::vector<std::string>& notes);

}  // namespace shardwise::cli
