// The sampling calls of io.monitord.Monitor between JSON and C++: what to sample (the event,
// how often, the target, the modes, an address range), and the profile that comes back.
// Shapes as in lib/protocol/io.monitord.Monitor.varlink (ProfileRequest, ProfileReport);
// addresses travel as "0x..." strings, since a kernel address does not fit a JSON integer
// that every reader takes.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "monitor/enum_names.hpp"
#include "monitor/perf/profile.hpp"
#include "monitor/perf/profile_session.hpp"
#include "monitor/protocol/counter_messages.hpp"

namespace monitor::protocol {

// An address range histogram asked for: [start, end) in buckets of `bucket` bytes.
struct AddressRange {
    std::uint64_t start = 0;
    std::uint64_t end = 0;
    std::uint64_t bucket = 4;

    bool operator==(const AddressRange&) const = default;
};

// "0x401000-0x402000" or "0x401000-0x402000/16" (hexadecimal with 0x, or decimal); BADARG
// naming the text and the form otherwise. The range itself is checked by check_range().
Result<AddressRange> parse_address_range(std::string_view text);
// BADARG for an empty range, a bucket of 0 bytes, or too many buckets.
Result<void> check_range(const AddressRange& r);

inline constexpr int kDefaultProfileTop = 20;

// The modes a profile samples, as the interface names them.
enum class SampledModes { Both, User, Kernel };
inline constexpr std::array<EnumName<SampledModes>, 3> kSampledModeNames{{
    {SampledModes::User, "user"},
    {SampledModes::Kernel, "kernel"},
    {SampledModes::Both, "both"},
}};

// How user-mode call chains are made, as the interface names it (perf record --call-graph).
inline constexpr std::array<EnumName<perf::CallGraph>, 2> kCallGraphNames{{
    {perf::CallGraph::FramePointers, "fp"},
    {perf::CallGraph::Dwarf, "dwarf"},
}};

struct ProfileRequest {
    std::string event;  // empty: perf::CPU-CLOCK
    std::optional<std::int64_t> period;
    std::optional<std::int64_t> frequency;  // neither: 4000 a second
    TargetRequest target;
    SampledModes mode = SampledModes::Both;
    std::optional<int> top;  // the functions and objects kept (0: all)
    std::optional<AddressRange> range;
    // A process stopped before exec()ing a command (monctl perf profile -- CMD): sampling
    // starts at the exec.
    bool start_at_exec = false;
    // Each sample's call chain: the report's folded stacks.
    bool callchain = false;
    // How user-mode chains are made (given: chains, as callchain asks), and with dwarf, the
    // bytes of user stack each sample copies (default perf::kDefaultUserStack).
    std::optional<perf::CallGraph> call_graph;
    std::optional<std::int64_t> stack_size;

    bool operator==(const ProfileRequest&) const = default;
};

nlohmann::json to_json(const ProfileRequest& r);
ProfileRequest profile_request_from_json(const nlohmann::json& j);

// perf record's --call-graph text, "fp", "dwarf" or "dwarf,SIZE", into the request's call_graph
// and stack_size; BADARG naming the text and the forms otherwise (the size itself is checked
// by profile_options()).
Result<void> parse_call_graph(std::string_view text, ProfileRequest& r);

// The one mapping of a request onto a ProfileSession's options (the CPUs are the caller's):
// BADARG for a period or frequency below 1 or both, an unknown mode, a bad range or top.
Result<perf::ProfileOptions> profile_options(const ProfileRequest& r,
                                             const std::filesystem::path& cgroup_root);

// An address histogram as it travels: the buckets that have samples.
struct HistogramMessage {
    AddressRange range;
    std::uint64_t samples = 0;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> buckets;  // bucket start, samples
};

// A ProfileReport of the interface: one interval's samples, or the whole run's (final).
struct ProfileMessage {
    std::string event;
    std::string target;                    // target_text()
    double elapsed = 0;                    // seconds the samples cover
    std::optional<std::int64_t> interval;  // 1, 2, ...: the interval's number
    bool final = false;
    std::optional<int> threads;  // of a process, opened at the start
    std::string ended;           // why the run ended before its duration ("process 42 exited")
    // Why kernel functions are not named (kernel code counted under its object alone), when
    // the profile samples kernel mode and the kernel's symbols could not be read.
    std::string kernel_symbols;
    perf::ProfileReport report;
    std::optional<HistogramMessage> histogram;
};

// The message of `profile` (the top `top` lines, every stack, each CPU's top `top` lines,
// and the histogram of `range` if given).
ProfileMessage make_profile_message(const perf::Profile& profile, std::size_t top,
                                    const std::optional<AddressRange>& range);
nlohmann::json to_json(const ProfileMessage& m);
ProfileMessage profile_message_from_json(const nlohmann::json& j);

// Overflows asked for (AmigaOS's SetInterruptVector with CounterControl's preload, pfm's
// interrupt frequency): every `period` events of `event` on the target, the kernel takes a
// sample, and the watcher is told.
struct OverflowRequest {
    std::string event;
    std::int64_t period = 0;
    TargetRequest target;
    SampledModes mode = SampledModes::Both;

    bool operator==(const OverflowRequest&) const = default;
};

nlohmann::json to_json(const OverflowRequest& r);
OverflowRequest overflow_request_from_json(const nlohmann::json& j);
// A ProfileSession's options that only count the overflows (no profile, no names); the errors
// of profile_options.
Result<perf::ProfileOptions> overflow_options(const OverflowRequest& r,
                                              const std::filesystem::path& cgroup_root);

// The overflows of a batch (the time since the last reply), with the last one's sampled
// instruction address: the SIA.
struct OverflowBatch {
    std::string event;
    std::int64_t period = 0;
    std::uint64_t overflows = 0;  // in this batch
    std::uint64_t total = 0;      // since the start
    double elapsed = 0;           // seconds since the start
    bool final = false;
    std::string ended;
    std::optional<perf::Sample> last;  // the batch's last overflow
    std::uint64_t lost = 0;            // since the start
    std::uint64_t throttled = 0;
};

nlohmann::json to_json(const OverflowBatch& b);
OverflowBatch overflow_batch_from_json(const nlohmann::json& j);

}  // namespace monitor::protocol
