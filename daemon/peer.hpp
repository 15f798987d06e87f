// Who is at the other end of a control connection, as the kernel said when it was accepted:
// what the access rules, the limits per user and the perf rights are decided from.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace monitord {

struct Peer {
    std::uint64_t connection = 0;  // stable id of the connection within this server
    ucred cred{};                  // from SO_PEERCRED at accept time
    std::vector<gid_t> groups;     // supplementary groups (SO_PEERGROUPS) at accept time
    // Whether the peer's primary or a supplementary group is `gid`.
    bool in_group(gid_t gid) const;
    // Root or the daemon's own user: held to the daemon's own limits only, and may control.
    bool privileged() const;
};

}  // namespace monitord
