// monctl: query and control monitord. See monctl(1).
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <exception>
#include <iostream>
#include <ranges>
#include <string_view>
#include <thread>

#include "completion.hpp"
#include "exit_status.hpp"
#include "monitor/loading/cpu_list.hpp"
#include "monitor/loading/cpu_topology.hpp"
#include "monitor/protocol/daemon_client.hpp"
#include "monitor/protocol/monitor_messages.hpp"
#include "monitord-config.h"
#include "perf_commands.hpp"
#include "timestamp.hpp"
#include "top_command.hpp"
#include "views.hpp"

namespace {

using monctl::kExitError;
using monctl::kExitOk;
using monctl::kExitUsage;

struct Options {
    std::string socket;
    bool json = false;
    bool per_cpu = false;
    bool history = false;
    bool states = false;
    bool csv = false;
    bool watch = false;
    std::int64_t units = 0;  // --units N
    bool context = false;
    std::int64_t tasks = 0;  // --tasks N
    std::string since;       // --since, --until: journalctl's times
    std::string until;
    std::int64_t runs = 20;  // watchdog history -n
};

int report(const monitor::Error& e) {
    std::fprintf(stderr, "monctl: %s\n", e.message.c_str());
    return kExitError;
}

monitor::Result<monitor::protocol::DaemonClient> connect(const Options& o) {
    return monitor::protocol::DaemonClient::connect(o.socket);
}

int print_json(const nlohmann::json& j) {
    std::cout << j.dump(2) << '\n';
    return kExitOk;
}

int cmd_status(const Options& o) {
    auto c = connect(o);
    if (!c) return report(c.error());
    auto reply = c->call(monitor::protocol::method::GetStatus);
    if (!reply) return report(reply.error());
    if (o.json) return print_json(monitor::protocol::to_json(*reply));
    std::cout << monctl::format_status(*reply, c->path());
    return kExitOk;
}

int cmd_watchdog_status(const Options& o) {
    auto c = connect(o);
    if (!c) return report(c.error());
    auto reply = c->call(monitor::protocol::method::GetStatus);
    if (!reply) return report(reply.error());
    const auto& watchdog = reply->watchdog;
    if (o.json) {
        return print_json(watchdog ? monitor::protocol::to_json(*watchdog)
                                   : nlohmann::json(nullptr));
    }
    std::cout << monctl::format_watchdog(watchdog);
    return kExitOk;
}

int cmd_watchdog_history(const Options& o) {
    auto c = connect(o);
    if (!c) return report(c.error());
    auto reply = c->call(monitor::protocol::method::GetHistoryRuns,
                         monitor::protocol::HistoryRunsIn{.most = o.runs});
    if (!reply) return report(reply.error());
    if (o.json) return print_json(monitor::protocol::to_json(*reply));
    std::cout << monctl::format_history_runs(*reply);
    return kExitOk;
}

int cmd_loading(const Options& o) {
    if (o.json && o.csv) {
        std::fprintf(stderr, "monctl: --json and --csv exclude each other; choose one\n");
        return kExitUsage;
    }
    if (o.csv && (o.units > 0 || o.context || o.tasks > 0)) {
        std::fprintf(stderr,
                     "monctl: --csv writes the loading's table; the %s are shown in the table "
                     "view and in --json\n",
                     o.units > 0 ? "units (--units)"
                     : o.context ? "CPUs' context (--context)"
                                 : "tasks (--tasks)");
        return kExitUsage;
    }
    if (o.csv && o.history && o.states) {
        std::fprintf(stderr,
                     "monctl: --csv writes one table: the history (--history) or the states "
                     "(--states), not both\n");
        return kExitUsage;
    }
    // A range of the history: read once, from the daemon's disk.
    std::optional<std::pair<monctl::WallTime, monctl::WallTime>> range;
    if (!o.since.empty() || !o.until.empty()) {
        if (o.watch || o.units > 0 || o.context || o.tasks > 0) {
            std::fprintf(stderr,
                         "monctl: --since and --until read the history, which keeps the loading "
                         "and the states; not with %s\n",
                         o.watch       ? "--watch"
                         : o.units > 0 ? "--units"
                         : o.context   ? "--context"
                                       : "--tasks");
            return kExitUsage;
        }
        const auto now = std::chrono::system_clock::now();
        auto since = o.since.empty() ? monitor::Result<monctl::WallTime>{monctl::WallTime{}}
                                     : monctl::parse_timestamp(o.since, now);
        if (!since) {
            std::fprintf(stderr, "monctl: --since: %s\n", since.error().message.c_str());
            return kExitUsage;
        }
        auto until = o.until.empty() ? monitor::Result<monctl::WallTime>{now}
                                     : monctl::parse_timestamp(o.until, now);
        if (!until) {
            std::fprintf(stderr, "monctl: --until: %s\n", until.error().message.c_str());
            return kExitUsage;
        }
        if (*until < *since) {
            std::fprintf(stderr, "monctl: --until (%s) is before --since (%s)\n", o.until.c_str(),
                         o.since.c_str());
            return kExitUsage;
        }
        range = std::pair{*since, *until};
    }
    auto c = connect(o);
    if (!c) return report(c.error());
    monitor::LoadingQuery q{.per_cpu = o.per_cpu,
                            .history = o.history,
                            .states = o.states,
                            .units = o.units,
                            .context = o.context,
                            .tasks = o.tasks};
    if (range) {
        auto us = [](monctl::WallTime t) {
            return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch())
                .count();
        };
        if (!o.since.empty()) q.since = us(range->first);
        q.until = us(range->second);
    }
    bool first = true;
    auto show = [&](const monitor::LoadingReport& r) {
        if (o.json) {
            // One object per line while watching, so that scripts can read them one by one.
            const auto j = monitor::protocol::to_json(r);
            std::cout << (o.watch ? j.dump() : j.dump(2)) << std::endl;
            return static_cast<bool>(std::cout);
        }
        std::string text;
        if (o.csv) {
            // One header, then the rows of every sample.
            text = o.history  ? monctl::format_history_csv(r, first, !first)
                   : o.states ? monctl::format_states_csv(r, first)
                              : monctl::format_loading_csv(r, first);
        } else {
            if (o.watch && ::isatty(STDOUT_FILENO)) text += "\x1b[H\x1b[2J";  // redraw in place
            if (range) text += monctl::format_range(r, range->first, range->second);
            if (range && !r.timestamp) {
                std::cout << text << std::flush;
                return static_cast<bool>(std::cout);
            }
            if (o.history) text += monctl::format_history(r);
            if (o.states) text += (o.history ? "\n" : "") + monctl::format_states(r);
            if (!o.history && !o.states) text += monctl::format_loading(r);
            if (o.units > 0) text += "\n" + monctl::format_units(r);
            if (o.context) text += "\n" + monctl::format_context(r);
            if (o.tasks > 0) text += "\n" + monctl::format_tasks(r);
            if (o.watch) text += '\n';
        }
        first = false;
        std::cout << text << std::flush;
        return static_cast<bool>(std::cout);
    };
    if (o.watch) {
        auto r = c->stream(monitor::protocol::method::GetLoading, q, show);
        if (!r) return report(r.error());
        return kExitOk;
    }
    auto reply = c->call(monitor::protocol::method::GetLoading, q);
    if (!reply) return report(reply.error());
    // The daemon samples the context and the tasks while they are asked for: a first request
    // starts it, and their figures come two seconds later. Asked again until they do (at
    // most 3 s).
    auto pending = [&](const monitor::LoadingReport& r) {
        const bool context = o.context && r.context && r.context->unavailable.empty() &&
                             (!r.context->sample || r.context->sample->seconds <= 0);
        const bool tasks =
            o.tasks > 0 && r.tasks && r.tasks->unavailable.empty() && r.tasks->seconds <= 0;
        return context || tasks;
    };
    for (int tries = 0; tries < 3 && pending(*reply); ++tries) {
        std::this_thread::sleep_for(std::chrono::seconds(1));
        reply = c->call(monitor::protocol::method::GetLoading, q);
        if (!reply) return report(reply.error());
    }
    show(*reply);
    return kExitOk;
}

// -C, --cpu: a CPU or a list of them, as /sys and perf write them ("0,2-3").
CLI::Option* add_cpu_list(CLI::App* sub, monctl::PerfOptions& po, const std::string& help) {
    return sub
        ->add_option_function<std::string>(
            "-C,--cpu",
            [&po](const std::string& text) {
                auto cpus = monitor::parse_cpu_list(text);
                if (!cpus || cpus->empty()) {
                    throw CLI::ValidationError(
                        "-C", fmt::format("'{}' is not a list of CPUs: give 3, 0,2 or 0-3{}", text,
                                          cpus ? "" : " (" + cpus.error().message + ")"));
                }
                po.cpus = std::move(*cpus);
            },
            help)
        ->type_name("CPUS");
}

// -p, --pid: a process, or with `list` several as perf stat takes them ("1,2").
CLI::Option* add_pid_list(CLI::App* sub, monctl::PerfOptions& po, const std::string& help,
                          bool list) {
    return sub
        ->add_option_function<std::string>(
            "-p,--pid",
            [&po, list](const std::string& text) {
                std::vector<long> pids;
                for (const auto word : std::views::split(std::string_view{text}, ',')) {
                    const std::string_view w{word.begin(), word.end()};
                    long pid = 0;
                    auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), pid);
                    if (ec != std::errc{} || end != w.data() + w.size() || pid <= 0) {
                        throw CLI::ValidationError(
                            "-p", fmt::format("'{}' is not a process id{}: give {}", w,
                                              list ? " in '" + text + "'" : "",
                                              list ? "42 or a list as perf's: 42,43" : "42"));
                    }
                    pids.push_back(pid);
                }
                if (!list && pids.size() > 1) {
                    throw CLI::ValidationError(
                        "-p", fmt::format("'{}': this command takes one process (perf stat, "
                                          "collect and start count several)",
                                          text));
                }
                po.pids = std::move(pids);
            },
            help)
        ->type_name(list ? "PIDS" : "PID");
}

// The target options of a sampling command (perf profile, perf overflows): every CPU (the
// default), one CPU, a process, a cgroup or a unit, one of them; with `per_cpu`, each CPU
// separately too. `verb` starts the help texts: "Sample ", or "".
void add_sampling_target(CLI::App* sub, monctl::PerfOptions& po, const std::string& verb,
                         bool per_cpu = false) {
    auto text = [&](const std::string& what) {
        return verb.empty() ? what
                            : verb + static_cast<char>(std::tolower(what[0])) + what.substr(1);
    };
    auto* all = sub->add_flag("-a,--all-cpus")->description(text("Every CPU (the default)"));
    auto* cpu = add_cpu_list(sub, po, text("CPUs: 3, or a list as perf's: 0,2-3"));
    auto* pid = add_pid_list(sub, po,
                             text("A process: all its threads, and those it starts; ends "
                                  "early when it exits"),
                             false);
    auto* cgroup =
        sub->add_option("-G,--cgroup", po.cgroup, text("A cgroup (a path below /sys/fs/cgroup)"));
    // Long names only where perf's letters mean something else (perf record's -u is a user).
    auto* unit = sub->add_option("--unit", po.unit, text("A systemd unit"));
    std::vector<CLI::Option*> targets{all, cpu, pid, cgroup, unit};
    CLI::Option* each = nullptr;
    if (per_cpu) {
        each = sub->add_flag("-A,--per-cpu", po.per_cpu,
                             text("Every CPU (or those of -C), and each CPU's own profile"));
        targets.push_back(each);
    }
    for (auto* a : targets) {
        for (auto* b : targets) {
            // -A -C 0,2: those CPUs, each on its own, as perf stat -A -C.
            const bool cpus_each = (a == cpu && b == each) || (a == each && b == cpu);
            if (a != b && !cpus_each) a->excludes(b);
        }
    }
}

int run(int argc, char** argv) {
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
    loading->add_flag("-S,--states", o.states,
                      "Show where the time went: user, nice, system, irq, softirq, iowait, "
                      "steal, guest, guest_nice, idle");
    loading
        ->add_option("-u,--units", o.units,
                     "Add the N busiest systemd units (10 without N): CPU time from the "
                     "kernel's cgroup accounting, in percent of one CPU")
        ->expected(0, 1)
        ->default_str("10")
        ->type_name("N")
        ->check(CLI::Range(std::int64_t{1}, monitor::kMaxUnitsListed));
    loading->add_flag("--context", o.context,
                      "Add the CPUs' context: runnable and waiting tasks, CPU pressure (PSI), "
                      "the clock, interrupts and softirqs by source; per CPU with --per-cpu");
    loading
        ->add_option("-t,--tasks", o.tasks,
                     "Add each CPU's N busiest tasks (3 without N): threads' CPU time over the "
                     "last second, from the kernel's per-task accounting, in percent of one CPU")
        ->expected(0, 1)
        ->default_str("3")
        ->type_name("N")
        ->check(CLI::Range(std::int64_t{1}, monitor::kMaxTasksListed));
    loading->add_option("--since", o.since,
                        "Read the history on disk from this time instead of the window: "
                        "\"03:00\", \"yesterday\", \"-2h\", \"2026-12-01 03:00:00\" "
                        "(journalctl's formats, systemd.time(7))");
    loading->add_option("--until", o.until,
                        "Read the history on disk up to this time (default now), as --since");
    loading->add_flag("--csv", o.csv, "Comma-separated values with a time column");
    loading->add_flag("-w,--watch", o.watch,
                      "Show the figures again after every sample, until interrupted");

    auto* watchdog = app.add_subcommand("watchdog", "The hardware watchdog the idle probes pet");
    watchdog->require_subcommand(1);
    auto* watchdog_status = watchdog->add_subcommand(
        "status", "Show the device, its timeout, time left, the last pet and the pets so far");
    auto* watchdog_history = watchdog->add_subcommand(
        "history",
        "Show monitord's runs the history on disk keeps, how each ended (stopped, killed, the "
        "machine down, reset by the watchdog), and the machine's last seconds before an end "
        "that was not a stop");
    watchdog_history->add_option("-n,--runs", o.runs, "The newest N runs, 1 to 1000 (default 20)")
        ->check(CLI::Range(1, 1000))
        ->type_name("N");

    monctl::TopOptions to;
    auto* top = app.add_subcommand(
        "top",
        "A full-screen live view: a bar per CPU by state with its figures and history, the "
        "watchdog, a running counter session");
    top->add_flag("--once", to.once, "Print one frame as plain text and exit (for scripts)");
    top->add_option("-i,--interval", to.interval,
                    "Seconds between updates, 0.1 to 60 (default 1; 500ms works too)")
        ->type_name("SECONDS");
    top->add_option("--at", to.at,
                    "Start at a moment of the past: the minute of the history on disk up to it "
                    "(journalctl's times: 03:00, yesterday, -2h, @EPOCH)")
        ->type_name("TIME");
    top->footer(
        "Keys: q quit (as do Ctrl-C and SIGTERM), s switch the source (procstat, probe), "
        "o order by CPU or by load, Up/Down PgUp/PgDn Home/End scroll, [ ] a minute back or on "
        "({ } an hour), n now. See monctl(1).\n");

    monctl::PerfOptions po;
    auto* perf = app.add_subcommand("perf", "Performance counters: list, plan, count");
    perf->require_subcommand(1);
    auto* perf_info = perf->add_subcommand("info", "Show the PMUs: counters, width, events");
    auto* perf_list = perf->add_subcommand("list", "List the events and the counters of each");
    perf_list->add_option("pmu", po.pmu, "Only the events of this PMU (e.g. perf, ppc750)");
    auto* list_metrics = perf_list->add_flag(
        "--metrics", po.list_metrics,
        "List the derived metrics that can count here (perf collect -M takes them and their "
        "groups)");
    perf_list
        ->add_flag("--all", po.list_all,
                   "With --metrics: every definition, where it is, and why one cannot "
                   "count here")
        ->needs(list_metrics);
    auto* perf_plan = perf->add_subcommand(
        "plan", "Show the counter sets and the counter of each event, without counting");
    auto* perf_collect =
        perf->add_subcommand("collect", "Count events for a duration and show the totals");
    auto* perf_start = perf->add_subcommand("start", "Start counting until `perf stop`");
    auto* perf_read = perf->add_subcommand("read", "Show the counts of the running session");
    auto* perf_stop = perf->add_subcommand("stop", "Stop the running session, show its totals");
    auto* perf_show = perf->add_subcommand(
        "show", "Show the standing sessions of monitord.conf ([[counters]]) and their counts");
    perf_show->add_option("name", po.session, "Only this session");
    auto* perf_reset = perf->add_subcommand(
        "reset",
        "Count from zero again: the running session, or the standing session named; "
        "show the counts up to the reset");
    perf_reset->add_option("name", po.session, "The standing session to reset");
    auto* perf_pause = perf->add_subcommand(
        "pause",
        "Stop counting until `perf resume`: the running session, or the standing session "
        "named; show the counts up to the pause");
    perf_pause->add_option("name", po.session, "The standing session to pause");
    auto* perf_resume = perf->add_subcommand(
        "resume",
        "Count again after `perf pause`: the running session, or the standing session named; "
        "show the counts so far");
    perf_resume->add_option("name", po.session, "The standing session to resume");
    auto* perf_stat = perf->add_subcommand(
        "stat", "Run a command and count it from its first instruction to its exit");
    auto* perf_profile = perf->add_subcommand(
        "profile",
        "Sample where a target spends its time (or a command, until it exits): the top "
        "functions and objects, the split by mode, an address histogram");
    auto* perf_overflows = perf->add_subcommand(
        "overflows",
        "Be told of an event's overflows every N events on a target, in batches with where "
        "the last one happened (the sampled address)");
    for (auto* sub : {perf_plan, perf_collect, perf_start, perf_stat}) {
        auto* ev = sub->add_option("-e,--events", po.events,
                                   "Events, comma-separated; braces keep a group together: "
                                   "cycles,{ppc750::r205,ppc750::r108}");
        if (sub != perf_stat) {
            // -e or -M: checked as the command runs (no_events).
            ev->description(
                "Events, comma-separated; braces keep a group together: "
                "cycles,{ppc750::r205,ppc750::r108} (with -M, besides the metrics' events)");
            sub->add_option("-M,--metrics", po.metrics,
                            "Derived metrics, by group or name (ipc,branch,sched): their "
                            "events are counted too (monctl perf list --metrics)");
        }
        sub->add_option("--mux", po.mux, "Who rotates counter sets: daemon or kernel")
            ->check(CLI::IsMember({"daemon", "kernel"}));
        sub->add_option("--slice", po.slice_ms, "Milliseconds per counter set (default 100)")
            ->check(CLI::Range(10, 10000));
        sub->add_option("--counters", po.counters,
                        "Use at most N counters per PMU; software events take one too")
            ->check(CLI::Range(1, 32));
    }
    for (auto* sub : {perf_plan, perf_collect, perf_start}) {
        // The letters of perf stat: -a all CPUs (here the default), -A each CPU on its own.
        auto* all =
            sub->add_flag("-a,--all-cpus")->description("Count every CPU, added up (the default)");
        auto* each = sub->add_flag("-A,--per-cpu", po.per_cpu, "Count each CPU separately");
        auto* cpu = add_cpu_list(sub, po,
                                 "Count CPUs: 3, or a list as perf's: 0,2-3 (added up; "
                                 "each on its own with -A)");
        auto* pid = add_pid_list(sub, po,
                                 "Count a process: all its threads, and those it starts; or a "
                                 "list as perf's: 42,43 (added up)",
                                 true);
        auto* cgroup = sub->add_option("-G,--cgroup", po.cgroup,
                                       "Count a cgroup (a path below /sys/fs/cgroup)");
        auto* unit = sub->add_option("--unit", po.unit, "Count a systemd unit's cgroup");
        for (auto* a : {all, each, cpu, pid, cgroup, unit}) {
            for (auto* b : {all, each, cpu, pid, cgroup, unit}) {
                // -A -C 0,2: those CPUs, each on its own, as perf stat -A -C.
                const bool cpus_each = (a == cpu && b == each) || (a == each && b == cpu);
                if (a != b && !cpus_each) a->excludes(b);
            }
        }
        // perf stat's --per-core and its kin: every CPU (or those of -C), added up by level.
        std::vector<CLI::Option*> levels;
        for (const auto& n : monitor::kCpuLevelNames) {
            if (n.value == monitor::CpuLevel::Cpu) continue;
            const monitor::CpuLevel level = n.value;
            levels.push_back(sub->add_flag_callback(
                fmt::format("--per-{}", n.name),
                [&po, level] {
                    po.per_cpu = true;
                    po.per = level;
                },
                fmt::format("Count each CPU, added up by {} (the topology in sysfs)", n.name)));
        }
        for (auto* l : levels) {
            for (auto* other : levels) {
                if (other != l) l->excludes(other);
            }
            for (auto* b : {each, pid, cgroup, unit}) l->excludes(b);
        }
    }
    for (auto* sub : {perf_collect, perf_start}) {
        sub->add_option("--sample-every", po.sample_every,
                        "Sample each event every N events too, and show where the last sample "
                        "of each record was (its instruction address)");
    }
    // perf stat's letters keep perf's meaning; ours that perf gives another have long names
    // only (perf's -d is --detailed, -i --no-inherit).
    perf_collect->add_option("--duration", po.duration, "How long: 5s, 250ms, 2m (default 1s)");
    for (auto* sub : {perf_collect, perf_stat}) {
        auto* every = sub->add_option("--interval", po.interval,
                                      "Show the counts of every period of this length as well "
                                      "(5s, 250ms)");
        auto* every_ms =
            sub->add_option("-I,--interval-print", po.interval_print,
                            "The same in perf's words: every MSEC milliseconds (a bare number)");
        every->excludes(every_ms);
        sub->add_option("-o,--output", po.output,
                        "Write the counts to FILE (with perf's '# started on' line)");
    }
    for (auto* sub :
         {perf_collect, perf_read, perf_stop, perf_reset, perf_pause, perf_resume, perf_stat}) {
        auto* csv = sub->add_flag("--csv", po.csv, "Comma-separated values, one line per event");
        auto* separated = sub->add_option("-x,--field-separator", po.separator,
                                          "perf stat's separated fields, SEP between them");
        csv->excludes(separated);
    }
    perf_stat
        ->add_option("-r,--repeat", po.repeat,
                     "Run the command N times: the mean of each count and its spread")
        ->check(CLI::Range(1, 10000));
    perf_stat->add_option("command", po.command, "The command and its arguments (after --)")
        ->required();

    perf_profile->add_option("-e,--event", po.events,
                             "The event sampled (default perf::CPU-CLOCK)");
    auto* frequency = perf_profile->add_option("-F,--freq", po.frequency,
                                               "About N samples a second (default 4000)");
    auto* period =
        perf_profile->add_option("-c,--count", po.period, "A sample every N events (the period)");
    frequency->excludes(period);
    period->excludes(frequency);
    add_sampling_target(perf_profile, po, "Sample ", true);
    // perf record's -d is --data, -i --no-inherit, -I --intr-regs: long names only.
    perf_profile->add_option("--duration", po.profile_duration,
                             "How long: 5s, 250ms, 2m (default 5s; a command: until it exits)");
    perf_profile->add_option("--interval", po.interval,
                             "Show the profile of every interval of this length as well");
    auto* user_only = perf_profile->add_flag("--user", po.user, "Sample user mode only");
    auto* kernel_only = perf_profile->add_flag("--kernel", po.kernel, "Sample kernel mode only");
    user_only->excludes(kernel_only);
    perf_profile
        ->add_option("-n,--top", po.top,
                     "Show the N functions and objects with the most samples (default "
                     "20, 0 for all)")
        ->check(CLI::NonNegativeNumber);
    perf_profile->add_option("--range", po.range,
                             "An address histogram of START-END in 4-byte buckets, or "
                             "START-END/BUCKET (0x401000-0x402000/16)");
    perf_profile->add_flag("-g", po.callchain,
                           "Record each sample's call chain (frame pointers in user mode, as "
                           "perf record -g) and show the stacks with the most samples");
    perf_profile->add_option("--call-graph", po.call_graph,
                             "Record call chains as -g does, made by fp (frame pointers) or "
                             "dwarf[,SIZE] (unwound from SIZE bytes of user stack copied per "
                             "sample, default 8192, as perf record --call-graph dwarf; x86-64)");
    perf_profile->add_option("--folded", po.folded,
                             "Write every stack, folded for flamegraph.pl, to this file ('-': "
                             "standard output); implies -g");
    perf_profile->add_option("--pprof", po.pprof,
                             "Write the whole profile to this file in pprof's format (gzipped "
                             "profile.proto, for go tool pprof, speedscope, Grafana), every "
                             "function or, with -g, every stack");
    perf_overflows->add_option("-e,--event", po.events, "The event")->required();
    perf_overflows->add_option("-c,--count", po.period, "An overflow every N events")->required();
    add_sampling_target(perf_overflows, po, "");
    perf_overflows->add_option("--duration", po.profile_duration, "How long (default 5s)");
    perf_overflows->add_option("-b,--batch", po.batch,
                               "At most one batch this often (default 100ms)");
    auto* user_overflows = perf_overflows->add_flag("--user", po.user, "User mode only");
    auto* kernel_overflows = perf_overflows->add_flag("--kernel", po.kernel, "Kernel mode only");
    user_overflows->excludes(kernel_overflows);
    perf_profile->add_option("command", po.command,
                             "A command to run and sample until it exits (after --)");

    // The shells' completion scripts ask what may come next (completion.hpp).
    if (argc >= 2 && std::string_view{argv[1]} == "__complete") {
        std::vector<std::string> words(argv + 2, argv + argc);
        if (words.empty()) words.emplace_back();
        for (const auto& c : monctl::complete(app, words, monctl::live_sources(words))) {
            std::cout << c << '\n';
        }
        return kExitOk;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int code = app.exit(e);
        return code == 0 ? kExitOk : kExitUsage;
    }
    try {
        if (status->parsed()) return cmd_status(o);
        if (loading->parsed()) return cmd_loading(o);
        if (watchdog_status->parsed()) return cmd_watchdog_status(o);
        if (watchdog_history->parsed()) return cmd_watchdog_history(o);
        if (top->parsed()) {
            if (o.json) {
                std::fprintf(stderr,
                             "monctl: top shows a screen; for JSON after every sample, use "
                             "loading --watch --json\n");
                return kExitUsage;
            }
            to.socket = o.socket;
            return monctl::run_top(to);
        }
        po.socket = o.socket;
        po.json = o.json;
        if (perf_info->parsed()) return monctl::perf_info(po);
        if (perf_list->parsed()) return monctl::perf_list(po);
        if (perf_plan->parsed()) return monctl::perf_plan(po);
        if (perf_collect->parsed()) return monctl::perf_collect(po);
        if (perf_start->parsed()) return monctl::perf_start(po);
        if (perf_read->parsed()) return monctl::perf_read(po);
        if (perf_stop->parsed()) return monctl::perf_stop(po);
        if (perf_show->parsed()) return monctl::perf_show(po);
        if (perf_reset->parsed()) return monctl::perf_reset(po);
        if (perf_pause->parsed()) return monctl::perf_pause(po, true);
        if (perf_resume->parsed()) return monctl::perf_pause(po, false);
        if (perf_stat->parsed()) return monctl::perf_stat(po);
        if (perf_profile->parsed()) return monctl::perf_profile(po);
        if (perf_overflows->parsed()) return monctl::perf_overflows(po);
    } catch (const nlohmann::json::exception& e) {
        // Replies are read into their types by the client, which makes what does not read
        // BADDATA; this is the backstop for a value that reads and still cannot be shown.
        std::fprintf(stderr, "monctl: malformed reply from the daemon: %s\n", e.what());
        return kExitError;
    }
    return kExitUsage;
}

}  // namespace

// An exception that reaches here is a bug: it ends the program with its message and the
// destructors run, instead of std::terminate.
int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "monctl: %s\n", e.what());
        return kExitError;
    }
}
