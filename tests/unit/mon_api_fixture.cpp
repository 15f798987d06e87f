#include "mon_api_fixture.hpp"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

bool operator==(const MON_loading& a, const MON_loading& b) {
    return std::memcmp(&a, &b, sizeof a) == 0;
}

std::ostream& operator<<(std::ostream& os, const MON_loading& l) {
    return os << "{second " << l.avg_prev_sec << "%, minute " << l.avg_prev_min << "% (min "
              << l.min_prev_min << "%, max " << l.max_prev_min << "%)}";
}

namespace mon_api_test {

void ExpectState(State state) {
    MON_loading l{};
    switch (state) {
        case State::Uninitialized:
            EXPECT_MON(MON_get_loading(&l), MON_BADSTATE);
            EXPECT_MON(MON_get_cpu_loading(0, &l), MON_BADSTATE);
            EXPECT_MON(MON_stop(), MON_BADSTATE);
            break;
        case State::Initialized:
            EXPECT_NE(MON_get_loading(&l), MON_BADSTATE) << MON_last_error();
            EXPECT_MON(MON_initialize(), MON_BADSTATE);
            EXPECT_MON(MON_stop(), MON_BADSTATE);
            break;
        case State::Running:
            EXPECT_NE(MON_get_loading(&l), MON_BADSTATE) << MON_last_error();
            EXPECT_MON(MON_initialize(), MON_BADSTATE);
            EXPECT_MON(MON_start(nullptr, nullptr), MON_BADSTATE);
            EXPECT_MON(MON_shutdown(), MON_BADSTATE);
            break;
    }
}

MON_status WaitReady(const std::function<MON_status()>& get, std::chrono::milliseconds within) {
    const auto deadline = Clock::now() + within;
    MON_status s = get();
    while (s == MON_NOTRDY && Clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
        s = get();
    }
    return s;
}

MON_status WaitLoading(MON_loading* l) {
    return WaitReady([l] { return MON_get_loading(l); });
}

testing::AssertionResult Plausible(const MON_loading& l) {
    for (double v : {l.avg_prev_sec, l.avg_prev_min, l.min_prev_min, l.max_prev_min}) {
        if (!(v >= 0.0 && v <= 100.0)) {
            return testing::AssertionFailure() << v << " is not a percentage in " << l;
        }
    }
    if (!(l.min_prev_min <= l.avg_prev_min && l.avg_prev_min <= l.max_prev_min)) {
        return testing::AssertionFailure() << "min <= avg <= max does not hold in " << l;
    }
    if (!(l.min_prev_min <= l.avg_prev_sec && l.avg_prev_sec <= l.max_prev_min)) {
        return testing::AssertionFailure() << "the last second is outside [min, max] in " << l;
    }
    return testing::AssertionSuccess();
}

std::vector<int> OnlineCpus() {
    std::vector<int> cpus;
    std::ifstream in("/sys/devices/system/cpu/online");
    std::string text;
    if (std::getline(in, text)) {
        std::istringstream list(text);
        std::string range;
        while (std::getline(list, range, ',')) {
            const auto dash = range.find('-');
            const int lo = std::stoi(range.substr(0, dash));
            const int hi = dash == std::string::npos ? lo : std::stoi(range.substr(dash + 1));
            for (int c = lo; c <= hi; ++c) cpus.push_back(c);
        }
    } else {
        for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN); ++c) cpus.push_back(int(c));
    }
    return cpus;
}

const std::set<fs::path>& PreexistingThreads() {
    static const std::set<fs::path> tids = [] {
        std::thread([] {}).join();
        std::set<fs::path> s;
        for (const auto& entry : fs::directory_iterator("/proc/self/task")) {
            s.insert(entry.path().filename());
        }
        return s;
    }();
    return tids;
}

std::vector<ThreadSched> OtherThreads() {
    std::vector<ThreadSched> out;
    const fs::path self = std::to_string(::gettid());
    for (const auto& entry : fs::directory_iterator("/proc/self/task")) {
        const fs::path tid = entry.path().filename();
        if (tid == self || PreexistingThreads().contains(tid)) continue;
        std::ifstream comm(entry.path() / "comm");
        std::ifstream stat(entry.path() / "stat");
        ThreadSched t;
        std::string text;
        if (!std::getline(comm, t.name) || !std::getline(stat, text)) continue;  // it exited
        const auto paren = text.rfind(')');
        if (paren == std::string::npos) continue;
        std::istringstream in(text.substr(paren + 1));
        const std::vector<std::string> f{std::istream_iterator<std::string>(in), {}};
        if (f.size() < 39) continue;  // f[0] is field 3, the state
        t.nice = std::stoi(f[16]);
        t.rt_priority = std::stoi(f[37]);
        t.policy = std::stoi(f[38]);
        out.push_back(t);
    }
    return out;
}

bool IsIdleProbe(const ThreadSched& t) {
    return t.name.starts_with("idle-probe/");
}

std::vector<ThreadSched> PollThreads() {
    std::vector<ThreadSched> poll;
    for (const auto& t : OtherThreads()) {
        if (!IsIdleProbe(t)) poll.push_back(t);
    }
    return poll;
}

testing::AssertionResult NoOtherThreadWithin(std::chrono::milliseconds within) {
    const auto deadline = Clock::now() + within;
    for (;;) {
        const auto left = OtherThreads();
        if (left.empty()) return testing::AssertionSuccess();
        if (Clock::now() >= deadline) {
            auto failure = testing::AssertionFailure() << "threads left:";
            for (const auto& t : left) failure << " " << t.name;
            return failure;
        }
        std::this_thread::sleep_for(10ms);
    }
}

test_support::ChildResult RunAsNobody(const std::function<int()>& calls) {
    return test_support::run_as_nobody([&calls](std::string& out) {
        const int code = calls();
        out = MON_last_error();
        (void)MON_stop();
        (void)MON_shutdown();
        return code;
    });
}

}  // namespace mon_api_test
