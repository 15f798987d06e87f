// A blocking varlink client over an AF_UNIX stream socket: what monctl, the tests and the
// benchmarks use to talk to monitord.
#pragma once

#include <chrono>
#include <string>

#include "monitor/protocol/message_buffer.hpp"
#include "monitor/protocol/varlink_message.hpp"
#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"

namespace monitor::varlink {

class Client {
  public:
    // Connects to the socket at `path`. A missing socket or one nobody listens on is NODEV,
    // a refused one PERM; the message names the path.
    static Result<Client> connect(const std::string& path);

    // Sends the call and, unless it is oneway, waits for the first reply. With `more`, read
    // the following replies with receive() while the previous one `continues`.
    Result<Reply> call(const Call& call);
    Result<Reply> call(std::string_view method,
                       nlohmann::json parameters = nlohmann::json::object());
    Result<Reply> receive();

    // Writes bytes as they are, for tests of the daemon's framing.
    Result<void> send_raw(std::string_view bytes);

    // How long receive() waits for a reply; zero or negative waits forever. Default 30 s.
    void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
    int fd() const { return fd_.get(); }

  private:
    Client(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}

    UniqueFd fd_;
    std::string path_;
    MessageBuffer in_{kMaxReplySize};
    std::chrono::milliseconds timeout_{30000};
};

}  // namespace monitor::varlink
