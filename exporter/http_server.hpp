// The exporter's HTTP server: libmicrohttpd on the exporter's sd-event loop (its epoll fd is
// one event source, its timeouts a timer), serving a listening socket that the exporter
// made or systemd passed. Requests are answered one at a time on the loop.
#pragma once

#include <microhttpd.h>
#include <systemd/sd-event.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"
#include "sd_event_ptr.hpp"

namespace exporter {

struct HttpRequest {
    std::string method;  // "GET", "HEAD", ...
    std::string path;    // "/metrics"
    std::string accept;
    std::string accept_encoding;
};

struct HttpResponse {
    unsigned status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
};

// A listening TCP socket for "ADDR:PORT": "127.0.0.1:10750", "[::1]:10750", or ":10750" (every
// address, IPv6 and IPv4). BADARG names what is wrong with the address.
monitor::Result<monitor::UniqueFd> listen_on(const std::string& address);

class HttpServer {
  public:
    using Handler = std::function<HttpResponse(const HttpRequest&)>;
    using Logger = std::function<void(const std::string&)>;

    struct Limits {
        unsigned connections = 4096;   // open at a time; more wait in the listen backlog
        unsigned idle_timeout_s = 10;  // a connection that sends nothing for this long is closed
    };

    // Serves `listener` (libmicrohttpd closes it when the server stops) on `event`. `log` gets
    // libmicrohttpd's error messages.
    static monitor::Result<std::unique_ptr<HttpServer>> start(sd_event* event,
                                                              monitor::UniqueFd listener,
                                                              Handler handler, Logger log,
                                                              Limits limits);
    static monitor::Result<std::unique_ptr<HttpServer>> start(sd_event* event,
                                                              monitor::UniqueFd listener,
                                                              Handler handler, Logger log) {
        return start(event, std::move(listener), std::move(handler), std::move(log), Limits{});
    }
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

  private:
    HttpServer(Handler handler, Logger log) : handler_(std::move(handler)), log_(std::move(log)) {}
    monitor::Result<void> attach(sd_event* event);
    // Runs libmicrohttpd for what is ready, then arms the timer for its next timeout.
    void run();
    static MHD_Result on_request(void* self, MHD_Connection* connection, const char* url,
                                 const char* method, const char* version, const char* upload_data,
                                 size_t* upload_data_size, void** request_state);

    Handler handler_;
    Logger log_;
    MHD_Daemon* daemon_ = nullptr;
    monitord::SourcePtr io_;
    monitord::SourcePtr timer_;
};

}  // namespace exporter
