// Where monitord's control socket lives, and how a client finds it: one list of places, which
// the daemon picks its default from and clients search in order.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "monitor/protocol/varlink_client.hpp"
#include "monitor/status.hpp"

namespace monitor::protocol {

inline constexpr const char* kSocketName = "io.monitord.Monitor";
inline constexpr const char* kSystemSocket = "/run/monitord/io.monitord.Monitor";

// What decides the places: the effective user and two environment variables ("" when unset).
struct SocketEnvironment {
    uid_t euid = 0;
    std::string monitord_socket;  // $MONITORD_SOCKET
    std::string xdg_runtime_dir;  // $XDG_RUNTIME_DIR
    // This process's.
    static SocketEnvironment current();
};

enum class SocketPlaceKind {
    Given,        // named by the caller (--socket)
    Environment,  // $MONITORD_SOCKET
    User,         // the user's own daemon: $XDG_RUNTIME_DIR/monitord/..., or /tmp/monitord-UID/...
    System,       // the system daemon (the service): /run/monitord/...
};

struct SocketPlace {
    SocketPlaceKind kind = SocketPlaceKind::System;
    std::string path;
    bool operator==(const SocketPlace&) const = default;
};

// The places, in the order clients try them: $MONITORD_SOCKET alone when it is set; otherwise
// the user's own daemon ($XDG_RUNTIME_DIR/monitord/io.monitord.Monitor, or
// /tmp/monitord-UID/io.monitord.Monitor without an absolute XDG_RUNTIME_DIR), then the system
// daemon (/run/monitord/io.monitord.Monitor). The same for root as for anyone: root may run a
// daemon of its own (./scripts/run) beside the service.
std::vector<SocketPlace> socket_places(const SocketEnvironment& env);

// Where the daemon listens when not told: $MONITORD_SOCKET when set; else the system place
// for root, unless `user` (a daemon of the calling user's own, also for root); the user's
// place for everyone else. One of socket_places(env).
SocketPlace daemon_socket_place(const SocketEnvironment& env, bool user);

// Whether the directory of a default socket path can be trusted: a real directory (not a
// symbolic link), owned by the calling user or root, writable by nobody else. Otherwise
// someone else could have put a socket of theirs there (/tmp is shared). PERM says why.
Result<void> check_socket_directory(const std::string& socket_path);

struct DaemonConnection {
    varlink::Client client;
    std::string path;
};

// Connects to the first of `places` where a daemon answers; a socket nobody listens on (a
// daemon that stopped without removing it) sends the search on to the next place. The user's
// place is used only in a directory check_socket_directory() trusts. When none answers: NODEV
// (PERM when a daemon refused the caller: the socket's group says who may connect), naming
// every place and why it was passed over, and how to start a daemon.
Result<DaemonConnection> connect_to_daemon(const std::vector<SocketPlace>& places);

}  // namespace monitor::protocol
