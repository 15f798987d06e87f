// The sampling half of the control interface: Profile samples a target as a SampleRun in the
// runtime (which paces it: its rings read when the kernel says they fill and every 50 ms, so
// that a process is named while it still runs; its samples named on a thread of its own, as
// naming reads other users' files, which the loop never waits for), and replies with the
// profile: once at the end, or streamed per interval. WatchOverflows samples an event every N
// events and tells of the overflows in batches, each with the last one's address. Several runs at
// once, each owned by its connection.
#pragma once

#include <systemd/sd-event.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "access_rules.hpp"
#include "monitor/perf/event_catalog.hpp"
#include "monitor/perf/kernel_symbols.hpp"
#include "monitor/perf/profile_session.hpp"
#include "monitor/runtime/runtime.hpp"
#include "sample_run_watch.hpp"
#include "varlink_server.hpp"

namespace monitord {

struct ProfileServiceOptions {
    std::filesystem::path cgroup_root = "/sys/fs/cgroup";
    std::filesystem::path kallsyms = "/proc/kallsyms";
    std::filesystem::path modules = "/proc/modules";  // when the kept kallsyms are stale
    std::size_t max_profiles = 8;                     // at once, for everyone
    // At once, for one user other than root ([limits] profiles-per-user); 0: root only.
    std::size_t max_profiles_per_user = 2;
    // The longest one of them runs ([limits] profile-duration): a longer duration is refused,
    // a process sampled until it exits is sampled this long at most.
    std::chrono::seconds max_duration_per_user{3600};
    // The perf_event files one of them opens, for a user other than root ([limits]
    // perf-files-per-session).
    monitor::perf::FileBudget files_per_session;
};

class ProfileService {
  public:
    // The runs go into `runtime`, whose next_due() changed when `schedule` is called;
    // `catalog` is the counter service's (null: performance counters are unavailable, for
    // `catalog_error`); `online_cpus` gives the CPUs to sample on.
    ProfileService(sd_event* event, VarlinkServer& server, monitor::Runtime& runtime,
                   std::function<void()> schedule, const monitor::perf::EventCatalog* catalog,
                   std::string catalog_error, std::function<std::vector<int>()> online_cpus,
                   ProfileServiceOptions options);
    ~ProfileService();
    ProfileService(const ProfileService&) = delete;
    ProfileService& operator=(const ProfileService&) = delete;

    // Registers the method.
    void setup();
    // What the runtime's run_due() did to a run: the replies it calls for.
    void run_stepped(monitor::Runtime::Due::SampleStep& step);
    // A connection closed: its profile ends.
    void connection_closed(std::uint64_t connection);
    std::size_t running() const { return runs_.size(); }
    // From now on (a reload): running profiles go on.
    void set_max_profiles_per_user(std::size_t n) { options_.max_profiles_per_user = n; }
    void set_max_duration_per_user(std::chrono::seconds d) { options_.max_duration_per_user = d; }
    void set_max_files_per_session(std::size_t n) { options_.files_per_session.most = n; }
    const ProfileServiceOptions& options() const { return options_; }

  private:
    struct Run;
    using Response = VarlinkServer::Response;
    // `more`: the caller reads the started reply and a reply per interval (or batch).
    Response profile(const monitor::protocol::ProfileIn& in, bool more, const Peer& peer);
    Response watch_overflows(const monitor::protocol::WatchOverflowsIn& in, bool more,
                             const Peer& peer);
    // Opens the run's session with `options` and puts it in the runtime, paced by `times`
    // (its intervals sent only when `more`).
    Response start_run(std::unique_ptr<Run> run, monitor::perf::ProfileOptions options,
                       monitor::SampleRunOptions times, bool more, const Peer& peer);
    // Holds the run to what its client may sample (perf_rights): the target, user mode only,
    // no kernel addresses; the refusal when it may not sample what it asked for.
    std::optional<monitor::varlink::Reply> limit_to_rights(
        Run& run, monitor::perf::ProfileOptions& options,
        const monitor::perf::CallerRights& rights) const;
    // Sends what `step` of the run calls for; may end the run.
    void stepped(Run& run, monitor::Result<monitor::SampleRun::Step>& step);
    // Logs the run's end with its `samples`, forgets it, and sends `reply`.
    void end(Run& run, monitor::varlink::Reply reply, std::uint64_t samples);
    // Sends a reply that continues the run; false when that dropped the connection, which
    // ended the run (`run` is gone).
    bool send_or_end(Run& run, monitor::varlink::Reply reply);

    // One of the run's descriptors is readable: it advances.
    void ready(Run& run);

    sd_event* event_;
    VarlinkServer& server_;
    monitor::Runtime& runtime_;
    std::function<void()> schedule_;
    const monitor::perf::EventCatalog* catalog_;
    std::string catalog_error_;
    std::function<std::vector<int>()> online_cpus_;
    ProfileServiceOptions options_;
    monitor::perf::KernelSymbolCache kernel_symbols_;
    std::map<std::uint64_t, std::unique_ptr<Run>> runs_;  // by connection
};

}  // namespace monitord
