// The listening AF_UNIX socket of the control interface: handed over by systemd (socket
// activation) or created by monitord.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monitord {

class ControlSocket {
  public:
    // Uses the socket systemd passed (LISTEN_FDS) if there is one; otherwise binds `path`.
    // With `create_directory`, a missing parent directory is created (the default path's
    // own monitord/ directory); otherwise a missing directory is an error. A stale socket
    // left by a crashed daemon is replaced; a live one is BUSY.
    // A socket the daemon makes itself is for its user and `group` (mode 0660); without a
    // group, its own group. One passed by systemd keeps the mode its socket unit gave it.
    static monitor::Result<ControlSocket> open(const std::string& path, bool create_directory,
                                               std::optional<gid_t> group = std::nullopt);

    ControlSocket(ControlSocket&&) noexcept = default;
    ControlSocket& operator=(ControlSocket&&) noexcept = default;
    // Removes the socket file unless systemd owns it.
    ~ControlSocket();

    int fd() const { return fd_.get(); }
    const std::string& path() const { return path_; }
    bool activated() const { return activated_; }

  private:
    ControlSocket(monitor::UniqueFd fd, std::string path, bool activated)
        : fd_(std::move(fd)), path_(std::move(path)), activated_(activated) {}

    monitor::UniqueFd fd_;
    std::string path_;
    bool activated_ = false;
};

}  // namespace monitord
