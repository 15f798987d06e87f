// Who may call what: every method of the interfaces the daemon serves, and whether it reads
// (anyone who may reach the socket) or controls (root, the daemon's own user, or a member of
// [access] control-group). The varlink server checks this table before it dispatches a call,
// so that a method cannot be open to every member of the socket's group by forgetting a
// check; a method without an entry is refused.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "monitor/perf/caller_rights.hpp"
#include "monitor/protocol/varlink_message.hpp"
#include "peer.hpp"

namespace monitord {

enum class Access { Read, Control };

struct MethodAccess {
    std::string_view method;  // qualified: "io.monitord.Monitor.StartCounters"
    Access access = Access::Control;
    // What a refusal says the method does: "counting" (for Control methods).
    std::string_view action;
    // What the refused can do instead, said after the refusal; may be empty.
    std::string_view instead;
};

// The table, one entry per method of io.monitord.Monitor and org.varlink.service.
std::span<const MethodAccess> method_access();
// The entry of `method`; nullptr for a method the table does not know.
const MethodAccess* find_method_access(std::string_view method);

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
