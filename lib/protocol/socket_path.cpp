#include "monitor/protocol/socket_path.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace monitor::protocol {
namespace {

// getenv races only with setenv and putenv, which neither the library nor its programs call.
std::string getenv_or_empty(const char* name) {
    const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): see above
    return v != nullptr ? v : "";
}

SocketPlace user_place(const SocketEnvironment& env) {
    if (env.xdg_runtime_dir.starts_with('/')) {
        return {SocketPlaceKind::User, env.xdg_runtime_dir + "/monitord/" + kSocketName};
    }
    return {SocketPlaceKind::User, "/tmp/monitord-" + std::to_string(env.euid) + "/" + kSocketName};
}

}  // namespace

SocketEnvironment SocketEnvironment::current() {
    return {::geteuid(), getenv_or_empty("MONITORD_SOCKET"), getenv_or_empty("XDG_RUNTIME_DIR")};
}

std::vector<SocketPlace> socket_places(const SocketEnvironment& env) {
    if (!env.monitord_socket.empty()) {
        return {{SocketPlaceKind::Environment, env.monitord_socket}};
    }
    return {user_place(env), {SocketPlaceKind::System, kSystemSocket}};
}

SocketPlace daemon_socket_place(const SocketEnvironment& env, bool user) {
    const auto places = socket_places(env);
    const auto wanted = !env.monitord_socket.empty() ? SocketPlaceKind::Environment
                        : env.euid == 0 && !user     ? SocketPlaceKind::System
                                                     : SocketPlaceKind::User;
    for (const auto& p : places) {
        if (p.kind == wanted) return p;
    }
    return places.front();
}

Result<void> check_socket_directory(const std::string& socket_path) {
    const std::string dir = std::filesystem::path{socket_path}.parent_path().string();
    struct stat st {};
    if (::lstat(dir.c_str(), &st) < 0) return fail_errno(errno, "socket directory " + dir);
    if (!S_ISDIR(st.st_mode)) {
        return fail(Status::Perm, "socket directory " + dir + " is not a directory");
    }
    if (st.st_uid != ::geteuid() && st.st_uid != 0) {
        return fail(Status::Perm, "socket directory " + dir + " belongs to uid " +
                                      std::to_string(st.st_uid) + ", not to you; remove it");
    }
    if ((st.st_mode & 022) != 0) {
        return fail(Status::Perm, "socket directory " + dir +
                                      " is writable by others; make it private (chmod 700)");
    }
    return {};
}

Result<DaemonConnection> connect_to_daemon(const std::vector<SocketPlace>& places) {
    std::string tried;
    bool refused = false;
    for (const auto& p : places) {
        // The user's place may be under /tmp, where someone else could have prepared it. A
        // directory that cannot be looked at is checked too, which says why.
        std::error_code unknown;
        if (p.kind == SocketPlaceKind::User &&
            (std::filesystem::exists(std::filesystem::path{p.path}.parent_path(), unknown) ||
             unknown)) {
            if (auto ok = check_socket_directory(p.path); !ok) {
                tried += "\n  " + p.path + ": not used: " + ok.error().message;
                continue;
            }
        }
        auto c = varlink::Client::connect(p.path);
        if (c) return DaemonConnection{std::move(*c), p.path};
        // A daemon that refuses us is worth reporting as such, not as "not running".
        refused = refused || c.error().status == Status::Perm;
        tried += "\n  " + c.error().message;
    }
    return fail(refused ? Status::Perm : Status::NoDev,
                "cannot reach monitord; looked at:" + tried +
                    "\nStart one with ./scripts/run (from the source tree) or 'systemctl start "
                    "monitord.socket', or point --socket or MONITORD_SOCKET at its socket.");
}

}  // namespace monitor::protocol
