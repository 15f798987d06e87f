#include "monitor/protocol/profile_messages.hpp"

#include <fmt/format.h>

#include <charconv>
#include <limits>
#include <stdexcept>

namespace monitor::protocol {

using nlohmann::json;

namespace {

// A bucket as small as pfm's (4 bytes) over a whole 4 MiB of code; wider ranges take wider
// buckets.
constexpr std::size_t kMaxBuckets = std::size_t{1} << 20;

std::string hex(std::uint64_t a) {
    return fmt::format("{:#x}", a);
}

// "0x7f00", "4096"; nullopt for anything else.
std::optional<std::uint64_t> parse_address(std::string_view s) {
    int base = 10;
    if (s.starts_with("0x") || s.starts_with("0X")) {
        s.remove_prefix(2);
        base = 16;
    }
    std::uint64_t v = 0;
    if (s.empty()) return std::nullopt;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
    if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
    return v;
}

std::uint64_t address_from_json(const json& j) {
    if (j.is_number_unsigned()) return j.get<std::uint64_t>();
    return parse_address(j.get<std::string>()).value_or(0);
}

json to_json(const perf::ProfileLine& l) {
    return json{{"name", l.name}, {"samples", l.samples}, {"percent", l.percent}};
}

std::vector<perf::ProfileLine> lines_from_json(const json& j) {
    std::vector<perf::ProfileLine> out;
    for (const auto& l : j) {
        out.push_back({l.at("name").get<std::string>(), l.at("samples").get<std::uint64_t>(),
                       l.at("percent").get<double>()});
    }
    return out;
}

template <typename T>
std::optional<T> optional_of(const json& j, const char* key) {
    if (auto it = j.find(key); it != j.end() && !it->is_null()) return it->get<T>();
    return std::nullopt;
}

// "mode", both when absent; std::invalid_argument for a mode the interface does not name (a
// call checked against the interface file has none).
SampledModes sampled_modes_from_json(const json& j) {
    const auto mode = optional_of<std::string>(j, "mode").value_or("both");
    const auto named = value_named(kSampledModeNames, mode);
    if (!named) {
        throw std::invalid_argument("mode '" + mode + "': sample " + names_list(kSampledModeNames));
    }
    return *named;
}

json lines_json(const std::vector<perf::ProfileLine>& lines) {
    json out = json::array();
    for (const auto& l : lines) out.push_back(to_json(l));
    return out;
}

// The counts that a whole report and each CPU's have: samples, lost, throttled, modes,
// functions, objects.
void put_counts(json& j, const perf::ProfileReport& r) {
    j["samples"] = r.samples;
    j["lost"] = r.lost;
    j["throttled"] = r.throttled;
    if (r.unnamed > 0) j["unnamed"] = r.unnamed;
    j["modes"] = json{{"idle", r.modes.idle},
                      {"user", r.modes.user},
                      {"kernel", r.modes.kernel},
                      {"other", r.modes.other}};
    j["functions"] = lines_json(r.functions);
    j["objects"] = lines_json(r.objects);
}

void get_counts(const json& j, perf::ProfileReport& r) {
    r.samples = j.at("samples").get<std::uint64_t>();
    r.lost = j.at("lost").get<std::uint64_t>();
    r.throttled = j.at("throttled").get<std::uint64_t>();
    r.unnamed = j.value("unnamed", std::uint64_t{0});
    const auto& modes = j.at("modes");
    r.modes = {.idle = modes.at("idle").get<std::uint64_t>(),
               .user = modes.at("user").get<std::uint64_t>(),
               .kernel = modes.at("kernel").get<std::uint64_t>(),
               .other = modes.at("other").get<std::uint64_t>()};
    r.functions = lines_from_json(j.at("functions"));
    r.objects = lines_from_json(j.at("objects"));
}

}  // namespace

Result<AddressRange> parse_address_range(std::string_view text) {
    const auto bad = [&] {
        return fail(Status::BadArg,
                    fmt::format("address range '{}': give START-END or START-END/BUCKET, as in "
                                "0x401000-0x402000/4 (hexadecimal with 0x, or decimal)",
                                text));
    };
    AddressRange r;
    std::string_view rest = text;
    if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
        auto bucket = parse_address(rest.substr(slash + 1));
        if (!bucket) return bad();
        r.bucket = *bucket;
        rest = rest.substr(0, slash);
    }
    const auto dash = rest.find('-');
    if (dash == std::string_view::npos) return bad();
    auto start = parse_address(rest.substr(0, dash));
    auto end = parse_address(rest.substr(dash + 1));
    if (!start || !end) return bad();
    r.start = *start;
    r.end = *end;
    return r;
}

Result<void> parse_call_graph(std::string_view text, ProfileRequest& r) {
    const auto comma = text.find(',');
    const auto named = value_named(kCallGraphNames, text.substr(0, comma));
    std::int64_t size = 0;
    if (named && comma != std::string_view::npos) {
        const auto digits = text.substr(comma + 1);
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size);
        if (*named != perf::CallGraph::Dwarf || ec != std::errc{} ||
            end != digits.data() + digits.size()) {
            size = -1;
        }
    }
    if (!named || size < 0) {
        return fail(Status::BadArg,
                    fmt::format("call graph '{}': give fp (frame pointers) or dwarf[,SIZE] "
                                "(SIZE: the bytes of user stack copied per sample, a multiple "
                                "of 8 up to {}, default {})",
                                text, perf::kMaxUserStack, perf::kDefaultUserStack));
    }
    r.callchain = true;
    r.call_graph = *named;
    if (comma != std::string_view::npos) r.stack_size = size;
    return {};
}

Result<void> check_range(const AddressRange& r) {
    auto n = perf::histogram_buckets(r.start, r.end, r.bucket, kMaxBuckets);
    if (!n) return std::unexpected(n.error());
    return {};
}

json to_json(const ProfileRequest& r) {
    json j(json::value_t::object);
    if (!r.event.empty()) j["event"] = r.event;
    if (r.period) j["period"] = *r.period;
    if (r.frequency) j["frequency"] = *r.frequency;
    j["target"] = to_json(r.target);
    j["mode"] = name_of(kSampledModeNames, r.mode);
    if (r.top) j["top"] = *r.top;
    if (r.range) {
        j["range"] = json{{"start", hex(r.range->start)},
                          {"end", hex(r.range->end)},
                          {"bucket", r.range->bucket}};
    }
    if (r.start_at_exec) j["start_at_exec"] = true;
    if (r.callchain) j["callchain"] = true;
    if (r.call_graph) j["call_graph"] = name_of(kCallGraphNames, *r.call_graph);
    if (r.stack_size) j["stack_size"] = *r.stack_size;
    return j;
}

ProfileRequest profile_request_from_json(const json& j) {
    ProfileRequest r;
    r.event = optional_of<std::string>(j, "event").value_or("");
    r.period = optional_of<std::int64_t>(j, "period");
    r.frequency = optional_of<std::int64_t>(j, "frequency");
    if (auto it = j.find("target"); it != j.end() && !it->is_null()) {
        r.target = target_request_from_json(*it);
    }
    r.mode = sampled_modes_from_json(j);
    r.top = optional_of<int>(j, "top");
    if (auto it = j.find("range"); it != j.end() && !it->is_null()) {
        AddressRange range{.start = address_from_json(it->at("start")),
                           .end = address_from_json(it->at("end"))};
        if (auto b = optional_of<std::int64_t>(*it, "bucket")) {
            range.bucket = *b < 0 ? 0 : static_cast<std::uint64_t>(*b);
        }
        r.range = range;
    }
    r.start_at_exec = optional_of<bool>(j, "start_at_exec").value_or(false);
    r.callchain = optional_of<bool>(j, "callchain").value_or(false);
    if (auto graph = optional_of<std::string>(j, "call_graph")) {
        const auto named = value_named(kCallGraphNames, *graph);
        if (!named) {
            throw std::invalid_argument("call_graph '" + *graph + "': make call chains by " +
                                        names_list(kCallGraphNames));
        }
        r.call_graph = *named;
    }
    r.stack_size = optional_of<std::int64_t>(j, "stack_size");
    return r;
}

Result<perf::ProfileOptions> profile_options(const ProfileRequest& r,
                                             const std::filesystem::path& cgroup_root) {
    perf::ProfileOptions o;
    if (!r.event.empty()) o.event = r.event;
    if (r.period && r.frequency) {
        return fail(Status::BadArg, fmt::format("{}: sample every {} events or {} times a second, "
                                                "not both",
                                                o.event, *r.period, *r.frequency));
    }
    if (r.period) {
        if (*r.period < 1) {
            return fail(Status::BadArg, fmt::format("{}: a period of {} events: give 1 or more",
                                                    o.event, *r.period));
        }
        o.rate = {.period = static_cast<std::uint64_t>(*r.period)};
    } else if (r.frequency) {
        if (*r.frequency < 1) {
            return fail(Status::BadArg, fmt::format("{}: a frequency of {} a second: give 1 or "
                                                    "more",
                                                    o.event, *r.frequency));
        }
        o.rate = {.frequency = static_cast<std::uint64_t>(*r.frequency)};
    }
    o.user = r.mode != SampledModes::Kernel;
    o.kernel = r.mode != SampledModes::User;
    if (r.top && *r.top < 0) {
        return fail(Status::BadArg, fmt::format("top {}: give 0 (all) or more", *r.top));
    }
    if (r.range) {
        if (auto ok = check_range(*r.range); !ok) return std::unexpected(ok.error());
        o.kept_addresses = {.start = r.range->start, .end = r.range->end};
    }
    auto target = count_target(r.target, cgroup_root);
    if (!target) return std::unexpected(target.error());
    o.target = std::move(*target);
    if (o.target.pids.size() > 1) {
        // The daemon ends a process's profile when the process exits, and watches one.
        return fail(Status::BadArg,
                    fmt::format("a profile samples one process, and this target is {}: sample "
                                "them one at a time, or their cgroup or unit; several processes "
                                "can be counted (monctl perf stat -p PID,PID)",
                                perf::processes_text(o.target.pids)));
    }
    if (r.start_at_exec) {
        if (o.target.kind != perf::TargetKind::Process) {
            return fail(Status::BadArg, fmt::format("start_at_exec is for a process target "
                                                    "waiting to exec a command, not {}",
                                                    target_text(r.target)));
        }
        o.target.enable_on_exec = true;
    }
    o.callchain = r.callchain || r.call_graph.has_value();
    o.call_graph = r.call_graph.value_or(perf::CallGraph::FramePointers);
    if (r.stack_size) {
        if (o.call_graph != perf::CallGraph::Dwarf) {
            return fail(Status::BadArg, fmt::format("stack_size {}: the stack is copied for "
                                                    "call_graph dwarf only; ask it too, or leave "
                                                    "stack_size out",
                                                    *r.stack_size));
        }
        if (*r.stack_size < 8 || *r.stack_size > perf::kMaxUserStack || *r.stack_size % 8 != 0) {
            return fail(Status::BadArg,
                        fmt::format("stack_size {}: give a multiple of 8 bytes from 8 to {} "
                                    "(default {})",
                                    *r.stack_size, perf::kMaxUserStack, perf::kDefaultUserStack));
        }
        o.user_stack = static_cast<std::uint32_t>(*r.stack_size);
    }
    if (o.callchain && o.call_graph == perf::CallGraph::Dwarf) {
        if (auto why = perf::dwarf_unwinding_refusal(); !why.empty()) {
            return fail(Status::BadArg, fmt::format("call_graph dwarf: {}; call_graph fp (frame "
                                                    "pointers) makes call chains here",
                                                    why));
        }
    }
    o.cgroup_root = cgroup_root.string();
    return o;
}

ProfileMessage make_profile_message(const perf::Profile& profile, std::size_t top,
                                    const std::optional<AddressRange>& range) {
    ProfileMessage m;
    m.report = profile.report(top);
    if (range) {
        if (auto h = profile.histogram(range->start, range->end, range->bucket, kMaxBuckets)) {
            HistogramMessage hm{.range = *range, .samples = h->samples};
            for (std::size_t i = 0; i < h->buckets.size(); ++i) {
                if (h->buckets[i] != 0) {
                    hm.buckets.emplace_back(range->start + i * range->bucket, h->buckets[i]);
                }
            }
            m.histogram = std::move(hm);
        }
    }
    return m;
}

json to_json(const ProfileMessage& m) {
    const auto& r = m.report;
    json j(json::value_t::object);
    j["event"] = m.event;
    j["target"] = m.target;
    j["elapsed"] = m.elapsed;
    if (m.interval) j["interval"] = *m.interval;
    j["final"] = m.final;
    if (m.threads) j["threads"] = *m.threads;
    if (!m.ended.empty()) j["ended"] = m.ended;
    if (!m.kernel_symbols.empty()) j["kernel_symbols"] = m.kernel_symbols;
    put_counts(j, r);
    if (!r.stacks.empty()) j["stacks"] = lines_json(r.stacks);
    if (!r.cpus.empty()) {
        json cpus = json::array();
        for (const auto& c : r.cpus) {
            json one{{"cpu", c.cpu}};
            put_counts(one, c.report);
            cpus.push_back(std::move(one));
        }
        j["cpus"] = std::move(cpus);
    }
    if (m.histogram) {
        const auto& h = *m.histogram;
        json buckets = json::array();
        for (const auto& [address, n] : h.buckets) {
            buckets.push_back(json{{"address", hex(address)}, {"samples", n}});
        }
        j["histogram"] = json{{"start", hex(h.range.start)},
                              {"end", hex(h.range.end)},
                              {"bucket", h.range.bucket},
                              {"samples", h.samples},
                              {"buckets", std::move(buckets)}};
    }
    return j;
}

ProfileMessage profile_message_from_json(const json& j) {
    ProfileMessage m;
    m.event = j.at("event").get<std::string>();
    m.target = j.at("target").get<std::string>();
    m.elapsed = j.at("elapsed").get<double>();
    m.interval = optional_of<std::int64_t>(j, "interval");
    m.final = j.at("final").get<bool>();
    m.threads = optional_of<int>(j, "threads");
    m.ended = optional_of<std::string>(j, "ended").value_or("");
    m.kernel_symbols = optional_of<std::string>(j, "kernel_symbols").value_or("");
    auto& r = m.report;
    get_counts(j, r);
    if (auto it = j.find("stacks"); it != j.end() && !it->is_null()) {
        r.stacks = lines_from_json(*it);
    }
    if (auto it = j.find("cpus"); it != j.end() && !it->is_null()) {
        for (const auto& c : *it) {
            perf::CpuProfileReport one{.cpu = c.at("cpu").get<int>()};
            get_counts(c, one.report);
            r.cpus.push_back(std::move(one));
        }
    }
    if (auto it = j.find("histogram"); it != j.end() && !it->is_null()) {
        HistogramMessage h;
        h.range = {.start = address_from_json(it->at("start")),
                   .end = address_from_json(it->at("end")),
                   .bucket = it->at("bucket").get<std::uint64_t>()};
        h.samples = it->at("samples").get<std::uint64_t>();
        for (const auto& b : it->at("buckets")) {
            h.buckets.emplace_back(address_from_json(b.at("address")),
                                   b.at("samples").get<std::uint64_t>());
        }
        m.histogram = std::move(h);
    }
    return m;
}

json to_json(const OverflowRequest& r) {
    return json{{"event", r.event},
                {"period", r.period},
                {"target", to_json(r.target)},
                {"mode", name_of(kSampledModeNames, r.mode)}};
}

OverflowRequest overflow_request_from_json(const json& j) {
    OverflowRequest r;
    r.event = j.at("event").get<std::string>();
    r.period = j.at("period").get<std::int64_t>();
    if (auto it = j.find("target"); it != j.end() && !it->is_null()) {
        r.target = target_request_from_json(*it);
    }
    r.mode = sampled_modes_from_json(j);
    return r;
}

Result<perf::ProfileOptions> overflow_options(const OverflowRequest& r,
                                              const std::filesystem::path& cgroup_root) {
    if (r.event.empty()) {
        return fail(Status::BadArg, "overflows of which event? Name one (monctl perf list)");
    }
    ProfileRequest p{.event = r.event, .period = r.period, .target = r.target, .mode = r.mode};
    auto o = profile_options(p, cgroup_root);
    if (!o) return o;
    o->profile = false;
    return o;
}

json to_json(const OverflowBatch& b) {
    json j{{"event", b.event},
           {"period", b.period},
           {"overflows", b.overflows},
           {"total", b.total},
           {"count", b.total * static_cast<std::uint64_t>(b.period)},
           {"elapsed", b.elapsed},
           {"final", b.final},
           {"lost", b.lost},
           {"throttled", b.throttled}};
    if (!b.ended.empty()) j["ended"] = b.ended;
    if (b.last) {
        j["last"] = json{{"address", hex(b.last->ip)},
                         {"pid", b.last->pid},
                         {"tid", b.last->tid},
                         {"cpu", b.last->cpu},
                         {"time_ns", b.last->time_ns},
                         {"mode", b.last->mode == perf::SampleMode::User     ? "user"
                                  : b.last->mode == perf::SampleMode::Kernel ? "kernel"
                                                                             : "other"}};
    }
    return j;
}

OverflowBatch overflow_batch_from_json(const json& j) {
    OverflowBatch b;
    b.event = j.at("event").get<std::string>();
    b.period = j.at("period").get<std::int64_t>();
    b.overflows = j.at("overflows").get<std::uint64_t>();
    b.total = j.at("total").get<std::uint64_t>();
    b.elapsed = j.at("elapsed").get<double>();
    b.final = j.at("final").get<bool>();
    b.ended = optional_of<std::string>(j, "ended").value_or("");
    b.lost = j.at("lost").get<std::uint64_t>();
    b.throttled = j.at("throttled").get<std::uint64_t>();
    if (auto it = j.find("last"); it != j.end() && !it->is_null()) {
        perf::Sample s;
        s.ip = address_from_json(it->at("address"));
        s.pid = it->at("pid").get<pid_t>();
        s.tid = it->at("tid").get<pid_t>();
        s.cpu = it->at("cpu").get<int>();
        s.time_ns = it->at("time_ns").get<std::uint64_t>();
        const auto mode = it->at("mode").get<std::string>();
        s.mode = mode == "user"     ? perf::SampleMode::User
                 : mode == "kernel" ? perf::SampleMode::Kernel
                                    : perf::SampleMode::Unknown;
        b.last = s;
    }
    return b;
}

}  // namespace monitor::protocol
