#include "probe_scope.hpp"

#include <fmt/format.h>
#include <systemd/sd-bus.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "monitor/text_file.hpp"

namespace monitord {
namespace {

using monitor::fail;
using monitor::Result;
using monitor::Status;

constexpr const char* kService = "org.freedesktop.systemd1";
constexpr const char* kPath = "/org/freedesktop/systemd1";
constexpr const char* kManager = "org.freedesktop.systemd1.Manager";
// CPUWeight=idle on the bus (systemd's CGROUP_WEIGHT_IDLE).
constexpr std::uint64_t kWeightIdle = 0;

struct BusDeleter {
    void operator()(sd_bus* b) const { sd_bus_flush_close_unref(b); }
};
using BusPtr = std::unique_ptr<sd_bus, BusDeleter>;

// systemd's private socket (root), else the system bus.
Result<BusPtr> connect() {
    sd_bus* bus = nullptr;
    if (sd_bus_new(&bus) >= 0) {
        BusPtr owned(bus);
        if (sd_bus_set_address(bus, "unix:path=/run/systemd/private") >= 0 &&
            sd_bus_start(bus) >= 0) {
            return owned;
        }
    }
    bus = nullptr;
    if (int r = sd_bus_open_system(&bus); r < 0) {
        return monitor::fail_errno(-r,
                                   "connect to systemd (its private socket and the system "
                                   "bus)");
    }
    return BusPtr(bus);
}

std::string bus_error(const sd_bus_error& e, int r) {
    if (e.message != nullptr) return e.message;
    return monitor::errno_message(-r);
}

// Starts a transient unit with the properties `add` appends; UnitExists is not an error when
// `exists_ok`.
template <typename Add>
Result<bool> start_transient(sd_bus* bus, const std::string& unit, Add add) {
    sd_bus_message* m = nullptr;
    int r =
        sd_bus_message_new_method_call(bus, &m, kService, kPath, kManager, "StartTransientUnit");
    if (r < 0) return monitor::fail_errno(-r, "make a StartTransientUnit call");
    std::unique_ptr<sd_bus_message, decltype(&sd_bus_message_unref)> call(m, sd_bus_message_unref);
    // The call's arguments: name, mode, the properties, no auxiliary units.
    const std::function<int()> steps[] = {
        [&] { return sd_bus_message_append(m, "ss", unit.c_str(), "fail"); },
        [&] { return sd_bus_message_open_container(m, 'a', "(sv)"); },
        [&] { return add(m); },
        [&] { return sd_bus_message_close_container(m); },
        [&] { return sd_bus_message_append(m, "a(sa(sv))", 0); },
    };
    for (const auto& step : steps) {
        r = step();
        if (r < 0) return monitor::fail_errno(-r, "make a StartTransientUnit call for " + unit);
    }
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message* reply = nullptr;
    r = sd_bus_call(bus, m, 0, &error, &reply);
    sd_bus_message_unref(reply);
    if (r < 0) {
        const bool exists = sd_bus_error_has_name(&error, "org.freedesktop.systemd1.UnitExists");
        std::string why = bus_error(error, r);
        sd_bus_error_free(&error);
        if (exists) return false;
        return fail(Status::IoErr, fmt::format("systemd refused to start {}: {}", unit, why));
    }
    return true;
}

}  // namespace

Result<void> place_in_systemd_scope(pid_t pid, std::chrono::milliseconds wait) {
    auto bus = connect();
    if (!bus) return std::unexpected(bus.error());

    // The slice, idle: made transient, or given the weight when it exists already (a file, or
    // a daemon before this one).
    auto slice = start_transient(bus->get(), kProbeSlice, [](sd_bus_message* m) {
        return sd_bus_message_append(m, "(sv)(sv)", "Description", "s",
                                     "monitord's spinning idle probes", "CPUWeight", "t",
                                     kWeightIdle);
    });
    if (!slice) return std::unexpected(slice.error());
    if (!*slice) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        int r = sd_bus_call_method(bus->get(), kService, kPath, kManager, "SetUnitProperties",
                                   &error, nullptr, "sba(sv)", kProbeSlice, 1, 1, "CPUWeight", "t",
                                   kWeightIdle);
        if (r < 0) {
            std::string why = bus_error(error, r);
            sd_bus_error_free(&error);
            return fail(Status::IoErr,
                        fmt::format("systemd refused CPUWeight=idle for {}: {}", kProbeSlice, why));
        }
    }

    const std::string scope = fmt::format("monitord-probes-{}.scope", pid);
    auto started = start_transient(bus->get(), scope, [pid](sd_bus_message* m) {
        return sd_bus_message_append(m, "(sv)(sv)(sv)", "Description", "s",
                                     "monitord's spinning idle probes", "Slice", "s", kProbeSlice,
                                     "PIDs", "au", 1, static_cast<std::uint32_t>(pid));
    });
    if (!started) return std::unexpected(started.error());

    // The move happens when the scope's job runs.
    const auto deadline = std::chrono::steady_clock::now() + wait;
    const auto file = fmt::format("/proc/{}/cgroup", pid);
    for (;;) {
        auto text = monitor::read_text_file(file);
        if (text && text->find(scope) != std::string::npos) return {};
        if (std::chrono::steady_clock::now() >= deadline) {
            return fail(
                Status::IoErr,
                fmt::format("systemd started {}, but process {} was not in it after {} "
                            "ms ({}: {})",
                            scope, pid, wait.count(), file,
                            text ? std::string(monitor::trim_space(*text)) : text.error().message));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

}  // namespace monitord
