#include "monitor/loading/probe_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <new>
#include <thread>

#include "monitor/loading/cpu_list.hpp"
#include "monitor/loading/probe_group.hpp"
#include "monitor/loading/probe_set.hpp"
#include "monitor/lock_free_u64.hpp"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX declares it nowhere

namespace monitor {
namespace {

using namespace std::chrono_literals;

constexpr std::uint32_t kMagic = 0x4d4f4e50;  // "MONP"
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kSlots = CPU_SETSIZE;  // a probe pins itself below CPU_SETSIZE
constexpr std::size_t kErrorBytes = 160;
constexpr auto kPublishEvery = 100ms;
constexpr std::size_t kMaxMessage = 16384;  // "online" and a list of every CPU

// The descriptors the helper gets, at these numbers.
constexpr int kSharedFd = 3;
constexpr int kControlFd = 4;

// The environment of the helper: the daemon's, less what systemd addressed to the daemon.
std::vector<char*> helper_environment() {
    std::vector<char*> env;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
        const std::string_view v(*e);
        if (v.starts_with("NOTIFY_SOCKET=") || v.starts_with("LISTEN_") ||
            v.starts_with("WATCHDOG_")) {
            continue;
        }
        env.push_back(*e);
    }
    env.push_back(nullptr);
    return env;
}

std::string wait_status_text(int status) {
    if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
    if (WIFSIGNALED(status)) {
        const char* name = ::sigabbrev_np(WTERMSIG(status));
        return fmt::format("was killed by SIG{}", name != nullptr ? name : "?");
    }
    return "ended";
}

}  // namespace

// Written by the helper alone, read by the parent. Every field is an atomic of at most 32 bits
// or a LockFreeU64, so that neither side ever waits for the other (a helper stopped half-way
// through an update, on a starved CPU, holds nothing up); a slot's sequence, odd while the
// helper writes the slot, makes its fields one reading.
struct ProbeProcess::Shared {
    struct Slot {
        std::atomic<std::uint32_t> seq{0};
        std::atomic<std::uint32_t> present{0};  // the CPU has a probe
        std::atomic<std::int32_t> tid{0};       // its thread; 0 when it has exited
        std::atomic<std::uint32_t> state{0};
        LockFreeU64 generation{0};
        LockFreeU64 count{0};
        LockFreeU64 baseline_bits{0};  // a double (ns per loop); 0 = none
        LockFreeU64 cpu_ns{0};         // the probe's CPU time, as the helper last read it
        LockFreeU64 retired_ns{0};     // CPU time of the CPU's probes that have stopped
        std::array<char, kErrorBytes> error{};
    };
    std::atomic<std::uint32_t> magic{kMagic};
    std::atomic<std::uint32_t> version{kVersion};
    std::atomic<std::uint32_t> applied{0};  // online lists the helper has applied
    std::array<Slot, kSlots> slots;
};

Result<std::unique_ptr<ProbeProcess>> ProbeProcess::start(const std::filesystem::path& program) {
    // The region, made and initialised before the helper maps it.
    UniqueFd memory(::memfd_create("monitord-probes", MFD_CLOEXEC));
    if (!memory) return fail_errno(errno, "create the probe process's shared memory");
    const std::size_t size = sizeof(Shared);
    if (::ftruncate(memory.get(), static_cast<off_t>(size)) != 0) {
        return fail_errno(errno, "size the probe process's shared memory");
    }
    void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, memory.get(), 0);
    if (map == MAP_FAILED) return fail_errno(errno, "map the probe process's shared memory");
    auto* shared = new (map) Shared{};

    int pair[2] = {-1, -1};
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
        const int err = errno;
        ::munmap(map, size);
        return fail_errno(err, "create the probe process's control socket");
    }
    UniqueFd ours(pair[0]);
    UniqueFd theirs(pair[1]);
    // Above the numbers they take in the helper, so that each dup2 makes a new descriptor
    // (which drops close-on-exec).
    UniqueFd memory_high(::fcntl(memory.get(), F_DUPFD_CLOEXEC, 10));
    UniqueFd theirs_high(::fcntl(theirs.get(), F_DUPFD_CLOEXEC, 10));
    if (!memory_high || !theirs_high) {
        const int err = errno;
        ::munmap(map, size);
        return fail_errno(err, "pass descriptors to the probe process");
    }

    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    ::posix_spawn_file_actions_init(&actions);
    ::posix_spawnattr_init(&attr);
    ::posix_spawn_file_actions_adddup2(&actions, memory_high.get(), kSharedFd);
    ::posix_spawn_file_actions_adddup2(&actions, theirs_high.get(), kControlFd);
    // The daemon blocks the signals it reads from a signalfd: the helper gets them back.
    sigset_t none;
    sigset_t defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD}) sigaddset(&defaults, sig);
    ::posix_spawnattr_setsigmask(&attr, &none);
    ::posix_spawnattr_setsigdefault(&attr, &defaults);
    ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    std::string path = program.string();
    std::string flag{kHelperFlag};
    std::string shared_arg = std::to_string(kSharedFd);
    std::string control_arg = std::to_string(kControlFd);
    std::array<char*, 5> argv{path.data(), flag.data(), shared_arg.data(), control_arg.data(),
                              nullptr};
    auto env = helper_environment();
    pid_t pid = 0;
    const int r = ::posix_spawn(&pid, path.c_str(), &actions, &attr, argv.data(), env.data());
    ::posix_spawn_file_actions_destroy(&actions);
    ::posix_spawnattr_destroy(&attr);
    if (r != 0) {
        ::munmap(map, size);
        return fail_errno(r, "start the probe process " + path);
    }
    return std::unique_ptr<ProbeProcess>(new ProbeProcess(pid, std::move(ours), shared, size));
}

ProbeProcess::ProbeProcess(pid_t pid, UniqueFd control, Shared* shared, std::size_t size)
    : pid_(pid), control_(std::move(control)), shared_(shared), shared_size_(size) {}

ProbeProcess::~ProbeProcess() {
    stop();
    ::munmap(shared_, shared_size_);
}

void ProbeProcess::poll_ended() const {
    if (ended_) return;
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) ended_ = wait_status_text(status);
    if (r < 0 && errno == ECHILD) ended_ = "is gone";
}

std::optional<std::string> ProbeProcess::ended() const {
    std::lock_guard lock(mutex_);
    poll_ended();
    return ended_;
}

void ProbeProcess::stop(std::chrono::milliseconds grace) {
    std::lock_guard lock(mutex_);
    if (ended_) return;
    static constexpr std::string_view kStop = "stop";
    (void)::send(control_.get(), kStop.data(), kStop.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    const auto deadline = std::chrono::steady_clock::now() + grace;
    for (poll_ended(); !ended_ && std::chrono::steady_clock::now() < deadline; poll_ended()) {
        std::this_thread::sleep_for(5ms);
    }
    if (ended_) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    ended_ = wait_status_text(status);
}

void ProbeProcess::set_online(const std::vector<int>& cpus) {
    std::string message = "online ";
    for (std::size_t i = 0; i < cpus.size(); ++i) {
        message += (i == 0 ? "" : ",") + std::to_string(cpus[i]);
    }
    if (message.size() > kMaxMessage) return;  // more CPUs than a probe can pin itself to
    if (::send(control_.get(), message.data(), message.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(message.size())) {
        ++sent_;
    }
}

bool ProbeProcess::wait_calibrated(std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (ended()) return true;  // nothing will calibrate any more
        bool pending = shared_->applied.load() != sent_;
        for (const auto& r : read()) {
            pending =
                pending || r.state == ProbeState::Starting || r.state == ProbeState::Calibrating;
        }
        if (!pending) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(5ms);
    }
}

std::optional<std::uint64_t> ProbeProcess::thread_cpu_ns(pid_t tid) const {
    auto it = schedstat_.find(tid);
    if (it == schedstat_.end()) {
        const auto path = fmt::format("/proc/{}/task/{}/schedstat", pid_, tid);
        UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        if (!fd) return std::nullopt;
        it = schedstat_.emplace(tid, std::move(fd)).first;
    }
    // "RUN_NS WAIT_NS SLICES"
    char buf[96];
    const ssize_t n = ::pread(it->second.get(), buf, sizeof buf - 1, 0);
    std::uint64_t ns = 0;
    if (n <= 0 || std::from_chars(buf, buf + n, ns).ec != std::errc{}) {
        schedstat_.erase(it);  // the thread has exited
        return std::nullopt;
    }
    return ns;
}

std::optional<ProbeReading> ProbeProcess::read_slot(std::size_t cpu) const {
    auto& slot = shared_->slots[cpu];  // written to below: see the sequence's second reading
    if (slot.present.load(std::memory_order_relaxed) == 0) return std::nullopt;
    ProbeReading r;
    std::int32_t tid = 0;
    std::array<char, kErrorBytes> error{};
    bool whole = false;
    // A slot the helper is writing is read again; one it never finishes (a helper stopped
    // half-way, on a starved CPU) is read as it is.
    for (int attempt = 0; attempt < 8 && !whole; ++attempt) {
        const std::uint32_t before = slot.seq.load(std::memory_order_acquire);
        r.cpu = static_cast<int>(cpu);
        r.generation = slot.generation.load();
        r.state = static_cast<ProbeState>(std::min<std::uint32_t>(
            slot.state.load(), static_cast<std::uint32_t>(ProbeState::Stopped)));
        r.count = slot.count.load();
        r.cpu_ns = slot.cpu_ns.load();
        const double baseline = std::bit_cast<double>(slot.baseline_bits.load());
        if (baseline > 0) r.baseline = std::chrono::duration<double, std::nano>{baseline};
        tid = slot.tid.load();
        std::memcpy(error.data(), slot.error.data(), error.size());
        // A read-modify-write with release order keeps the reads above before the sequence is
        // read again (a fence would too, but the thread sanitizer does not model fences).
        const std::uint32_t after = slot.seq.fetch_add(0, std::memory_order_acq_rel);
        whole = (before & 1u) == 0 && after == before;
    }
    error.back() = '\0';
    r.error = error.data();
    if (ended_) {
        r.state = ProbeState::Failed;
        r.error = "the probe process " + *ended_;
    } else if (tid > 0) {
        // The thread's CPU time now, not as of the helper's last publishing.
        if (auto ns = thread_cpu_ns(tid)) r.cpu_ns = std::max(r.cpu_ns, *ns);
    }
    // Never less than before for the same probe.
    auto& [generation, last] = last_cpu_ns_[r.cpu];
    if (generation == r.generation) r.cpu_ns = std::max(r.cpu_ns, last);
    generation = r.generation;
    last = r.cpu_ns;
    return r;
}

std::vector<ProbeReading> ProbeProcess::read() const {
    std::lock_guard lock(mutex_);
    poll_ended();
    std::vector<ProbeReading> out;
    for (std::size_t cpu = 0; cpu < kSlots; ++cpu) {
        if (auto r = read_slot(cpu)) out.push_back(std::move(*r));
    }
    // The descriptors of threads that are gone.
    std::erase_if(schedstat_, [&](const auto& e) {
        return std::none_of(shared_->slots.begin(), shared_->slots.end(), [&](const auto& s) {
            return s.present.load(std::memory_order_relaxed) != 0 && s.tid.load() == e.first;
        });
    });
    return out;
}

std::uint64_t ProbeProcess::excluded_cpu_ns(int cpu) const {
    if (cpu < 0 || static_cast<std::size_t>(cpu) >= kSlots) return 0;
    std::lock_guard lock(mutex_);
    const auto index = static_cast<std::size_t>(cpu);
    const auto r = read_slot(index);
    const std::uint64_t retired = shared_->slots[index].retired_ns.load();
    auto& reported = reported_[cpu];
    reported = std::max(reported, retired + (r ? r->cpu_ns : 0));
    return reported;
}

// ---- the helper -----------------------------------------------------------------------------

namespace {

// Copies the probes' readings into their slots, and marks those of CPUs without a probe.
void publish(ProbeProcess::Shared& shared, const ProbeSet& probes, std::vector<bool>& present) {
    std::vector<bool> now(kSlots, false);
    const auto tids = probes.thread_ids();
    for (const auto& r : probes.read()) {
        if (r.cpu < 0 || static_cast<std::size_t>(r.cpu) >= kSlots) continue;
        auto& slot = shared.slots[static_cast<std::size_t>(r.cpu)];
        pid_t tid = 0;
        for (const auto& [cpu, t] : tids) {
            if (cpu == r.cpu) tid = t;
        }
        slot.seq.fetch_add(1, std::memory_order_acq_rel);  // odd: being written
        slot.tid.store(static_cast<std::int32_t>(tid));
        slot.state.store(static_cast<std::uint32_t>(r.state));
        slot.generation.store(r.generation);
        slot.count.store(r.count);
        slot.baseline_bits.store(r.baseline ? std::bit_cast<std::uint64_t>(r.baseline->count())
                                            : 0);
        slot.cpu_ns.store(r.cpu_ns);
        slot.retired_ns.store(probes.retired_cpu_ns(r.cpu));
        std::array<char, kErrorBytes> error{};
        std::memcpy(error.data(), r.error.data(), std::min(r.error.size(), error.size() - 1));
        std::memcpy(slot.error.data(), error.data(), error.size());
        slot.present.store(1);
        slot.seq.fetch_add(1, std::memory_order_acq_rel);
        now[static_cast<std::size_t>(r.cpu)] = true;
    }
    for (std::size_t cpu = 0; cpu < kSlots; ++cpu) {
        if (present[cpu] && !now[cpu]) {
            auto& slot = shared.slots[cpu];
            slot.seq.fetch_add(1, std::memory_order_acq_rel);
            slot.present.store(0);
            slot.tid.store(0);
            slot.retired_ns.store(probes.retired_cpu_ns(static_cast<int>(cpu)));
            slot.seq.fetch_add(1, std::memory_order_acq_rel);
        }
    }
    present.swap(now);
}

}  // namespace

int run_probe_helper(int shared_fd, int control_fd) {
    const pid_t parent = ::getppid();
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) return 0;  // the parent went before the line above
    ::prctl(PR_SET_NAME, "monitord-probes");
    // A session of its own, and so an autogroup of its own, lowered to nice 19: the group
    // weighs 15 against 1024 where no cgroup of the cpu controller holds it (probe_group.hpp).
    ::setsid();
    (void)lower_probe_group("/proc", "/sys/fs/cgroup", true);

    struct stat st {};
    if (::fstat(shared_fd, &st) != 0 ||
        static_cast<std::size_t>(st.st_size) < sizeof(ProbeProcess::Shared)) {
        return 2;
    }
    void* map = ::mmap(nullptr, sizeof(ProbeProcess::Shared), PROT_READ | PROT_WRITE, MAP_SHARED,
                       shared_fd, 0);
    if (map == MAP_FAILED) return 2;
    auto& shared = *static_cast<ProbeProcess::Shared*>(map);
    if (shared.magic.load() != kMagic || shared.version.load() != kVersion) return 2;

    std::unique_ptr<ProbeSet> probes;
    std::vector<bool> present(kSlots, false);
    std::string message(kMaxMessage, '\0');
    auto next_publish = std::chrono::steady_clock::now();
    for (;;) {
        const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
            next_publish - std::chrono::steady_clock::now());
        pollfd p{control_fd, POLLIN, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, wait.count())));
        if (ready < 0 && errno != EINTR) break;
        if (ready > 0) {
            const ssize_t n = ::recv(control_fd, message.data(), message.size(), 0);
            if (n <= 0) break;  // the parent has gone
            const std::string_view m(message.data(), static_cast<std::size_t>(n));
            if (m == "stop") break;
            if (m.starts_with("online ")) {
                auto cpus = parse_cpu_list(m.substr(7));
                if (!cpus) break;
                if (!probes) {
                    probes = std::make_unique<ProbeSet>(ProbeMode::Spin, ProbeThreadAttr{});
                }
                probes->set_online(*cpus);
                publish(shared, *probes, present);
                shared.applied.fetch_add(1);
            }
        }
        if (::getppid() != parent) break;
        if (std::chrono::steady_clock::now() >= next_publish) {
            if (probes) publish(shared, *probes, present);
            next_publish = std::chrono::steady_clock::now() + kPublishEvery;
        }
    }
    probes.reset();
    ::munmap(map, sizeof(ProbeProcess::Shared));
    return 0;
}

}  // namespace monitor
