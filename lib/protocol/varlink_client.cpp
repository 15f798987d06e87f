#include "monitor/protocol/varlink_client.hpp"

#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace monitor::varlink {

Result<Client> Client::connect(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
        return fail(Status::BadArg, "socket path '" + path + "' must have 1 to " +
                                        std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
    }
    std::memcpy(addr.sun_path, path.data(), path.size());
    UniqueFd fd{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    if (!fd) return fail_errno(errno, "socket");
    int r;
    do {
        r = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    } while (r < 0 && errno == EINTR);
    if (r < 0) {
        int err = errno;
        if (err == ECONNREFUSED) {
            return fail(Status::NoDev, "connect to " + path + ": nothing listens on this socket");
        }
        if (err == EACCES) {
            // The socket's group says who may connect: name it.
            struct stat st {};
            std::string owner = "its group";
            if (::stat(path.c_str(), &st) == 0) {
                // getgrgid_r: getgrgid's result is shared by the program's threads.
                std::vector<char> buf(16384);
                ::group g{};
                ::group* found = nullptr;
                owner = ::getgrgid_r(st.st_gid, &g, buf.data(), buf.size(), &found) == 0 &&
                                found != nullptr
                            ? std::string{"group "} + found->gr_name
                            : "group " + std::to_string(st.st_gid);
            }
            return fail(Status::Perm, "connect to " + path +
                                          ": permission denied; the socket is "
                                          "for root and members of " +
                                          owner + " (`usermod -aG GROUP USER`, then log in again)");
        }
        return fail_errno(err, "connect to " + path);
    }
    return Client{std::move(fd), path};
}

Result<void> Client::send_raw(std::string_view bytes) {
    while (!bytes.empty()) {
        ssize_t n = ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            return fail_errno(errno, "send to " + path_);
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return {};
}

Result<Reply> Client::call(const Call& call) {
    std::string msg = encode(call);
    msg.push_back('\0');
    if (auto r = send_raw(msg); !r) return std::unexpected(r.error());
    if (call.oneway) return Reply{};
    return receive();
}

Result<Reply> Client::call(std::string_view method, nlohmann::json parameters) {
    Call c;
    c.method = std::string{method};
    c.parameters = std::move(parameters);
    return call(c);
}

Result<Reply> Client::receive() {
    for (;;) {
        if (auto msg = in_.next()) {
            auto reply = parse_reply(*msg);
            if (!reply) {
                return fail(Status::BadData,
                            "malformed reply from " + path_ + ": " + reply.error().message);
            }
            return reply;
        }
        if (in_.too_large()) {
            return fail(Status::BadData, "reply from " + path_ + " exceeds " +
                                             std::to_string(in_.max_message()) + " bytes");
        }
        if (timeout_.count() > 0) {
            pollfd p{fd_.get(), POLLIN, 0};
            int r = ::poll(&p, 1, static_cast<int>(timeout_.count()));
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) return fail_errno(errno, "poll " + path_);
            if (r == 0) {
                return fail(Status::NotRdy, "no reply from " + path_ + " within " +
                                                std::to_string(timeout_.count()) + " ms");
            }
        }
        auto space = in_.prepare(std::size_t{64} * 1024);
        ssize_t n = ::recv(fd_.get(), space.data(), space.size(), 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return fail_errno(errno, "receive from " + path_);
        }
        if (n == 0) return fail(Status::IoErr, "the daemon at " + path_ + " closed the connection");
        in_.commit(static_cast<std::size_t>(n));
    }
}

}  // namespace monitor::varlink
