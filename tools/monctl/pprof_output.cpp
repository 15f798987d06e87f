#include "pprof_output.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/perf_event.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

#include "profile.pb.h"

namespace monctl {

using monitor::fail;
using monitor::Status;
namespace pb = perftools::profiles;

namespace {

// The profile.proto message being built: its strings, functions and locations each kept once.
class Builder {
  public:
    Builder() {
        string_of("");  // pprof's rule: string 0 is the empty one
    }

    std::int64_t string_of(const std::string& s) {
        auto [it, added] = strings_.try_emplace(s, static_cast<std::int64_t>(strings_.size()));
        if (added) profile_.add_string_table(s);
        return it->second;
    }
    void sample_type(const std::string& type, const std::string& unit) {
        auto* t = profile_.add_sample_type();
        t->set_type(string_of(type));
        t->set_unit(string_of(unit));
    }
    // The location of a function (its one line), by its name and file.
    std::uint64_t location_of(const std::string& name, const std::string& file) {
        const auto key = std::make_pair(name, file);
        if (auto it = locations_.find(key); it != locations_.end()) return it->second;
        auto* f = profile_.add_function();
        const auto function_id = static_cast<std::uint64_t>(profile_.function_size());
        f->set_id(function_id);
        f->set_name(string_of(name));
        f->set_system_name(string_of(name));
        f->set_filename(string_of(file));
        auto* l = profile_.add_location();
        const auto location_id = static_cast<std::uint64_t>(profile_.location_size());
        l->set_id(location_id);
        l->add_line()->set_function_id(function_id);
        locations_.emplace(key, location_id);
        return location_id;
    }
    pb::Profile& profile() { return profile_; }

  private:
    pb::Profile profile_;
    std::map<std::string, std::int64_t> strings_;
    std::map<std::pair<std::string, std::string>, std::uint64_t> locations_;
};

// A line of the table of functions as a function and its file: "burn (/usr/bin/app)" is
// {"burn", "/usr/bin/app"}; "[no symbol] (/usr/lib/libc.so.6)" {"[libc.so.6]", its path}, as
// Profile::label names the frame; "[idle]" and an unnamed kernel's "[kernel.kallsyms]" have
// no file.
std::pair<std::string, std::string> function_and_file(std::string_view line) {
    const auto open = line.rfind(" (");
    if (open == std::string_view::npos || !line.ends_with(')')) return {std::string{line}, {}};
    std::string name{line.substr(0, open)};
    std::string file{line.substr(open + 2, line.size() - open - 3)};
    if (name == "[no symbol]") {
        name = file.starts_with('/') ? "[" + file.substr(file.rfind('/') + 1) + "]" : file;
    }
    return {std::move(name), std::move(file)};
}

// The frames of a folded stack ("app;main;burn"), leaf first.
std::vector<std::string> frames_leaf_first(std::string_view stack) {
    std::vector<std::string> frames;
    for (std::size_t from = 0;;) {
        const auto semicolon = stack.find(';', from);
        frames.emplace_back(stack.substr(from, semicolon - from));
        if (semicolon == std::string_view::npos) break;
        from = semicolon + 1;
    }
    return {frames.rbegin(), frames.rend()};
}

// `data` as a gzip file (RFC 1952), as pprof reads profiles.
std::string gzip(const std::string& data) {
    z_stream z{};
    // 15 + 16: the largest window, in a gzip header and trailer rather than zlib's.
    if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        return {};
    }
    std::string out(deflateBound(&z, static_cast<uLong>(data.size())), '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    const int done = deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    return done == Z_STREAM_END ? out : std::string{};
}

monitor::Error cannot_write(const std::string& path, int err, Status status) {
    return {status,
            fmt::format("--pprof {}: cannot write it: {}", path, monitor::errno_message(err))};
}

}  // namespace

PprofContext pprof_context(const monitor::perf::EventSpec& event,
                           const monitor::protocol::ProfileRequest& request,
                           std::chrono::system_clock::time_point start) {
    PprofContext c{.start = start};
    c.clock = event.type == PERF_TYPE_SOFTWARE &&
              (event.config == PERF_COUNT_SW_CPU_CLOCK || event.config == PERF_COUNT_SW_TASK_CLOCK);
    if (request.period) {
        c.period = c.clock ? std::max(*request.period, kMinClockPeriodNs) : *request.period;
    } else if (c.clock) {
        const auto frequency = request.frequency.value_or(
            static_cast<std::int64_t>(monitor::perf::kDefaultProfileFrequency));
        if (frequency > 0) c.period = std::max(1'000'000'000 / frequency, kMinClockPeriodNs);
    }
    return c;
}

std::string pprof_bytes(const monitor::protocol::ProfileMessage& m, const PprofContext& c) {
    Builder b;
    b.sample_type("samples", "count");
    const bool cpu_time = c.clock && c.period;
    if (cpu_time) b.sample_type("cpu", "nanoseconds");
    auto& p = b.profile();
    auto add_sample = [&](std::uint64_t samples, const std::vector<std::uint64_t>& locations) {
        auto* s = p.add_sample();
        for (auto id : locations) s->add_location_id(id);
        s->add_value(static_cast<std::int64_t>(samples));
        if (cpu_time) s->add_value(static_cast<std::int64_t>(samples) * *c.period);
    };
    const auto& r = m.report;
    if (!r.stacks.empty()) {
        // Each frame is a function of that name: a stack's frames name no file.
        for (const auto& stack : r.stacks) {
            std::vector<std::uint64_t> locations;
            for (const auto& frame : frames_leaf_first(stack.name)) {
                locations.push_back(b.location_of(frame, {}));
            }
            add_sample(stack.samples, locations);
        }
    } else {
        for (const auto& line : r.functions) {
            const auto [name, file] = function_and_file(line.name);
            add_sample(line.samples, {b.location_of(name, file)});
        }
    }
    p.set_time_nanos(
        std::chrono::duration_cast<std::chrono::nanoseconds>(c.start.time_since_epoch()).count());
    p.set_duration_nanos(std::llround(m.elapsed * 1e9));
    if (c.period) {
        auto* t = p.mutable_period_type();
        t->set_type(b.string_of(c.clock ? "cpu" : m.event));
        t->set_unit(b.string_of(c.clock ? "nanoseconds" : "count"));
        p.set_period(*c.period);
    }
    // What was sampled, as pprof -comments shows it.
    p.add_comment(b.string_of(fmt::format("monctl perf profile: {} of {}", m.event, m.target)));
    if (!m.ended.empty()) p.add_comment(b.string_of(m.ended));
    return gzip(p.SerializeAsString());
}

monitor::Result<PprofFile> PprofFile::open(const std::string& path) {
    monitor::UniqueFd fd{::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)};
    if (!fd) return std::unexpected(cannot_write(path, errno, Status::BadArg));
    return PprofFile{path, std::move(fd)};
}

monitor::Result<void> PprofFile::write(const monitor::protocol::ProfileMessage& m,
                                       const PprofContext& c) {
    const std::string bytes = pprof_bytes(m, c);
    if (bytes.empty()) {
        return fail(Status::AllocMem, fmt::format("--pprof {}: zlib could not compress the "
                                                  "profile",
                                                  path_));
    }
    for (std::size_t at = 0; at < bytes.size();) {
        const ssize_t n = ::write(fd_.get(), bytes.data() + at, bytes.size() - at);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return std::unexpected(cannot_write(path_, errno, Status::IoErr));
        at += static_cast<std::size_t>(n);
    }
    // A file system that writes back late (NFS) says its error at the close.
    if (::close(fd_.release()) != 0) {
        return std::unexpected(cannot_write(path_, errno, Status::IoErr));
    }
    return {};
}

}  // namespace monctl
