// monitord: the CPU monitor daemon. See monitord(8).
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "config.hpp"
#include "logging.hpp"
#include "manager.hpp"
#include "monitord-config.h"

namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

}  // namespace

int main(int argc, char** argv) {
    using monitord::Config;

    CLI::App app{"monitord: CPU loading monitor daemon (see monitord(8))", "monitord"};
    std::string config_file;
    Config flags;
    long long history = 0;
    bool show_loading = false;
    bool check_config = false;
    std::string proc_root = "/proc";
    std::string sys_root = "/sys";

    app.set_version_flag("--version", "monitord " MONITORD_VERSION);
    app.add_option("-c,--config", config_file,
                   "Configuration file (default " + monitord::default_config_path().string() +
                       ", if it exists)");
    auto* socket_opt = app.add_option("-s,--socket", flags.socket,
                                      "Control socket path (default /run/monitord/"
                                      "io.monitord.Monitor as root, "
                                      "$XDG_RUNTIME_DIR/monitord/io.monitord.Monitor otherwise)");
    auto* history_opt = app.add_option("--history-seconds", history,
                                       "Length of the loading history window (1-3600, default 60)");
    auto* level_opt = app.add_option("--log-level", flags.log_level,
                                     "trace, debug, info, warning or error (default info)");
    auto* probe_opt = app.add_option(
        "--probe", flags.probe,
        "Idle probes: spin (measure loading the MON way, the default), sleep (wake up at "
        "10 Hz only, for the watchdog), off");
    app.add_flag("--show-loading", show_loading,
                 "Print the loading of the machine and of each CPU every second on stdout");
    app.add_flag("--check-config", check_config, "Check the configuration file and exit");
    app.add_option("--proc-root", proc_root, "Where procfs is mounted (for tests)")->group("");
    app.add_option("--sys-root", sys_root, "Where sysfs is mounted (for tests)")->group("");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int code = app.exit(e);
        return code == 0 ? 0 : kExitUsage;
    }

    monitord::ManagerOptions options;
    options.socket_given = socket_opt->count() > 0;
    options.history_given = history_opt->count() > 0;
    options.log_level_given = level_opt->count() > 0;
    options.probe_given = probe_opt->count() > 0;
    if (options.socket_given && (flags.socket.empty() || flags.socket[0] != '/')) {
        std::fprintf(stderr, "monitord: --socket %s: the path must be absolute\n",
                     flags.socket.c_str());
        return kExitUsage;
    }
    if (options.history_given) {
        if (auto r = monitord::validate_history_seconds(history); !r) {
            std::fprintf(stderr, "monitord: --history-seconds: %s; use %s\n",
                         r.error().message.c_str(), monitord::kHistorySecondsAccepted);
            return kExitUsage;
        }
        flags.history_seconds = static_cast<std::size_t>(history);
    }
    if (options.probe_given) {
        if (auto r = monitord::validate_probe(flags.probe); !r) {
            std::fprintf(stderr, "monitord: --probe: %s; use %s\n", r.error().message.c_str(),
                         monitord::kProbeAccepted);
            return kExitUsage;
        }
    }
    if (options.log_level_given) {
        if (auto r = monitord::validate_log_level(flags.log_level); !r) {
            std::fprintf(stderr, "monitord: --log-level: %s; use %s\n", r.error().message.c_str(),
                         monitord::kLogLevelsAccepted);
            return kExitUsage;
        }
    }

    // Defaults, then the file, then the flags.
    Config config;
    std::filesystem::path file =
        config_file.empty() ? monitord::default_config_path() : std::filesystem::path{config_file};
    if (!config_file.empty() || std::filesystem::exists(file)) {
        auto loaded = monitord::load_config(file, config);
        if (!loaded) {
            std::fprintf(stderr, "monitord: %s\n", loaded.error().message.c_str());
            return kExitError;
        }
        config = *loaded;
        options.config_file = file;
    }
    if (check_config) {
        std::printf("%s: OK\n", options.config_file ? file.c_str() : "built-in defaults");
        return 0;
    }
    if (options.socket_given) config.socket = flags.socket;
    if (options.history_given) config.history_seconds = flags.history_seconds;
    if (options.log_level_given) config.log_level = flags.log_level;
    if (options.probe_given) config.probe = flags.probe;
    options.config = config;
    options.command_line = flags;
    options.show_loading = show_loading;
    options.proc_root = proc_root;
    options.sys_root = sys_root;

    monitord::setup_logging(config.log_level);

    // Block the signals the event loop handles before anything could start a thread.
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, nullptr);
    signal(SIGPIPE, SIG_IGN);

    auto manager = monitord::Manager::create(std::move(options));
    if (!manager) {
        spdlog::error("{}", manager.error().message);
        return kExitError;
    }
    return (*manager)->run();
}
