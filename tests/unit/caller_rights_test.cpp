// What a caller without privilege may measure: the kernel's rules for an unprivileged
// perf_event_open user, from described /proc roots (every perf_event_paranoid and
// kptr_restrict level, processes of other users and undumpable ones), and on this machine's
// real processes.
#include "monitor/perf/caller_rights.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "test_support.hpp"

namespace {

using monitor::Status;
using monitor::perf::CallerRights;
using monitor::perf::CountTarget;
using monitor::perf::PerfSysctls;
using monitor::perf::PinnedProcess;
using monitor::perf::TargetKind;
using test_support::ScratchDir;
using test_support::write_file;

constexpr uid_t kUser = 1000;
constexpr gid_t kGroup = 1000;

std::string status_text(unsigned uid, unsigned euid, unsigned suid, unsigned gid, unsigned egid,
                        unsigned sgid) {
    return "Name:\tapp\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t42\nPid:\t42\n"
           "Uid:\t" +
           std::to_string(uid) + "\t" + std::to_string(euid) + "\t" + std::to_string(suid) + "\t" +
           std::to_string(euid) + "\nGid:\t" + std::to_string(gid) + "\t" + std::to_string(egid) +
           "\t" + std::to_string(sgid) + "\t" + std::to_string(egid) + "\nGroups:\t27 1000\n";
}

// A described /proc with process `pid` of the given ids, its directory owned by `owner` (root
// when the process is not dumpable).
void add_process(const ScratchDir& proc, int pid, const std::string& status, uid_t owner) {
    const auto dir = proc.path() / std::to_string(pid);
    write_file(dir / "status", status);
    ASSERT_EQ(::chown(dir.c_str(), owner, 0), 0);
}

CountTarget process(pid_t pid) {
    return CountTarget{.kind = TargetKind::Process, .pid = pid};
}

TEST(CallerRights, SysctlsAreReadAndAMissingFileGrantsNothing) {
    ScratchDir proc;
    write_file(proc / "sys/kernel/perf_event_paranoid", "-1\n");
    write_file(proc / "sys/kernel/kptr_restrict", "0\n");
    auto s = monitor::perf::read_perf_sysctls(proc.path());
    EXPECT_EQ(s.paranoid, -1);
    EXPECT_EQ(s.kptr_restrict, 0);

    ScratchDir empty;
    s = monitor::perf::read_perf_sysctls(empty.path());
    EXPECT_EQ(s.paranoid, 3);
    EXPECT_EQ(s.kptr_restrict, 2);
    write_file(empty / "sys/kernel/perf_event_paranoid", "two\n");
    EXPECT_EQ(monitor::perf::read_perf_sysctls(empty.path()).paranoid, 3);
}

TEST(CallerRights, EachParanoidLevelAsTheKernelAppliesIt) {
    struct Case {
        int paranoid;
        bool cpu_wide, kernel;
    };
    for (const Case c : {Case{-1, true, true}, Case{0, true, true}, Case{1, false, true},
                         Case{2, false, false}, Case{3, false, false}, Case{4, false, false}}) {
        SCOPED_TRACE(c.paranoid);
        const auto r = CallerRights::unprivileged(kUser, kGroup, {.paranoid = c.paranoid});
        EXPECT_EQ(r.cpu_wide(), c.cpu_wide);
        EXPECT_EQ(r.kernel(), c.kernel);
        for (auto kind :
             {TargetKind::AllCpus, TargetKind::EachCpu, TargetKind::OneCpu, TargetKind::Cgroup}) {
            auto ok = r.may_measure(CountTarget{.kind = kind, .cpu = 0}, "count");
            EXPECT_EQ(ok.has_value(), c.cpu_wide);
            if (!ok) {
                EXPECT_EQ(ok.error().status, Status::Perm);
                EXPECT_NE(ok.error().message.find("kernel.perf_event_paranoid 0 or below"),
                          std::string::npos)
                    << ok.error().message;
                EXPECT_NE(ok.error().message.find("it is " + std::to_string(c.paranoid)),
                          std::string::npos)
                    << ok.error().message;
            }
        }
        auto kernel = r.may_measure_kernel("cycles", "cycles:u");
        EXPECT_EQ(kernel.has_value(), c.kernel);
        if (!kernel) {
            EXPECT_EQ(kernel.error().status, Status::Perm);
            EXPECT_NE(kernel.error().message.find("cycles:u"), std::string::npos);
        }
    }
}

TEST(CallerRights, KernelAddressesAsKallsymsShowsThem) {
    struct Case {
        int paranoid, kptr_restrict;
        bool shown;
    };
    for (const Case c : {Case{-1, 0, true}, Case{1, 0, true}, Case{2, 0, false}, Case{1, 1, false},
                         Case{0, 2, false}, Case{-1, 1, false}}) {
        SCOPED_TRACE(testing::Message() << c.paranoid << " " << c.kptr_restrict);
        const auto r = CallerRights::unprivileged(
            kUser, kGroup, {.paranoid = c.paranoid, .kptr_restrict = c.kptr_restrict});
        EXPECT_EQ(r.kernel_addresses(), c.shown);
    }
    const auto root = CallerRights::everything();
    EXPECT_TRUE(root.kernel_addresses());
    EXPECT_TRUE(root.kernel());
    EXPECT_TRUE(root.cpu_wide());
}

TEST(CallerRights, AProcessOnlyWhenTheCallerCouldPtraceIt) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give the described /proc's owners";
    ScratchDir proc;
    add_process(proc, 42, status_text(kUser, kUser, kUser, kGroup, kGroup, kGroup), kUser);
    // Another user's; one that changed its effective or saved user (setuid), or its group
    // (setgid); one that is not dumpable (its /proc directory then belongs to root).
    add_process(proc, 43, status_text(0, 0, 0, 0, 0, 0), 0);
    add_process(proc, 44, status_text(kUser, 0, 0, kGroup, kGroup, kGroup), 0);
    add_process(proc, 45, status_text(kUser, kUser, 0, kGroup, kGroup, kGroup), kUser);
    add_process(proc, 46, status_text(kUser, kUser, kUser, kGroup, 42, kGroup), kUser);
    add_process(proc, 47, status_text(kUser, kUser, kUser, kGroup, kGroup, kGroup), 0);
    // At any paranoid level: the ptrace rule is the same.
    for (int paranoid : {-1, 2, 3}) {
        SCOPED_TRACE(paranoid);
        const auto r =
            CallerRights::unprivileged(kUser, kGroup, {.paranoid = paranoid}, proc.path());
        EXPECT_TRUE(r.may_measure(process(42), "count").has_value());
        EXPECT_TRUE(
            r.may_measure(CountTarget{.kind = TargetKind::Thread, .pid = 42}, "count").has_value());
        for (pid_t pid : {43, 44, 45, 46, 47}) {
            SCOPED_TRACE(pid);
            auto ok = r.may_measure(process(pid), "profile");
            ASSERT_FALSE(ok.has_value());
            EXPECT_EQ(ok.error().status, Status::Perm);
            EXPECT_NE(ok.error().message.find("process " + std::to_string(pid)), std::string::npos);
            EXPECT_NE(ok.error().message.find(pid == 47 ? "not dumpable" : "ptrace"),
                      std::string::npos)
                << ok.error().message;
        }
        auto gone = r.may_measure(process(99), "count");
        ASSERT_FALSE(gone.has_value());
        EXPECT_EQ(gone.error().status, Status::NoDev);
        // Several processes (perf stat -p 42,43): each of them is the caller's, or the one
        // that is not is named.
        CountTarget several = process(42);
        several.pids = {42, 45};
        auto mixed = r.may_measure(several, "count");
        ASSERT_FALSE(mixed.has_value());
        EXPECT_EQ(mixed.error().status, Status::Perm);
        EXPECT_NE(mixed.error().message.find("process 45 "), std::string::npos)
            << mixed.error().message;
        several.pids = {42, 99};
        EXPECT_EQ(r.may_measure(several, "count").error().status, Status::NoDev);
        several.pids = {42};
        EXPECT_TRUE(r.may_measure(several, "count").has_value());
    }
    // A status without its ids is the kernel's fault, said so.
    add_process(proc, 48, "Name:\tapp\n", kUser);
    auto bad = CallerRights::unprivileged(kUser, kGroup, {}, proc.path())
                   .may_measure(process(48), "count");
    ASSERT_FALSE(bad.has_value());
    EXPECT_EQ(bad.error().status, Status::BadData);
    // Privilege measures anything, without looking.
    EXPECT_TRUE(CallerRights::everything().may_measure(process(99), "count").has_value());
}

TEST(CallerRights, ThisMachinesProcesses) {
    // The caller's own process passes; init (root's, pid 1) does not for another user.
    const auto self = CallerRights::unprivileged(::geteuid(), ::getegid(), {});
    EXPECT_TRUE(self.may_measure(process(::getpid()), "count").has_value());
    const auto other = CallerRights::unprivileged(::geteuid() + 1, ::getegid(), {});
    auto refused = other.may_measure(process(::getpid()), "count");
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().status, Status::Perm);
}

// A pinned process tells when it has exited, whatever has its pid since.
TEST(PinnedProcess, SaysWhenItsProcessExited) {
    auto self = PinnedProcess::pin(::getpid());
    ASSERT_TRUE(self) << self.error().message;
    EXPECT_FALSE(self->exited());

    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::pause();
        ::_exit(0);
    }
    auto pinned = PinnedProcess::pin(child);
    ASSERT_TRUE(pinned) << pinned.error().message;
    EXPECT_FALSE(pinned->exited());
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);  // reaped: the pid is free for another
    EXPECT_TRUE(pinned->exited());

    auto none = PinnedProcess::pin(child);
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error().status, Status::NoDev);
    EXPECT_EQ(none.error().message, "process " + std::to_string(child) +
                                        ": no such process; name a running process (ps -e lists "
                                        "them)");
}

}  // namespace
