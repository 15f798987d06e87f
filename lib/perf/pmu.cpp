// The PMU modules' defaults, and the one list of the modules the catalog is made of.
#include "monitor/perf/pmu.hpp"

#include <fmt/format.h>

#include <array>

#include "monitor/perf/breakpoint_pmu.hpp"
#include "monitor/perf/ppc750_pmu.hpp"
#if MONITOR_HAVE_LIBPFM
#include "monitor/perf/libpfm_pmus.hpp"
#else
#include "monitor/perf/generic_pmu.hpp"
#endif

namespace monitor::perf {
namespace {

constexpr std::array<PmuFactory, 3> kModules = {
#if MONITOR_HAVE_LIBPFM
    &make_libpfm_pmus,
#else
    &make_generic_pmu,
#endif
    &make_ppc750_pmu,
    &make_breakpoint_pmu,
};

}  // namespace

std::string numbered_counter_name(int counter) {
    return fmt::format("counter {}", counter + 1);
}

std::string PmuModule::counter_name(std::string_view, int counter) const {
    return numbered_counter_name(counter);
}

Result<void> PmuModule::counts_on(const Processor&) const {
    return {};
}

std::string PmuModule::note(const PmuInfo&) const {
    return {};
}

Result<void> PmuModule::fits(std::span<const EventSpec* const>) const {
    return {};
}

Result<void> PmuModule::refuse_unprivileged(const EventSpec&, std::string_view) const {
    return {};
}

Result<void> PmuModule::place(EventSpec&, const CountTarget&) const {
    return {};
}

std::optional<Error> PmuModule::explain_open_error(int, const EventSpec&, std::string_view) const {
    return std::nullopt;
}

std::span<const PmuFactory> pmu_modules() {
    return kModules;
}

}  // namespace monitor::perf
