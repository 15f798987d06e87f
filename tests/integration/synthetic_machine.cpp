#include "synthetic_machine.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "monitor/loading/cpu_list.hpp"

namespace itest {

using namespace std::chrono_literals;
using test_support::write_file;

SyntheticMachine::SyntheticMachine(int cpus) : cpus_(cpus), online_(fmt::format("0-{}", cpus - 1)) {
    for (const char* f : {"online", "possible", "present"}) {
        write_file(dir_.path() / "sys/devices/system/cpu" / f, online_ + "\n");
    }
    write_file(dir_.path() / "proc/stat", stat());
    stat_fd_.reset(::open((dir_.path() / "proc/stat").c_str(), O_WRONLY | O_CLOEXEC));
    EXPECT_TRUE(stat_fd_) << std::strerror(errno);
    thread_ = std::thread([this] {
        while (!stop_) {
            std::this_thread::sleep_for(100ms);
            elapsed_ += 10;
            // The daemon keeps the file open and reads it again each second: rewritten in
            // place, in one write (the numbers have a fixed width), so that it never reads a
            // file cut short; a shorter text (a CPU gone) leaves the end of the old one, which
            // ftruncate cuts off after.
            const auto text = stat();
            if (::pwrite(stat_fd_.get(), text.data(), text.size(), 0) !=
                    static_cast<ssize_t>(text.size()) ||
                ::ftruncate(stat_fd_.get(), static_cast<off_t>(text.size())) != 0) {
                ADD_FAILURE() << "write the machine's /proc/stat: " << std::strerror(errno);
                return;
            }
        }
    });
}

SyntheticMachine::~SyntheticMachine() {
    stop_ = true;
    thread_.join();
}

void SyntheticMachine::set_online(const std::string& list) {
    std::lock_guard lock(mutex_);
    online_ = list;
    write_file(dir_.path() / "sys/devices/system/cpu/online", list + "\n");
}

std::string SyntheticMachine::stat() const {
    auto line = [](const std::string& label, std::uint64_t busy, std::uint64_t idle) {
        return fmt::format("{} {:012} 0 {:012} {:012} 0 0 0 0 0 0\n", label, busy - busy / 4,
                           busy / 4, idle);
    };
    std::vector<int> online;
    {
        std::lock_guard lock(mutex_);
        auto parsed = monitor::parse_cpu_list(online_);
        if (parsed) online = *parsed;
    }
    std::string cpus;
    std::uint64_t busy_sum = 0;
    for (int c : online) {
        const std::uint64_t busy =
            c == 200 ? elapsed_ : elapsed_ * static_cast<std::uint64_t>(c % 50) / 100;
        busy_sum += busy;
        cpus += line(fmt::format("cpu{}", c), busy, elapsed_ - busy);
    }
    return line("cpu ", busy_sum, online.size() * elapsed_ - busy_sum) + cpus +
           "intr 1234567 0 0\nctxt 7654321\nbtime 1718102754\nprocesses 4242\n";
}

}  // namespace itest
