// The exporter's HTTP server: libmicrohttpd on the exporter's sd-event loop (its epoll fd is
// one event source, its timeouts a timer), serving a listening socket that the exporter
// made or systemd passed, over TLS when configured, with basic authentication when configured.
// A handler answers at once or later (the connection waits, suspended, while the loop serves
// the others).
#pragma once

#include <microhttpd.h>
#include <systemd/sd-event.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "monitor/status.hpp"
#include "monitor/unique_fd.hpp"
#include "sd_event_ptr.hpp"
#include "web_config.hpp"

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
    // Answers a request, once: within the handler, or later on the loop.
    using Respond = std::function<void(HttpResponse)>;
    using Handler = std::function<void(const HttpRequest&, Respond)>;
    using Logger = std::function<void(const std::string&)>;

    // Whether `password` is `user`'s: asked for requests that carry both (the others get 401).
    using Authorizer = std::function<bool(const std::string& user, const std::string& password)>;

    struct Limits {
        unsigned connections = 4096;   // open at a time; more wait in the listen backlog
        unsigned per_address = 64;     // open at a time from one IP address; more are closed
        unsigned idle_timeout_s = 10;  // a connection that sends nothing for this long is closed
    };

    struct Options {
        Limits limits;
        std::optional<TlsSettings> tls;                            // none: plain HTTP
        Authorizer authorize;                                      // none: every request is let in
        std::vector<std::pair<std::string, std::string>> headers;  // on every response
    };

    // Serves `listener` (libmicrohttpd closes it when the server stops) on `event`. `log` gets
    // libmicrohttpd's error messages. IOERR when libmicrohttpd cannot start (with TLS, most
    // often a key that does not belong to the certificate: its own words are logged).
    static monitor::Result<std::unique_ptr<HttpServer>> start(sd_event* event,
                                                              monitor::UniqueFd listener,
                                                              Handler handler, Logger log,
                                                              Options options);
    static monitor::Result<std::unique_ptr<HttpServer>> start(sd_event* event,
                                                              monitor::UniqueFd listener,
                                                              Handler handler, Logger log) {
        return start(event, std::move(listener), std::move(handler), std::move(log), Options{});
    }
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

  private:
    // A request between its headers and its answer, shared by the connection (its request
    // state, freed when libmicrohttpd completes it) and the Respond given to the handler.
    struct Pending {
        HttpServer* server;  // null once the server stops
        MHD_Connection* connection;
        std::optional<HttpResponse> response;
        bool suspended = false;
    };
    static void answer(const std::shared_ptr<Pending>& pending, HttpResponse response);
    static void completed(void* self, MHD_Connection* connection, void** request_state,
                          MHD_RequestTerminationCode why);

    HttpServer(Handler handler, Logger log, Options options)
        : handler_(std::move(handler)), log_(std::move(log)), options_(std::move(options)) {}
    monitor::Result<void> attach(sd_event* event);
    // Runs libmicrohttpd for what is ready, then arms the timer for its next timeout.
    void run();
    static MHD_Result on_request(void* self, MHD_Connection* connection, const char* url,
                                 const char* method, const char* version, const char* upload_data,
                                 size_t* upload_data_size, void** request_state);

    // Queues `res` on `connection`, with the configured headers; a 401 asks for credentials.
    MHD_Result queue(MHD_Connection* connection, const HttpResponse& res) const;

    Handler handler_;
    Logger log_;
    Options options_;
    std::vector<std::weak_ptr<Pending>> suspended_;  // to resume before libmicrohttpd stops
    MHD_Daemon* daemon_ = nullptr;
    monitord::SourcePtr io_;
    monitord::SourcePtr timer_;
};

}  // namespace exporter
