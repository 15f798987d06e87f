// monitord-exporter: serves monitord's loading, CPU time by state, idle probes and watchdog
// over HTTP for Prometheus, asking monitord over its varlink socket on every scrape.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "basic_auth.hpp"
#include "collectors.hpp"
#include "exposition.hpp"
#include "http_server.hpp"
#include "logging.hpp"
#include "machine_metrics.hpp"
#include "monitor/enum_names.hpp"
#include "monitor/status.hpp"
#include "monitord-config.h"
#include "monitord_scraper.hpp"
#include "scrape_worker.hpp"
#include "web_config.hpp"

namespace {

constexpr int kExitUsage = 2;
constexpr const char* kDefaultListen = ":10750";

const char* const kIndexPage =
    "<html><head><title>monitord exporter</title></head><body>\n"
    "<h1>monitord exporter</h1>\n"
    "<p><a href=\"/metrics\">Metrics</a> of monitord, the CPU loading monitor "
    "(monitord-exporter(8)).</p>\n"
    "</body></html>\n";

// Routes a request: /metrics, the index page, 404 and 405. /metrics is answered when the
// scrape worker has asked monitord; the others at once.
class Exporter {
  public:
    Exporter(std::unique_ptr<exporter::ScrapeWorker> worker, exporter::CollectorSet collectors)
        : worker_(std::move(worker)), collectors_(collectors) {}

    void handle(const exporter::HttpRequest& req, const exporter::HttpServer::Respond& respond) {
        exporter::HttpResponse res;
        if (req.method != "GET" && req.method != "HEAD") {
            res.status = 405;
            res.headers.emplace_back("Allow", "GET, HEAD");
            res.body = "Method " + req.method + " is not allowed: use GET or HEAD.\n";
            return respond(std::move(res));
        }
        if (req.path == "/") {
            res.content_type = "text/html; charset=utf-8";
            res.body = kIndexPage;
            return respond(std::move(res));
        }
        if (req.path != "/metrics") {
            res.status = 404;
            res.body = "Not found: " + req.path + ". The metrics are at /metrics.\n";
            return respond(std::move(res));
        }
        worker_->request([this, req, respond](const exporter::Scrape& scrape,
                                              const std::optional<monitor::Error>& error) {
            respond(metrics(req, scrape, error));
        });
    }

  private:
    exporter::HttpResponse metrics(const exporter::HttpRequest& req, const exporter::Scrape& scrape,
                                   const std::optional<monitor::Error>& error) {
        facts_.scrapes++;
        if (error) {
            facts_.errors++;
            if (monitord_up_) spdlog::warn("monitord does not answer: {}", error->message);
        } else if (!monitord_up_) {
            spdlog::info("monitord answers");
        }
        monitord_up_ = !error;

        const auto format = exporter::negotiate(req.accept);
        exporter::HttpResponse res;
        res.content_type = exporter::content_type(format);
        res.body = exporter::render(exporter::machine_metrics(scrape, facts_, collectors_), format);
        res.headers.emplace_back("Vary", "Accept, Accept-Encoding");
        if (exporter::accepts_gzip(req.accept_encoding)) {
            if (auto z = exporter::gzip(res.body)) {
                res.body = std::move(*z);
                res.headers.emplace_back("Content-Encoding", "gzip");
            }
        }
        return res;
    }

    std::unique_ptr<exporter::ScrapeWorker> worker_;
    exporter::CollectorSet collectors_;
    exporter::ExporterFacts facts_{MONITORD_VERSION, 0, 0};
    bool monitord_up_ = true;  // so that a first failure is logged
};

// A thousand scrapers and slow clients need more descriptors than the usual soft limit.
void raise_descriptor_limit() {
    rlimit l{};
    if (::getrlimit(RLIMIT_NOFILE, &l) == 0 && l.rlim_cur < l.rlim_max) {
        l.rlim_cur = std::min<rlim_t>(l.rlim_max, 65536);
        ::setrlimit(RLIMIT_NOFILE, &l);
    }
}

int run(int argc, char** argv) {
    CLI::App app{"monitord-exporter: monitord's metrics for Prometheus (see monitord-exporter(8))",
                 "monitord-exporter"};
    std::string listen = kDefaultListen;
    std::string socket;
    double timeout_s = 5;
    std::string log_level = "info";
    std::string web_config_file;
    exporter::HttpServer::Limits limits;
    app.set_version_flag("--version", "monitord-exporter " MONITORD_VERSION);
    app.add_option("-l,--listen", listen,
                   std::string{"Address and port to serve /metrics on: ADDR:PORT, [ADDR6]:PORT or "
                               ":PORT for every address (default "} +
                       kDefaultListen + "); ignored when systemd passes a socket");
    app.add_option("-s,--socket", socket,
                   "monitord's socket (default $MONITORD_SOCKET, else where monctl looks: the "
                   "user's own daemon, then /run/monitord/io.monitord.Monitor)");
    app.add_option("--timeout", timeout_s,
                   "Seconds monitord may take to answer a scrape before it counts as down "
                   "(default 5)")
        ->check(CLI::Range(0.1, 60.0));
    app.add_option("--web.config.file", web_config_file,
                   "TLS and basic authentication, in the YAML of Prometheus's exporter-toolkit "
                   "(the file node_exporter reads; monitord-exporter(8) says which keys)");
    app.add_option("--web.max-connections-per-address", limits.per_address,
                   "Connections one IP address may hold open at a time; more are closed at "
                   "once (default 64)")
        ->check(CLI::Range(1U, 4096U));
    app.add_option("--log-level", log_level, "trace, debug, info, warning or error (default info)");
    std::int64_t units_limit = exporter::kDefaultUnitsLimit;
    auto* limit_option =
        app.add_option(
               "--collector.units.limit", units_limit,
               "How many of the busiest systemd units the units collector exports (default " +
                   std::to_string(exporter::kDefaultUnitsLimit) + ", at most " +
                   std::to_string(exporter::kMaxUnitsLimit) + ")")
            ->check(CLI::Range(std::int64_t{1}, exporter::kMaxUnitsLimit));
    // node_exporter's flags: --collector.NAME and --no-collector.NAME for each collector,
    // --collector.disable-defaults to start from none. CLI11 counts a flag given as its
    // negation as -1.
    bool disable_defaults = false;
    std::vector<std::pair<exporter::Collector, std::int64_t>> chosen;
    for (const auto& c : exporter::collectors()) {
        std::string flags = "--collector.";
        flags.append(c.name).append(",!--no-collector.").append(c.name);
        app.add_flag_function(
            flags, [&chosen, id = c.id](std::int64_t count) { chosen.emplace_back(id, count); },
            std::string{c.help} + (c.by_default ? " (default on)" : " (default off)"));
    }
    app.add_flag("--collector.disable-defaults", disable_defaults,
                 "Start from no collector: only those named by --collector.NAME");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return code == 0 ? 0 : kExitUsage;
    }
    auto collectors =
        disable_defaults ? exporter::CollectorSet::none() : exporter::CollectorSet::defaults();
    for (const auto& [id, count] : chosen) {
        const auto& info = exporter::collectors()[static_cast<std::size_t>(id)];
        if (count == 0) {
            std::fprintf(stderr,
                         "monitord-exporter: --collector.%.*s and --no-collector.%.*s both "
                         "given: keep one\n",
                         static_cast<int>(info.name.size()), info.name.data(),
                         static_cast<int>(info.name.size()), info.name.data());
            return kExitUsage;
        }
        collectors.set(id, count > 0);
    }
    if (limit_option->count() > 0 && !collectors.on(exporter::Collector::Units)) {
        std::fprintf(stderr,
                     "monitord-exporter: --collector.units.limit with the units collector off: "
                     "add --collector.units\n");
        return kExitUsage;
    }
    collectors.set_units_limit(units_limit);
    auto level = monitor::value_named(monitord::kLogLevelNames, log_level);
    if (!level) {
        std::fprintf(stderr,
                     "monitord-exporter: --log-level %s: use trace, debug, info, warning "
                     "or error\n",
                     log_level.c_str());
        return kExitUsage;
    }
    monitord::setup_logging(*level);
    raise_descriptor_limit();

    exporter::WebConfig web;
    if (!web_config_file.empty()) {
        auto read = exporter::read_web_config(web_config_file);
        if (!read) {
            spdlog::error("--web.config.file: {}", read.error().message);
            return 1;
        }
        web = std::move(*read);
        if (!web.users.empty() && !web.tls) {
            spdlog::warn(
                "{}: basic_auth_users without tls_server_config: passwords cross the "
                "network in the clear",
                web_config_file);
        }
    }

    // systemd's socket unit, or a socket of our own.
    monitor::UniqueFd listener;
    const int passed = sd_listen_fds(/*unset_environment=*/1);
    if (passed > 1) {
        spdlog::error("systemd passed {} sockets; monitord-exporter.socket should have one",
                      passed);
        return 1;
    }
    std::string where;
    if (passed == 1) {
        listener.reset(SD_LISTEN_FDS_START);
        where = "the socket systemd passed";
    } else {
        auto fd = exporter::listen_on(listen);
        if (!fd) {
            spdlog::error("{}", fd.error().message);
            return 1;
        }
        listener = std::move(*fd);
        where = listen;
    }

    sd_event* raw = nullptr;
    if (int r = sd_event_default(&raw); r < 0) {
        spdlog::error("sd_event_default: {}", monitor::errno_message(-r));
        return 1;
    }
    monitord::EventPtr event{raw};
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    sd_event_add_signal(event.get(), nullptr, SIGTERM, nullptr, nullptr);
    sd_event_add_signal(event.get(), nullptr, SIGINT, nullptr, nullptr);

    auto worker = exporter::ScrapeWorker::start(
        event.get(),
        exporter::MonitordScraper{
            socket, std::chrono::milliseconds{static_cast<long>(timeout_s * 1000)}, collectors});
    if (!worker) {
        spdlog::error("{}", worker.error().message);
        return 1;
    }
    Exporter routes{std::move(*worker), collectors};
    exporter::BasicAuth auth{web.users};
    exporter::HttpServer::Options options{
        .limits = limits, .tls = web.tls, .authorize = {}, .headers = web.headers};
    if (auth.required()) {
        options.authorize = [&auth](const std::string& user, const std::string& password) {
            return auth.allows(user, password);
        };
    }
    auto server = exporter::HttpServer::start(
        event.get(), std::move(listener),
        [&](const exporter::HttpRequest& req, const exporter::HttpServer::Respond& respond) {
            routes.handle(req, respond);
        },
        [](const std::string& m) { spdlog::warn("http: {}", m); }, std::move(options));
    if (!server) {
        spdlog::error("{}", server.error().message);
        return 1;
    }
    spdlog::info("serving /metrics on {}{}{}, collectors {}", where, web.tls ? " over TLS" : "",
                 auth.required() ? " to the web config's users" : "",
                 collectors.names().empty() ? std::string{"none"} : collectors.names());
    sd_notifyf(0, "READY=1\nSTATUS=Serving /metrics on %s", where.c_str());
    const int r = sd_event_loop(event.get());
    sd_notify(0, "STOPPING=1");
    return r < 0 ? 1 : 0;
}

}  // namespace

// An exception that reaches here is a bug: it ends the program with its message and the
// destructors run, instead of std::terminate.
int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "monitord-exporter: %s\n", e.what());
        return 1;
    }
}
