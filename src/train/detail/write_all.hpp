#pragma once
// Writes every byte of `data` to `fd` with as few write calls as the kernel allows, so a reader
// of a log sees whole records; an InvalidArgument naming `what` where it cannot (a full disk).

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "shardwise/core/error.hpp"

namespace shardwise::train::detail {

inline void write_all(int fd, std::string_view data, const std::string& what) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t wrote = ::write(fd, data.data() + done, data.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      throw InvalidArgument("cannot write " + what + ": " +
                            std::strerror(wrote < 0 ? errno : ENOSPC));
    }
    done += static_cast<std::size_t>(wrote);
  }
}

}  // namespace shardwise::train::detail
