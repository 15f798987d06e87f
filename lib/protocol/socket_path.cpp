#include "monitor/protocol/socket_path.hpp"

#include <unistd.h>

#include <cstdlib>

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

std::vector<std::string> client_socket_paths() {
    if (const char* env = std::getenv("MONITORD_SOCKET"); env != nullptr && env[0] != '\0') {
        return {env};
    }
    if (::geteuid() == 0) return {kSystemSocket};
    return {user_socket_path(), kSystemSocket};
}

}  // namespace monitor::protocol
