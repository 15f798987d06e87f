#include "peer.hpp"

#include <unistd.h>

#include <algorithm>

namespace monitord {

bool Peer::in_group(gid_t gid) const {
    return cred.gid == gid || std::ranges::find(groups, gid) != groups.end();
}

bool Peer::privileged() const {
    return cred.uid == 0 || cred.uid == ::geteuid();
}

}  // namespace monitord
