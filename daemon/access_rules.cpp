#include "access_rules.hpp"

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <vector>

#include "monitor/protocol/method_descriptors.hpp"
#include "monitor/protocol/varlink_idl.hpp"

namespace monitord {

namespace {

// The interface's own PermissionDenied when it has one (io.monitord.Monitor), else the
// varlink service's.
std::string permission_denied(std::string_view method) {
    const auto dot = method.rfind('.');
    const std::string_view iface = method.substr(0, dot == std::string_view::npos ? 0 : dot);
    return iface == monitor::varlink::kMonitorInterface
               ? std::string{iface} + ".PermissionDenied"
               : std::string{monitor::varlink::kServiceInterface} + ".PermissionDenied";
}

}  // namespace

monitor::perf::CallerRights perf_rights(const Peer& peer) {
    if (peer.privileged()) return monitor::perf::CallerRights::everything();
    return monitor::perf::CallerRights::unprivileged(peer.cred.uid, peer.cred.gid,
                                                     monitor::perf::read_perf_sysctls());
}

bool listed_in_group(uid_t uid, gid_t gid) {
    std::vector<char> buf(16384);
    passwd pw{};
    passwd* found = nullptr;
    int r = 0;
    while ((r = ::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found)) == ERANGE &&
           buf.size() < (std::size_t{1} << 24)) {
        buf.resize(buf.size() * 2);
    }
    if (r != 0 || found == nullptr) return false;  // no such user (any more)
    if (pw.pw_gid == gid) return true;
    std::vector<gid_t> groups(64);
    for (;;) {
        int n = static_cast<int>(groups.size());
        if (::getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) >= 0) {
            groups.resize(static_cast<std::size_t>(n));
            return std::ranges::find(groups, gid) != groups.end();
        }
        // Too small: n is the number it needs.
        if (static_cast<std::size_t>(n) <= groups.size() || n > (1 << 20)) return false;
        groups.resize(static_cast<std::size_t>(n));
    }
}

void AccessRules::set_control_group(std::optional<gid_t> gid, std::string name) {
    control_gid_ = gid;
    control_group_ = std::move(name);
}

std::optional<monitor::varlink::Reply> AccessRules::refusal(std::string_view method,
                                                            const Peer& peer) const {
    const monitor::protocol::MethodDescriptor* rule = monitor::protocol::find_method(method);
    if (rule == nullptr) {
        return monitor::varlink::make_error(
            permission_denied(method),
            nlohmann::json{{"message", fmt::format("{} has no access rule; it is refused to "
                                                   "everyone",
                                                   method)}});
    }
    if (rule->access == Access::Read) return std::nullopt;
    if (peer.privileged()) return std::nullopt;
    bool removed = false;  // the credentials say member; the group database no longer does
    if (control_gid_ && peer.in_group(*control_gid_)) {
        if (listed_(peer.cred.uid, *control_gid_)) return std::nullopt;
        removed = true;
    }
    const std::string who = control_gid_
                                ? fmt::format("root or membership of group '{}'", control_group_)
                                : std::string{
                                      "root (monitord.conf's [access] control-group can name a "
                                      "group whose members may do it too)"};
    std::string message =
        fmt::format("{} needs {}; uid {} asked", rule->action, who, peer.cred.uid);
    if (removed) {
        message += fmt::format(
            " (its processes hold group '{}' from their login, but the group database no "
            "longer lists uid {} in it)",
            control_group_, peer.cred.uid);
    }
    if (!rule->instead.empty()) message += fmt::format(": {}", rule->instead);
    return monitor::varlink::make_error(permission_denied(method),
                                        nlohmann::json{{"message", std::move(message)}});
}

}  // namespace monitord
