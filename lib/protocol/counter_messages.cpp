#include "monitor/protocol/counter_messages.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace monitor::protocol {

using nlohmann::json;

namespace {

template <typename T>
void put_optional(json& j, const char* key, const std::optional<T>& v) {
    if (v) j[key] = *v;
}

// The fields of a Count, assigned to an object: a new one (to_json) or one that has them
// from the last record of a stream (update_json), where the assignments allocate nothing.
void assign_count(json& j, const Count& c) {
    j["count"] = c.count;
    j["enabled_ns"] = c.enabled_ns;
    j["running_ns"] = c.running_ns;
    j["scaled"] = c.scaled;
    j["running"] = c.running;
}

// Reports go out every second of a collection: their objects are built member by member,
// which costs a third of nlohmann's initializer lists (copies of every value).
json to_json(const Count& c) {
    json j(json::value_t::object);
    assign_count(j, c);
    return j;
}

// Whether `j` is a string equal to `s`, without making a JSON value of `s`.
bool same_string(const json& j, std::string_view s) {
    const auto* p = j.get_ptr<const std::string*>();
    return p != nullptr && *p == s;
}

// Whether `j` is the JSON array of `cpus`, without allocating.
bool same_cpus(const json& j, const std::vector<int>& cpus) {
    if (!j.is_array() || j.size() != cpus.size()) return false;
    for (std::size_t i = 0; i < cpus.size(); ++i) {
        if (!j[i].is_number_integer() || j[i].get<int>() != cpus[i]) return false;
    }
    return true;
}

Count count_from_json(const json& j) {
    Count c;
    c.count = j.at("count").get<std::uint64_t>();
    c.enabled_ns = j.at("enabled_ns").get<std::uint64_t>();
    c.running_ns = j.at("running_ns").get<std::uint64_t>();
    c.scaled = j.at("scaled").get<double>();
    c.running = j.at("running").get<double>();
    return c;
}

Count count_of(const perf::CountValue& v) {
    return {v.count, v.enabled_ns, v.running_ns, v.scaled(), v.running_ratio()};
}

// Below this a slice would be mostly the cost of switching sets; above it a set could miss
// whole phases of a workload.
constexpr std::int64_t kMinSliceMs = 10;
constexpr std::int64_t kMaxSliceMs = 10'000;
// The most processes one target names: each is checked and pinned, and each of their threads
// takes a descriptor per event (perf stat -p takes any number; the descriptor limits bound it).
constexpr std::size_t kMaxPids = 1024;

}  // namespace

json to_json(const TargetRequest& r) {
    json t{{"kind", name_of(kTargetKindNames, r.kind)}};
    put_optional(t, "cpu", r.cpu);
    put_optional(t, "pid", r.pid);
    if (!r.cgroup.empty()) t["cgroup"] = r.cgroup;
    if (!r.unit.empty()) t["unit"] = r.unit;
    if (!r.cpus.empty()) t["cpus"] = r.cpus;
    if (!r.pids.empty()) t["pids"] = r.pids;
    if (r.per != CpuLevel::Cpu) t["per"] = name_of(kCpuLevelNames, r.per);
    return t;
}

TargetRequest target_request_from_json(const json& j) {
    TargetRequest r;
    const auto kind = j.at("kind").get<std::string>();
    const auto named = value_named(kTargetKindNames, kind);
    if (!named) {
        throw std::invalid_argument("unknown target kind '" + kind + "' (" +
                                    names_list(kTargetKindNames) + ")");
    }
    r.kind = *named;
    if (auto v = j.find("cpu"); v != j.end() && !v->is_null()) r.cpu = v->get<int>();
    if (auto v = j.find("pid"); v != j.end() && !v->is_null()) r.pid = v->get<std::int64_t>();
    if (auto v = j.find("cgroup"); v != j.end() && !v->is_null()) r.cgroup = *v;
    if (auto v = j.find("unit"); v != j.end() && !v->is_null()) r.unit = *v;
    if (auto v = j.find("cpus"); v != j.end() && !v->is_null()) r.cpus = v->get<std::vector<int>>();
    if (auto v = j.find("pids"); v != j.end() && !v->is_null()) {
        r.pids = v->get<std::vector<std::int64_t>>();
    }
    if (auto v = j.find("per"); v != j.end() && !v->is_null()) {
        const auto per = v->get<std::string>();
        const auto level = value_named(kCpuLevelNames, per);
        if (!level) {
            throw std::invalid_argument("unknown per '" + per + "' (" + names_list(kCpuLevelNames) +
                                        ")");
        }
        r.per = *level;
    }
    return r;
}

std::string target_text(const TargetRequest& r) {
    using enum TargetRequest::Kind;
    switch (r.kind) {
        case Each: {
            // "each CPU", "each of cpu0, cpu2"; "each core", "each core of cpu0, cpu2".
            const std::string level{r.per == CpuLevel::Cpu ? "" : name_of(kCpuLevelNames, r.per)};
            if (r.cpus.empty()) return "each " + (level.empty() ? std::string{"CPU"} : level);
            return fmt::format("each {}of cpu{}", level.empty() ? "" : level + " ",
                               fmt::join(r.cpus, ", cpu"));
        }
        case Cpu:
            return r.cpu ? fmt::format("cpu{}", *r.cpu) : "a cpu";
        case Cgroup:
            return "cgroup " + r.cgroup;
        case Unit:
            return "unit " + r.unit;
        case Process: {
            std::vector<std::int64_t> pids = r.pids;
            if (r.pid) pids.insert(pids.begin(), *r.pid);
            if (pids.empty()) return "a process";
            return fmt::format("process{} {}", pids.size() == 1 ? "" : "es", fmt::join(pids, ", "));
        }
        case All:
            break;
    }
    return r.cpus.empty() ? "all CPUs" : fmt::format("cpu{}", fmt::join(r.cpus, ", cpu"));
}

json to_json(const CounterRequest& r) {
    json j{{"events", r.events}, {"mux", name_of(kMuxModeNames, r.mux)}};
    j["target"] = to_json(r.target);
    put_optional(j, "slice_ms", r.slice_ms);
    put_optional(j, "counter_budget", r.counter_budget);
    put_optional(j, "sample_every", r.sample_every);
    if (!r.metrics.empty()) j["metrics"] = r.metrics;
    return j;
}

std::string target_text(const CounterRequest& r) {
    return target_text(r.target);
}

CounterRequest counter_request_from_json(const json& j) {
    CounterRequest r;
    r.events = j.at("events").get<std::string>();
    if (auto it = j.find("target"); it != j.end() && !it->is_null()) {
        r.target = target_request_from_json(*it);
    }
    if (auto it = j.find("mux"); it != j.end() && !it->is_null()) {
        const auto mux = it->get<std::string>();
        const auto named = value_named(kMuxModeNames, mux);
        if (!named) {
            throw std::invalid_argument("unknown mux '" + mux + "' (" + names_list(kMuxModeNames) +
                                        ")");
        }
        r.mux = *named;
    }
    if (auto it = j.find("slice_ms"); it != j.end() && !it->is_null()) {
        r.slice_ms = it->get<std::int64_t>();
    }
    if (auto it = j.find("counter_budget"); it != j.end() && !it->is_null()) {
        r.counter_budget = it->get<int>();
    }
    if (auto it = j.find("sample_every"); it != j.end() && !it->is_null()) {
        r.sample_every = it->get<std::int64_t>();
    }
    if (auto it = j.find("metrics"); it != j.end() && !it->is_null()) {
        r.metrics = it->get<std::string>();
    }
    return r;
}

Result<perf::SessionOptions> counting_options(const CounterRequest& r) {
    perf::SessionOptions o;
    // Metrics alone bring their own events (perf::add_metrics).
    if (!r.events.empty() || r.metrics.empty()) {
        auto events = perf::parse_event_list(r.events);
        if (!events) return std::unexpected(events.error());
        o.events = std::move(*events);
    }
    o.mux = r.mux;
    if (r.slice_ms) {
        if (*r.slice_ms < kMinSliceMs || *r.slice_ms > kMaxSliceMs) {
            return fail(Status::BadArg, fmt::format("slice of {} ms: choose from {} to {} ms",
                                                    *r.slice_ms, kMinSliceMs, kMaxSliceMs));
        }
        o.slice = std::chrono::milliseconds(*r.slice_ms);
    }
    if (r.counter_budget) {
        if (*r.counter_budget < 1 || *r.counter_budget > 32) {
            return fail(Status::BadArg,
                        fmt::format("counter budget {}: choose from 1 to 32", *r.counter_budget));
        }
        o.counter_budget = *r.counter_budget;
    }
    if (r.sample_every && *r.sample_every < 1) {
        return fail(Status::BadArg,
                    fmt::format("sample every {} events: give 1 or more", *r.sample_every));
    }
    return o;
}

Result<perf::CountTarget> count_target(const TargetRequest& r,
                                       const std::filesystem::path& cgroup_root) {
    auto need = [&](bool present, const char* what) -> Result<void> {
        if (!present) {
            return fail(Status::BadArg, fmt::format("target '{}' needs {}",
                                                    name_of(kTargetKindNames, r.kind), what));
        }
        return {};
    };
    perf::CountTarget t;
    using enum TargetRequest::Kind;
    t.cpus = r.cpus;
    std::ranges::sort(t.cpus);
    t.cpus.erase(std::ranges::unique(t.cpus).begin(), t.cpus.end());
    if (!r.cpus.empty() && r.kind != All && r.kind != Each) {
        return fail(Status::BadArg, fmt::format("target '{}' takes no list of CPUs (kinds all "
                                                "and each do)",
                                                name_of(kTargetKindNames, r.kind)));
    }
    for (int cpu : r.cpus) {
        if (cpu < 0) return fail(Status::BadArg, fmt::format("no cpu {}", cpu));
    }
    if (r.per != CpuLevel::Cpu && r.kind != Each) {
        return fail(Status::BadArg,
                    fmt::format("target '{}' is not counted per {} (kind each is)",
                                name_of(kTargetKindNames, r.kind), name_of(kCpuLevelNames, r.per)));
    }
    if (!r.pids.empty() && r.kind != Process) {
        return fail(Status::BadArg, fmt::format("target '{}' takes no list of processes (kind "
                                                "process does)",
                                                name_of(kTargetKindNames, r.kind)));
    }
    switch (r.kind) {
        case All:
            t.kind = perf::TargetKind::AllCpus;
            break;
        case Each:
            t.kind = perf::TargetKind::EachCpu;
            break;
        case Cpu:
            if (auto ok = need(r.cpu.has_value(), "a cpu"); !ok) return std::unexpected(ok.error());
            if (*r.cpu < 0) return fail(Status::BadArg, fmt::format("no cpu {}", *r.cpu));
            t.kind = perf::TargetKind::OneCpu;
            t.cpu = *r.cpu;
            break;
        case Process: {
            if (auto ok = need(r.pid.has_value() || !r.pids.empty(), "a pid or pids"); !ok) {
                return std::unexpected(ok.error());
            }
            std::vector<std::int64_t> pids = r.pids;
            if (r.pid) pids.push_back(*r.pid);
            if (pids.size() > kMaxPids) {
                return fail(Status::BadArg, fmt::format("{} processes: count at most {} at once",
                                                        pids.size(), kMaxPids));
            }
            for (std::int64_t pid : pids) {
                if (pid <= 0 || pid > std::numeric_limits<pid_t>::max()) {
                    return fail(Status::BadArg, fmt::format("no process {}", pid));
                }
                t.pids.push_back(static_cast<pid_t>(pid));
            }
            std::ranges::sort(t.pids);
            t.pids.erase(std::ranges::unique(t.pids).begin(), t.pids.end());
            t.kind = perf::TargetKind::Process;
            t.pid = t.pids.front();
            if (t.pids.size() == 1) t.pids.clear();
            break;
        }
        case Cgroup:
            if (auto ok = need(!r.cgroup.empty(), "a cgroup path"); !ok) {
                return std::unexpected(ok.error());
            }
            // Refused here, before anything is opened, when it could lead out of the tree.
            if (auto dir = perf::cgroup_directory(cgroup_root.string(), r.cgroup); !dir) {
                return std::unexpected(dir.error());
            }
            t.kind = perf::TargetKind::Cgroup;
            t.cgroup = r.cgroup;
            break;
        case Unit: {
            if (auto ok = need(!r.unit.empty(), "a unit name"); !ok) {
                return std::unexpected(ok.error());
            }
            auto cgroup = perf::unit_cgroup(cgroup_root, r.unit);
            if (!cgroup) return std::unexpected(cgroup.error());
            t.kind = perf::TargetKind::Cgroup;
            t.cgroup = std::move(*cgroup);
            break;
        }
    }
    return t;
}

Result<perf::SessionOptions> session_options(const CounterRequest& r,
                                             const std::filesystem::path& cgroup_root) {
    auto o = counting_options(r);
    if (!o) return o;
    o->cgroup_root = cgroup_root.string();
    auto target = count_target(r.target, cgroup_root);
    if (!target) return std::unexpected(target.error());
    o->target = std::move(*target);
    return o;
}

Result<ReportShape> report_shape(const TargetRequest& target, std::span<const int> cpus,
                                 const std::filesystem::path& sys_root) {
    ReportShape shape{.per_cpu = target.kind == TargetRequest::Kind::Each, .groups = {}};
    if (!shape.per_cpu || target.per == CpuLevel::Cpu) return shape;
    auto topology = CpuTopology::read(sys_root, cpus);
    if (!topology) return std::unexpected(topology.error());
    shape.groups = group_cpus(*topology, cpus, target.per);
    return shape;
}

CounterReport make_report(const perf::Plan& plan, const perf::PerfReport& report,
                          const ReportShape& shape, std::optional<std::int64_t> period, bool final,
                          std::span<const int> online) {
    CounterReport r;
    make_report(plan, report, shape, period, final, online, r);
    return r;
}

void make_report(const perf::Plan& plan, const perf::PerfReport& report, const ReportShape& shape,
                 std::optional<std::int64_t> period, bool final, std::span<const int> online,
                 CounterReport& r) {
    r.elapsed = std::chrono::duration<double>(report.elapsed).count();
    r.paused = report.paused_at_read;
    r.paused_seconds = std::chrono::duration<double>(report.paused).count();
    r.period = period;
    r.final = final;
    r.threads = report.threads > 0 ? std::optional<int>(report.threads) : std::nullopt;
    r.offline_cpus.clear();
    for (const int cpu : report.instances) {  // -1: a process, on no one CPU
        if (cpu >= 0 && std::ranges::find(online, cpu) == online.end()) {
            r.offline_cpus.push_back(cpu);
        }
    }
    std::ranges::sort(r.offline_cpus);
    r.slots = report.slots;
    r.rotations = report.rotations;
    r.events.resize(report.events.size());
    for (std::size_t k = 0; k < report.events.size(); ++k) {
        const perf::EventCount& e = report.events[k];
        ReportedEvent& ec = r.events[k];
        ec.name = e.name;
        ec.canonical = e.canonical;
        ec.pmu = e.pmu;
        if (k < plan.events.size() && perf::counts_nanoseconds(plan.events[k])) {
            ec.unit = "ns";
        } else {
            ec.unit.clear();
        }
        ec.value = count_of(e.total);
        ec.cpus.clear();
        // Assigned in place: a stream's records keep their strings.
        ec.groups.resize(shape.groups.size());
        if (!shape.groups.empty()) {
            // A group's CPUs that the report lacks (none counted there) add nothing.
            for (std::size_t g = 0; g < shape.groups.size(); ++g) {
                perf::CountValue sum;
                for (std::size_t i = 0; i < e.per_instance.size() && i < report.instances.size();
                     ++i) {
                    if (std::ranges::binary_search(shape.groups[g].cpus, report.instances[i])) {
                        sum += e.per_instance[i];
                    }
                }
                ec.groups[g].first = shape.groups[g].id;
                ec.groups[g].second = count_of(sum);
            }
        } else if (shape.per_cpu) {
            for (std::size_t i = 0; i < e.per_instance.size() && i < report.instances.size(); ++i) {
                ec.cpus.emplace_back(report.instances[i], count_of(e.per_instance[i]));
            }
        }
    }
    if (r.groups != shape.groups) r.groups = shape.groups;
    perf::derive_metrics(plan, report, r.metrics);
}

json to_json(const CounterReport& r) {
    json j(json::value_t::object);
    j["elapsed"] = r.elapsed;
    j["final"] = r.final;
    j["slots"] = r.slots;
    j["rotations"] = r.rotations;
    json& events = j["events"] = json::array();
    for (const auto& e : r.events) {
        json& je = events.emplace_back(json::value_t::object);
        je["name"] = e.name;
        je["canonical"] = e.canonical;
        je["pmu"] = e.pmu;
        if (!e.unit.empty()) je["unit"] = e.unit;
        je["value"] = to_json(e.value);
        if (e.sampled_address) je["sampled_address"] = fmt::format("{:#x}", *e.sampled_address);
        if (!e.cpus.empty()) {
            json& cpus = je["cpus"] = json::array();
            for (const auto& [cpu, v] : e.cpus) {
                json& jc = cpus.emplace_back(json::value_t::object);
                jc["cpu"] = cpu;
                jc["value"] = to_json(v);
            }
        }
        if (!e.groups.empty()) {
            json& groups = je["groups"] = json::array();
            for (const auto& [id, v] : e.groups) {
                json& jg = groups.emplace_back(json::value_t::object);
                jg["id"] = id;
                jg["value"] = to_json(v);
            }
        }
    }
    if (!r.groups.empty()) {
        json& groups = j["groups"] = json::array();
        for (const auto& g : r.groups) groups.push_back({{"id", g.id}, {"cpus", g.cpus}});
    }
    json& metrics = j["metrics"] = json::array();
    for (const auto& m : r.metrics) {
        json& jm = metrics.emplace_back(json::value_t::object);
        jm["name"] = m.name;
        jm["description"] = m.description;
        jm["value"] = m.value;
        jm["same_set"] = m.same_set;
        if (!m.event.empty()) jm["event"] = m.event;
    }
    put_optional(j, "period", r.period);
    put_optional(j, "threads", r.threads);
    if (!r.offline_cpus.empty()) j["offline_cpus"] = r.offline_cpus;
    if (r.paused) j["paused"] = true;
    if (r.paused_seconds > 0) j["paused_seconds"] = r.paused_seconds;
    return j;
}

bool update_json(json& j, const CounterReport& r) {
    if (!j.is_object()) return false;
    auto events = j.find("events");
    auto metrics = j.find("metrics");
    if (events == j.end() || !events->is_array() || events->size() != r.events.size() ||
        metrics == j.end() || !metrics->is_array() || metrics->size() != r.metrics.size() ||
        j.contains("period") != r.period.has_value() ||
        j.contains("threads") != r.threads.has_value() || j.contains("paused") != r.paused ||
        j.contains("paused_seconds") != (r.paused_seconds > 0)) {
        return false;
    }
    if (auto offline = j.find("offline_cpus");
        offline == j.end() ? !r.offline_cpus.empty() : !same_cpus(*offline, r.offline_cpus)) {
        return false;
    }
    // The groups are the session's: the same in every record, or another shape.
    if (auto groups = j.find("groups");
        groups == j.end() ? !r.groups.empty()
                          : !groups->is_array() || groups->size() != r.groups.size()) {
        return false;
    }
    for (std::size_t i = 0; i < r.events.size(); ++i) {
        const ReportedEvent& e = r.events[i];
        json& je = (*events)[i];
        if (!je.is_object() || !same_string(je["name"], e.name) ||
            !same_string(je["canonical"], e.canonical) || !same_string(je["pmu"], e.pmu) ||
            je.contains("unit") == e.unit.empty() || !je["value"].is_object()) {
            return false;
        }
        assign_count(je["value"], e.value);
        if (je.contains("sampled_address") != e.sampled_address.has_value()) return false;
        if (e.sampled_address) je["sampled_address"] = fmt::format("{:#x}", *e.sampled_address);
        auto groups = je.find("groups");
        if ((groups == je.end()) != e.groups.empty()) return false;
        if (groups != je.end()) {
            if (!groups->is_array() || groups->size() != e.groups.size()) return false;
            for (std::size_t k = 0; k < e.groups.size(); ++k) {
                json& jg = (*groups)[k];
                if (!jg.is_object() || !same_string(jg["id"], e.groups[k].first) ||
                    !jg["value"].is_object()) {
                    return false;
                }
                assign_count(jg["value"], e.groups[k].second);
            }
        }
        auto cpus = je.find("cpus");
        if ((cpus == je.end()) != e.cpus.empty()) return false;
        if (cpus == je.end()) continue;
        if (!cpus->is_array() || cpus->size() != e.cpus.size()) return false;
        for (std::size_t k = 0; k < e.cpus.size(); ++k) {
            json& jc = (*cpus)[k];
            if (!jc.is_object() || !jc["value"].is_object()) return false;
            jc["cpu"] = e.cpus[k].first;
            assign_count(jc["value"], e.cpus[k].second);
        }
    }
    for (std::size_t i = 0; i < r.metrics.size(); ++i) {
        const perf::Metric& m = r.metrics[i];
        json& jm = (*metrics)[i];
        if (!jm.is_object() || !same_string(jm["name"], m.name) ||
            !same_string(jm["description"], m.description) ||
            jm.contains("event") == m.event.empty()) {
            return false;
        }
        jm["value"] = m.value;
        jm["same_set"] = m.same_set;
    }
    j["elapsed"] = r.elapsed;
    j["final"] = r.final;
    j["slots"] = r.slots;
    j["rotations"] = r.rotations;
    if (r.period) j["period"] = *r.period;
    if (r.threads) j["threads"] = *r.threads;
    if (r.paused_seconds > 0) j["paused_seconds"] = r.paused_seconds;
    return true;
}

CounterReport counter_report_from_json(const json& j) {
    CounterReport r;
    r.elapsed = j.at("elapsed").get<double>();
    if (auto it = j.find("period"); it != j.end() && !it->is_null()) {
        r.period = it->get<std::int64_t>();
    }
    r.final = j.at("final").get<bool>();
    if (auto it = j.find("threads"); it != j.end() && !it->is_null()) r.threads = it->get<int>();
    if (auto it = j.find("paused"); it != j.end() && !it->is_null()) r.paused = it->get<bool>();
    if (auto it = j.find("paused_seconds"); it != j.end() && !it->is_null()) {
        r.paused_seconds = it->get<double>();
    }
    if (auto it = j.find("offline_cpus"); it != j.end() && !it->is_null()) {
        r.offline_cpus = it->get<std::vector<int>>();
    }
    if (auto it = j.find("groups"); it != j.end() && !it->is_null()) {
        for (const auto& g : *it) {
            r.groups.push_back(
                {g.at("id").get<std::string>(), g.at("cpus").get<std::vector<int>>()});
        }
    }
    r.slots = j.at("slots").get<int>();
    r.rotations = j.at("rotations").get<int>();
    for (const auto& je : j.at("events")) {
        ReportedEvent e;
        e.name = je.at("name").get<std::string>();
        e.canonical = je.at("canonical").get<std::string>();
        e.pmu = je.at("pmu").get<std::string>();
        if (auto it = je.find("unit"); it != je.end() && it->is_string()) {
            e.unit = it->get<std::string>();
        }
        e.value = count_from_json(je.at("value"));
        if (auto it = je.find("sampled_address"); it != je.end() && it->is_string()) {
            e.sampled_address = std::stoull(it->get<std::string>(), nullptr, 16);
        }
        if (auto it = je.find("cpus"); it != je.end() && !it->is_null()) {
            for (const auto& c : *it) {
                e.cpus.emplace_back(c.at("cpu").get<int>(), count_from_json(c.at("value")));
            }
        }
        if (auto it = je.find("groups"); it != je.end() && !it->is_null()) {
            for (const auto& g : *it) {
                e.groups.emplace_back(g.at("id").get<std::string>(),
                                      count_from_json(g.at("value")));
            }
        }
        r.events.push_back(std::move(e));
    }
    for (const auto& jm : j.at("metrics")) {
        auto event = jm.find("event");
        r.metrics.push_back(
            {jm.at("name").get<std::string>(), jm.at("description").get<std::string>(),
             jm.at("value").get<double>(), jm.at("same_set").get<bool>(),
             event != jm.end() && event->is_string() ? event->get<std::string>() : std::string{}});
    }
    return r;
}

CounterPlan make_plan_message(const perf::Plan& plan) {
    CounterPlan p;
    p.slots = std::max(plan.slots, 1);
    for (const auto& g : plan.kernel_groups) {
        PlanGroup pg;
        pg.pmu = g.pmu;
        if (!g.free_running()) pg.set = g.set;
        pg.sets = g.pmu_sets;
        for (const auto& m : g.members) {
            PlanMember pm;
            pm.event = plan.events[m.event].name;
            if (m.counter != perf::kNoCounter) pm.counter = m.counter_name;
            pg.members.push_back(std::move(pm));
        }
        p.groups.push_back(std::move(pg));
    }
    return p;
}

json to_json(const CounterPlan& p) {
    json groups = json::array();
    for (const auto& g : p.groups) {
        json members = json::array();
        for (const auto& m : g.members) {
            json jm{{"event", m.event}};
            put_optional(jm, "counter", m.counter);
            members.push_back(std::move(jm));
        }
        json jg{{"pmu", g.pmu}, {"sets", g.sets}, {"members", std::move(members)}};
        put_optional(jg, "set", g.set);
        groups.push_back(std::move(jg));
    }
    json j{{"slots", p.slots}, {"groups", std::move(groups)}};
    if (!p.shared_with.empty()) j["shared_with"] = p.shared_with;
    return j;
}

CounterPlan counter_plan_from_json(const json& j) {
    CounterPlan p;
    p.slots = j.at("slots").get<int>();
    for (const auto& jg : j.at("groups")) {
        PlanGroup g;
        g.pmu = jg.at("pmu").get<std::string>();
        if (auto it = jg.find("set"); it != jg.end() && !it->is_null()) g.set = it->get<int>();
        g.sets = jg.at("sets").get<int>();
        for (const auto& jm : jg.at("members")) {
            PlanMember m;
            m.event = jm.at("event").get<std::string>();
            if (auto it = jm.find("counter"); it != jm.end() && !it->is_null()) {
                m.counter = it->get<std::string>();
            }
            g.members.push_back(std::move(m));
        }
        p.groups.push_back(std::move(g));
    }
    if (auto it = j.find("shared_with"); it != j.end() && !it->is_null()) {
        p.shared_with = it->get<std::vector<std::string>>();
    }
    return p;
}

json to_json(const StandingSession& s) {
    json j{{"name", s.name},
           {"request", to_json(s.request)},
           {"source", s.source},
           {"state", s.counting ? "counting" : "failed"}};
    put_optional(j, "error", s.error);
    if (s.plan) j["plan"] = to_json(*s.plan);
    if (s.totals) j["totals"] = to_json(*s.totals);
    if (s.last) j["last"] = to_json(*s.last);
    return j;
}

StandingSession standing_session_from_json(const json& j) {
    StandingSession s;
    s.name = j.at("name").get<std::string>();
    s.request = counter_request_from_json(j.at("request"));
    s.source = j.at("source").get<std::string>();
    s.counting = j.at("state") == "counting";
    auto present = [&j](const char* key) {
        auto it = j.find(key);
        return it != j.end() && !it->is_null() ? &*it : nullptr;
    };
    if (const auto* e = present("error")) s.error = e->get<std::string>();
    if (const auto* p = present("plan")) s.plan = counter_plan_from_json(*p);
    if (const auto* t = present("totals")) s.totals = counter_report_from_json(*t);
    if (const auto* l = present("last")) s.last = counter_report_from_json(*l);
    return s;
}

json to_json(const perf::PmuInfo& p) {
    return json{{"name", p.name},
                {"description", p.description},
                {"counters", p.counters},
                {"fixed_counters", p.fixed_counters},
                {"counter_width", p.counter_width},
                {"events", p.events},
                {"source", p.source},
                {"core", p.core},
                {"unavailable", p.unavailable.empty() ? json(nullptr) : json(p.unavailable)},
                {"note", p.note.empty() ? json(nullptr) : json(p.note)}};
}

perf::PmuInfo pmu_from_json(const json& j) {
    perf::PmuInfo p;
    p.name = j.at("name").get<std::string>();
    p.description = j.at("description").get<std::string>();
    p.counters = j.at("counters").get<int>();
    p.fixed_counters = j.at("fixed_counters").get<int>();
    p.counter_width = j.at("counter_width").get<int>();
    p.events = j.at("events").get<std::size_t>();
    p.source = j.at("source").get<std::string>();
    p.core = j.at("core").get<bool>();
    if (auto it = j.find("unavailable"); it != j.end() && it->is_string()) {
        p.unavailable = it->get<std::string>();
    }
    if (auto it = j.find("note"); it != j.end() && it->is_string()) p.note = it->get<std::string>();
    return p;
}

EventListing event_listing(const perf::EventInfo& e) {
    return {.name = e.name,
            .description = e.description,
            .pmu = e.pmu,
            .counters = e.counter_names,
            .pinned = e.pinned};
}

json to_json(const EventListing& e) {
    return json{{"name", e.name},
                {"description", e.description},
                {"pmu", e.pmu},
                {"counters", e.counters},
                {"pinned", e.pinned}};
}

MetricListing metric_listing(const perf::MetricDefinition& d, const perf::EventCatalog& catalog,
                             const perf::EventProbe& probe) {
    MetricListing m{d.name, d.description, d.formula.text(), d.groups, d.where, {}};
    if (auto why = perf::cannot_count(d, catalog, probe)) m.unavailable = why->message;
    return m;
}

json to_json(const MetricListing& m) {
    return json{{"name", m.name},
                {"description", m.description},
                {"formula", m.formula},
                {"groups", m.groups},
                {"source", m.source},
                {"unavailable", m.unavailable.empty() ? json(nullptr) : json(m.unavailable)}};
}

MetricListing metric_listing_from_json(const json& j) {
    MetricListing m;
    m.name = j.at("name").get<std::string>();
    m.description = j.at("description").get<std::string>();
    m.formula = j.at("formula").get<std::string>();
    m.groups = j.at("groups").get<std::vector<std::string>>();
    m.source = j.at("source").get<std::string>();
    if (auto it = j.find("unavailable"); it != j.end() && !it->is_null()) {
        m.unavailable = it->get<std::string>();
    }
    return m;
}

EventListing event_from_json(const json& j) {
    EventListing e;
    e.name = j.at("name").get<std::string>();
    e.description = j.at("description").get<std::string>();
    e.pmu = j.at("pmu").get<std::string>();
    e.counters = j.at("counters").get<std::vector<std::string>>();
    e.pinned = j.at("pinned").get<bool>();
    return e;
}

}  // namespace monitor::protocol
