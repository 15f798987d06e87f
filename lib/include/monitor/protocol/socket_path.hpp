// Where monitord's control socket lives.
#pragma once

#include <string>
#include <vector>

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

}  // namespace monitor::protocol
