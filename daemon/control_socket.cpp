#include "control_socket.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "monitor/protocol/socket_path.hpp"

namespace monitord {
namespace {

// A file system out of space or inodes (/run full) says which, and what to do.
std::unexpected<monitor::Error> with_full_hint(std::unexpected<monitor::Error> e, int err,
                                               const std::string& path) {
    if (err == ENOSPC || err == EDQUOT) {
        e.error().message += fmt::format(
            " (the file system of {} is full, of space or of inodes: free some there, or "
            "choose another path with --socket)",
            std::filesystem::path(path).parent_path().string());
    }
    return e;
}

using monitor::fail;
using monitor::fail_errno;
using monitor::Result;
using monitor::Status;
using monitor::UniqueFd;

Result<sockaddr_un> make_address(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.empty() || path[0] != '/' || path.size() >= sizeof(addr.sun_path)) {
        return fail(Status::BadArg, "socket path '" + path +
                                        "' must be absolute and shorter than " +
                                        std::to_string(sizeof(addr.sun_path)) + " bytes");
    }
    std::memcpy(addr.sun_path, path.data(), path.size());
    return addr;
}

// The directory must exist (or be created) and be writable by us. The default directory is
// created when missing and must then be ours alone (see check_socket_directory).
Result<void> prepare_directory(const std::string& path, bool create) {
    std::filesystem::path dir = std::filesystem::path{path}.parent_path();
    struct stat st {};
    if (::stat(dir.c_str(), &st) < 0) {
        if (errno != ENOENT) return fail_errno(errno, "socket directory " + dir.string());
        if (!create) {
            return fail(Status::NoDev, "socket directory " + dir.string() +
                                           " does not exist; create it or choose another "
                                           "path with --socket");
        }
        // Only the last component: the runtime directory above it must already exist.
        mode_t mode = ::geteuid() == 0 ? 0755 : 0700;
        if (::mkdir(dir.c_str(), mode) < 0 && errno != EEXIST) {
            const int err = errno;
            return with_full_hint(fail_errno(err, "create socket directory " + dir.string()), err,
                                  dir.string());
        }
    } else if (!S_ISDIR(st.st_mode)) {
        return fail(Status::BadArg, "socket directory " + dir.string() + " is not a directory");
    }
    if (create) {
        if (auto r = monitor::protocol::check_socket_directory(path); !r) return r;
    }
    if (::access(dir.c_str(), W_OK | X_OK) < 0) {
        return fail(Status::Perm, "socket directory " + dir.string() + " is not writable by uid " +
                                      std::to_string(::geteuid()) +
                                      "; choose another path with --socket");
    }
    return {};
}

// An existing socket file: in use by a running daemon (BUSY), or stale (removed).
Result<void> clear_stale(const std::string& path, const sockaddr_un& addr) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) < 0) {
        if (errno == ENOENT) return {};
        return fail_errno(errno, "stat " + path);
    }
    if (!S_ISSOCK(st.st_mode)) {
        return fail(Status::BadArg, path +
                                        " exists and is not a socket; remove it or choose "
                                        "another path with --socket");
    }
    // Non-blocking, so that a live daemon with a full backlog cannot make this hang.
    UniqueFd probe{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)};
    if (!probe) return fail_errno(errno, "socket");
    if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 ||
        errno == EAGAIN) {
        return fail(Status::Busy, "another monitord is already listening on " + path +
                                      "; stop it or choose another path with --socket");
    }
    // Only a refused connection proves that nobody listens there any more.
    if (errno != ECONNREFUSED) return fail_errno(errno, "check the existing socket " + path);
    if (::unlink(path.c_str()) < 0 && errno != ENOENT) {
        return fail_errno(errno, "remove stale socket " + path);
    }
    return {};
}

}  // namespace

Result<ControlSocket> ControlSocket::open(const std::string& path, bool create_directory,
                                          std::optional<gid_t> group) {
    int n = sd_listen_fds(/*unset_environment=*/1);
    if (n < 0) return fail_errno(-n, "sd_listen_fds");
    if (n > 0) {
        int fd = SD_LISTEN_FDS_START;
        if (n > 1 || sd_is_socket_unix(fd, SOCK_STREAM, /*listening=*/1, nullptr, 0) <= 0) {
            return fail(Status::BadArg, "systemd passed " + std::to_string(n) +
                                            " file descriptors; expected one listening "
                                            "AF_UNIX stream socket (check monitord.socket)");
        }
        sockaddr_un addr{};
        socklen_t len = sizeof(addr);
        std::string bound = path;
        if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
            addr.sun_path[0] != '\0') {
            bound = addr.sun_path;
        }
        int flags = ::fcntl(fd, F_GETFL);
        if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
            return fail_errno(errno, "make the activated socket non-blocking");
        }
        return ControlSocket{UniqueFd{fd}, bound, true};
    }

    auto addr = make_address(path);
    if (!addr) return std::unexpected(addr.error());
    if (auto r = prepare_directory(path, create_directory); !r) return std::unexpected(r.error());
    if (auto r = clear_stale(path, *addr); !r) return std::unexpected(r.error());

    UniqueFd fd{::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
    if (!fd) return fail_errno(errno, "socket");
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) < 0) {
        const int err = errno;
        return with_full_hint(fail_errno(err, "make the control socket " + path), err, path);
    }
    ControlSocket sock{std::move(fd), path, false};
    // Who may connect may read everything; what changes things checks the peer as well.
    if (group && ::chown(path.c_str(), static_cast<uid_t>(-1), *group) < 0) {
        return fail_errno(errno, fmt::format("give the socket {} to group {} (a daemon that is "
                                             "not root may only choose a group it belongs to)",
                                             path, *group));
    }
    if (::chmod(path.c_str(), 0660) < 0) return fail_errno(errno, "chmod " + path);
    if (::listen(sock.fd(), SOMAXCONN) < 0) return fail_errno(errno, "listen on " + path);
    return sock;
}

ControlSocket::~ControlSocket() {
    if (fd_ && !activated_) ::unlink(path_.c_str());
}

}  // namespace monitord
