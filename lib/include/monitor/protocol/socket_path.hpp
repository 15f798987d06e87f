// Where monitord's control socket lives.
#pragma once

#include <string>
#include <vector>

#include "monitor/status.hpp"

namespace monitor::protocol {

inline constexpr const char* kSocketName = "io.monitord.Monitor";
inline constexpr const char* kSystemSocket = "/run/monitord/io.monitord.Monitor";

// Where the daemon listens unless told otherwise: $MONITORD_SOCKET when set; for root
// /run/monitord/io.monitord.Monitor; for other users $XDG_RUNTIME_DIR/monitord/..., or
// /tmp/monitord-UID/... without XDG_RUNTIME_DIR.
std::string daemon_socket_path();

// Where a client looks, in order: $MONITORD_SOCKET alone when set; otherwise the calling
// user's own daemon (the path above) and then the system daemon.
std::vector<std::string> client_socket_paths();

// Whether the directory of a default socket path can be trusted: a real directory (not a
// symbolic link), owned by the calling user or root, writable by nobody else. Otherwise
// someone else could have put a socket of theirs there (/tmp is shared). PERM says why.
Result<void> check_socket_directory(const std::string& socket_path);

}  // namespace monitor::protocol
