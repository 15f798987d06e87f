#include "monitor/protocol/socket_path.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

namespace monitor::protocol {
namespace {

std::string user_socket_path() {
    if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && xdg[0] == '/') {
        return std::string{xdg} + "/monitord/" + kSocketName;
    }
    return "/tmp/monitord-" + std::to_string(::getuid()) + "/" + kSocketName;
}

}  // namespace

std::string daemon_socket_path() {
    if (const char* env = std::getenv("MONITORD_SOCKET"); env != nullptr && env[0] != '\0') {
        return env;
    }
    return ::geteuid() == 0 ? kSystemSocket : user_socket_path();
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

std::vector<std::string> client_socket_paths() {
    if (const char* env = std::getenv("MONITORD_SOCKET"); env != nullptr && env[0] != '\0') {
        return {env};
    }
    if (::geteuid() == 0) return {kSystemSocket};
    return {user_socket_path(), kSystemSocket};
}

}  // namespace monitor::protocol
