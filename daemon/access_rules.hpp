// Who may call what: the rule of each method's descriptor (monitor/protocol/
// method_descriptors.hpp), read (anyone who may reach the socket) or control (root, the
// daemon's own user, or a member of [access] control-group). The varlink server checks these
// rules before it dispatches a call, so that a method cannot be open to every member of the
// socket's group by forgetting a check; a method without a descriptor is refused.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "monitor/perf/caller_rights.hpp"
#include "monitor/protocol/method_descriptors.hpp"
#include "monitor/protocol/varlink_message.hpp"
#include "peer.hpp"

namespace monitord {

using monitor::protocol::Access;

// Whether the group database (passwd and group, through NSS) lists `uid` in group `gid` now,
// as its primary group or a supplementary one.
bool listed_in_group(uid_t uid, gid_t gid);

// What `peer` may measure with perf events once it may call the method: everything for a
// privileged peer (root, the daemon's own user), else the kernel's rules for a user without
// privilege (monitor::perf::CallerRights), with the kernel's settings read now.
monitor::perf::CallerRights perf_rights(const Peer& peer);

class AccessRules {
  public:
    // How membership is looked up now (listed_in_group; tests give their own).
    using GroupLookup = std::function<bool(uid_t, gid_t)>;

    // The group whose members may call Control methods besides root and the daemon's own
    // user ([access] control-group); nullopt for none.
    void set_control_group(std::optional<gid_t> gid, std::string name);
    // Its name; empty for none.
    const std::string& control_group() const { return control_group_; }
    void set_group_lookup(GroupLookup lookup) { listed_ = std::move(lookup); }

    // The error reply that refuses `peer` a call of `method`, or nullopt when it may call it.
    // Membership of the control group takes both the peer's credentials (its process's groups,
    // fixed when its user logged in) and the group database now, looked up at each such call:
    // a user removed from the group loses control at its next call.
    std::optional<monitor::varlink::Reply> refusal(std::string_view method, const Peer& peer) const;

  private:
    std::optional<gid_t> control_gid_;
    std::string control_group_;
    GroupLookup listed_ = listed_in_group;
};

}  // namespace monitord
