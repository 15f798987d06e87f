// monitord: the CPU monitor daemon. See monitord(8).
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

#include "config.hpp"
#include "logging.hpp"
#include "manager.hpp"
#include "monitor/loading/probe_process.hpp"
#include "monitord-config.h"

namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

int run(int argc, char** argv) {
    using monitord::Config;

    CLI::App app{"monitord: CPU loading monitor daemon (see monitord(8))", "monitord"};
    std::string config_file;
    monitord::Flags flags;
    bool show_loading = false;
    bool check_config = false;
    std::string proc_root = "/proc";
    std::string sys_root = "/sys";

    app.set_version_flag("--version", "monitord " MONITORD_VERSION);
    app.add_option("-c,--config", config_file,
                   "Configuration file (default " + monitord::default_config_path().string() +
                       ", if it exists)");
    bool user_socket = false;
    app.add_option(
        "-s,--socket", flags.socket,
        "Control socket path (default $MONITORD_SOCKET; else /run/monitord/io.monitord.Monitor "
        "as root, the --user place otherwise)");
    app.add_flag("--user", user_socket,
                 "Listen at the calling user's own place, also as root: "
                 "$XDG_RUNTIME_DIR/monitord/io.monitord.Monitor, or "
                 "/tmp/monitord-UID/io.monitord.Monitor without XDG_RUNTIME_DIR; monctl looks "
                 "there before the system daemon's place; --socket overrides it");
    app.add_option("--state-directory", flags.state_directory,
                   "Keep the history of every second there (history.db), or none (default "
                   "$STATE_DIRECTORY, else /var/lib/monitord for the system daemon, "
                   "$XDG_STATE_HOME/monitord for a user's; none with --socket)");
    app.add_option("--history-seconds", flags.history_seconds,
                   fmt::format("Length of the loading history window (1-{}, default {})",
                               monitor::kMaxHistorySeconds, monitor::kDefaultHistorySeconds));
    app.add_option("--log-level", flags.log_level,
                   "trace, debug, info, warning or error (default info)");
    app.add_option("--probe", flags.probe,
                   "Idle probes: sleep (an idle-priority thread per CPU that wakes once a "
                   "second and pets the watchdog from the kernel's idle time; the default), "
                   "spin (MON's method: they measure the loading by spinning, the probe "
                   "source), off");
    app.add_option("--watchdog", flags.watchdog_device,
                   "Arm this hardware watchdog device, petted by the idle probes, or none (the "
                   "default: a watchdog resets the machine when a CPU is starved)");
    app.add_option(
        "--watchdog-timeout", flags.watchdog_timeout,
        fmt::format("Watchdog timeout asked of the driver, in seconds ({}-{}, default {})",
                    monitor::kMinSleepWatchdogTimeout.count(), monitor::kMaxWatchdogTimeout.count(),
                    monitor::kDefaultWatchdogTimeout.count()));
    app.add_flag("--show-loading", show_loading,
                 "Print the loading of the machine and of each CPU every second on stdout");
    app.add_flag("--check-config", check_config, "Check the configuration file and exit");
    app.add_option("--proc-root", proc_root,
                   "Where the procfs to read is mounted (default /proc): a host's /proc mounted "
                   "elsewhere in a container, or a made-up machine; use with --probe off");
    app.add_option("--sys-root", sys_root,
                   "Where the sysfs to read is mounted (default /sys), as --proc-root");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int code = app.exit(e);
        return code == 0 ? 0 : kExitUsage;
    }
    auto overrides = flags.parse();
    if (!overrides) {
        std::fprintf(stderr, "monitord: %s\n", overrides.error().message.c_str());
        return kExitUsage;
    }

    // Defaults, then the file, then the flags.
    monitord::ManagerOptions options;
    Config config;
    std::filesystem::path file =
        config_file.empty() ? monitord::default_config_path() : std::filesystem::path{config_file};
    if (!config_file.empty() || monitord::default_config_present(file)) {
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
    overrides->apply(config);
    options.config = config;
    options.overrides = *overrides;
    options.show_loading = show_loading;
    options.user_socket = user_socket;
    options.proc_root = proc_root;
    options.sys_root = sys_root;

    monitord::setup_logging(config.log_level);

    // Every control connection takes a descriptor: allow as many as the hard limit permits.
    if (rlimit nofile{};
        ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &nofile);
    }

    // Block the signals the event loop handles before anything could start a thread.
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &mask, nullptr);
    signal(SIGPIPE, SIG_IGN);

    auto manager = monitord::Manager::create(std::move(options));
    if (!manager) {
        spdlog::error("{}", manager.error().message);
        return kExitError;
    }
    return (*manager)->run();
}

}  // namespace

// An exception that reaches here is a bug: it ends the program with its message and the
// destructors run, instead of std::terminate.
int main(int argc, char** argv) {
    // The spinning probes' process (monitor/loading/probe_process.hpp): this program again,
    // started by the daemon itself, never by hand.
    if (argc == 4 && std::string_view(argv[1]) == monitor::ProbeProcess::kHelperFlag) {
        return monitor::run_probe_helper(std::atoi(argv[2]), std::atoi(argv[3]));
    }
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "monitord: %s\n", e.what());
        return kExitError;
    }
}
