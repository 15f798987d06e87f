// monctl: query and control monitord. See monctl(1).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "daemon_client.hpp"
#include "monitor/protocol/monitor_messages.hpp"
#include "monitord-config.h"
#include "views.hpp"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

struct Options {
    std::string socket;
    bool json = false;
    bool per_cpu = false;
    bool history = false;
    bool watch = false;
};

int report(const monitor::Error& e) {
    std::fprintf(stderr, "monctl: %s\n", e.message.c_str());
    return kExitError;
}

monitor::Result<monctl::DaemonClient> connect(const Options& o) {
    return monctl::DaemonClient::connect(o.socket);
}

int print_json(const nlohmann::json& j) {
    std::cout << j.dump(2) << '\n';
    return kExitOk;
}

int cmd_status(const Options& o) {
    auto c = connect(o);
    if (!c) return report(c.error());
    auto reply = c->call("GetStatus");
    if (!reply) return report(reply.error());
    if (o.json) return print_json(*reply);
    std::cout << monctl::format_status(monitor::protocol::status_from_json(*reply), c->path());
    return kExitOk;
}

int cmd_loading(const Options& o) {
    auto c = connect(o);
    if (!c) return report(c.error());
    monitor::LoadingQuery q{.per_cpu = o.per_cpu, .history = o.history};
    auto show = [&](const nlohmann::json& reply) {
        if (o.json) {
            // One object per line while watching, so that scripts can read them one by one.
            std::cout << (o.watch ? reply.dump() : reply.dump(2)) << std::endl;
            return true;
        }
        auto r = monitor::protocol::loading_from_json(reply);
        if (o.watch && ::isatty(STDOUT_FILENO)) std::cout << "\x1b[H\x1b[2J";  // redraw in place
        std::cout << (o.history ? monctl::format_history(r) : monctl::format_loading(r));
        if (o.watch) std::cout << std::endl;
        return static_cast<bool>(std::cout);
    };
    if (o.watch) {
        auto r = c->stream("GetLoading", monitor::protocol::to_json(q), show);
        if (!r) return report(r.error());
        return kExitOk;
    }
    auto reply = c->call("GetLoading", monitor::protocol::to_json(q));
    if (!reply) return report(reply.error());
    show(*reply);
    return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"monctl: query monitord, the CPU monitor daemon (see monctl(1))", "monctl"};
    app.require_subcommand(1);
    app.fallthrough();  // global options may follow the subcommand
    app.set_version_flag("--version", "monctl " MONITORD_VERSION);
    Options o;
    app.add_option("-s,--socket", o.socket,
                   "monitord's socket (default: $MONITORD_SOCKET, else the user's own daemon, "
                   "else /run/monitord/io.monitord.Monitor)");
    app.add_flag("-j,--json", o.json, "Print the daemon's reply as JSON");

    auto* status = app.add_subcommand("status", "Show the daemon's version, state and CPUs");
    auto* loading = app.add_subcommand("loading",
                                       "Show CPU loading: last second, average, "
                                       "minimum and maximum over the window");
    loading->add_flag("-p,--per-cpu", o.per_cpu, "Add a row per CPU");
    loading->add_flag("-H,--history", o.history, "Show the per-second values of the window");
    loading->add_flag("-w,--watch", o.watch,
                      "Show the figures again after every sample, until interrupted");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int code = app.exit(e);
        return code == 0 ? kExitOk : kExitUsage;
    }
    try {
        if (status->parsed()) return cmd_status(o);
        if (loading->parsed()) return cmd_loading(o);
    } catch (const nlohmann::json::exception& e) {
        // Replies are checked against the interface first; this is the backstop for a reply
        // that passes the check and still cannot be read.
        std::fprintf(stderr, "monctl: malformed reply from the daemon: %s\n", e.what());
        return kExitError;
    }
    return kExitUsage;
}
