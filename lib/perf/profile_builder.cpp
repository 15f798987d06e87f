#include "monitor/perf/profile_builder.hpp"

#include <fmt/format.h>
#include <linux/perf_event.h>

#include <map>
#include <span>

#include "monitor/perf/dwarf_unwinder.hpp"
#include "monitor/text_file.hpp"

namespace monitor::perf {

void SampleBatch::clear() {
    entries.clear();
    samples.clear();
    chains.clear();
    regs.clear();
    stacks.clear();
    tasks.clear();
    drains.clear();
}

void SampleBatch::keep(const Sample& sample) {
    samples.push_back({.sample = sample,
                       .chain_at = chains.size(),
                       .regs_at = regs.size(),
                       .stack_at = stacks.size()});
    chains.insert(chains.end(), sample.callchain.begin(), sample.callchain.end());
    regs.insert(regs.end(), sample.user_regs.begin(), sample.user_regs.end());
    stacks.insert(stacks.end(), sample.user_stack.begin(), sample.user_stack.end());
}

void SampleBatch::Kept::restore(const SampleBatch& batch) {
    sample.callchain = std::span(batch.chains).subspan(chain_at, sample.callchain.size());
    sample.user_regs = std::span(batch.regs).subspan(regs_at, sample.user_regs.size());
    sample.user_stack = std::span(batch.stacks).subspan(stack_at, sample.user_stack.size());
}

void SampleBatch::drop_samples() {
    std::map<int, std::uint64_t> lost;  // by CPU
    for (const auto& kept : samples) ++lost[kept.sample.cpu];
    for (const auto& [cpu, n] : lost) drains.push_back({cpu, {.unnamed = n}});
    std::erase_if(entries, [](const Entry& e) { return e.is_sample; });
    samples.clear();
    chains.clear();
    regs.clear();
    stacks.clear();
}

ProfileBuilder::ProfileBuilder(ProfileBuilderOptions options)
    : profile_(options.by_cpu, options.kept_addresses),
      interval_(options.by_cpu, options.kept_addresses),
#if MONITOR_HAVE_LIBDW
      unwinder_(options.dwarf ? std::make_shared<DwarfUnwinder>() : nullptr),
#endif
      names_(std::make_unique<AddressNames>(options.kallsyms)),
      callchain_(options.callchain && options.profile),
      profiling_(options.profile) {
    if (options.kernel_symbols) {
        names_->use_kernel(std::move(options.kernel_symbols));
    } else if (options.kernel && options.profile) {
        names_->load_kernel();  // before sampling starts
    }
}

ProfileBuilder::~ProfileBuilder() = default;

void ProfileBuilder::add(SampleBatch& batch) {
    for (const auto& [cpu, stats] : batch.drains) {
        profile_.add(stats, cpu);
        interval_.add(stats, cpu);
    }
    forget();
    for (const auto& e : batch.entries) {
        if (!e.is_sample) {
            auto& [record, name] = batch.tasks[e.index];
            record.name = name;
            on_task(record);
            continue;
        }
        auto& s = batch.samples[e.index];
        s.restore(batch);
        add(s.sample);
    }
}

void ProfileBuilder::forget() {
    // What is named is kept within bounds: the names of addresses (each process's own) and of
    // frames are dropped when they grow past kMaxNamesKept, and named again as they come.
    if (labels_.size() + frames_.size() > kMaxNamesKept) {
        labels_.clear();
        frames_.clear();
    }
    // Processes gone: once a second, what was known of them goes (AddressNames::forget_gone).
    const auto now = std::chrono::steady_clock::now();
    if (now - forgot_at_ < std::chrono::seconds(1)) return;
    forgot_at_ = now;
    names_->forget_gone();
    if (generations_.size() > kMaxNamesKept || commands_.size() > kMaxNamesKept) {
        // Every name is keyed by a pid's generation: they go together.
        labels_.clear();
        frames_.clear();
        generations_.clear();
        commands_.clear();
    }
}

void ProfileBuilder::on_task(const TaskRecord& r) {
    switch (r.kind) {
        case TaskRecord::Kind::Mapped:
            names_->mapped(r);
            return;
        case TaskRecord::Kind::Exec:
            names_->exec(r.pid);
            commands_[r.pid] = std::string(r.name);
            break;
        case TaskRecord::Kind::Fork:
            names_->forked(r.pid, r.parent);
            if (auto parent = commands_.find(r.parent); parent != commands_.end()) {
                commands_[r.pid] = parent->second;
            } else {
                commands_.erase(r.pid);
            }
            break;
    }
    ++generations_[r.pid];  // what was named under this pid is another program's
}

ProfileBuilder::LabelKey ProfileBuilder::key(pid_t who, std::uint64_t ip) const {
    const auto g = generations_.find(who);
    return {who, g == generations_.end() ? 0 : g->second, ip};
}

void ProfileBuilder::add(const Sample& sample) {
    if (!profiling_) {
        profile_.count(sample);
        interval_.count(sample);
        return;
    }
    // Kernel code is the same in every process; user code is each process's own.
    const pid_t who = sample.pid == 0                     ? 0
                      : sample.mode == SampleMode::Kernel ? -1
                      : sample.mode == SampleMode::User   ? sample.pid
                                                          : -2;
    auto [it, added] = labels_.try_emplace(key(who, sample.ip));
    if (added) it->second = Profile::label(sample, *names_);
    const std::string stack = callchain_ ? stack_of(sample) : std::string{};
    profile_.add(sample, it->second, stack);
    interval_.add(sample, it->second, stack);
    // Code mapped after the map was read is named once it is read again.
    if (it->second.object == "[unknown]") labels_.erase(it);
}

const std::string& ProfileBuilder::frame(const Sample& sample, SampleMode mode, std::uint64_t ip) {
    const pid_t who = mode == SampleMode::Kernel ? -1 : sample.pid;
    auto [it, added] = frames_.try_emplace(key(who, ip));
    if (!added) return it->second;
    auto label = Profile::label(sample.pid, mode, ip, *names_);
    // As add(): code not yet known is named again once it is.
    if (label.object == "[unknown]") {
        frames_.erase(it);
        unknown_frame_ = std::move(label.frame);
        return unknown_frame_;
    }
    it->second = std::move(label.frame);
    return it->second;
}

std::string ProfileBuilder::stack_of(const Sample& sample) {
#if MONITOR_HAVE_LIBDW
    if (unwinder_ && !sample.user_regs.empty()) {
        // The kernel's part of the chain, then the user part unwound.
        unwound_.assign(sample.callchain.begin(), sample.callchain.end());
        unwound_.push_back(PERF_CONTEXT_USER);
        unwinder_->unwind(*names_, sample, unwound_);
        Sample whole = sample;
        whole.callchain = unwound_;
        return fold(whole);
    }
#endif
    return fold(sample);
}

std::string ProfileBuilder::fold(const Sample& sample) {
    // The process's name first, as perf script and stackcollapse-perf.pl put it.
    auto [command, added] = commands_.try_emplace(sample.pid);
    if (added) {
        if (sample.pid == 0) {
            command->second = "[idle]";
        } else if (auto comm = read_text_file(fmt::format("/proc/{}/comm", sample.pid));
                   comm && !comm->empty()) {
            command->second = comm->substr(0, comm->find('\n'));
        } else {
            command->second = fmt::format("[pid {}]", sample.pid);
        }
    }
    // The chain is innermost first, in parts headed by their mode (the kernel's part, then
    // the user part that made the system call); each part's first address is where that mode
    // was, the others are return addresses, named by the call before them.
    struct Frame {
        SampleMode mode;
        std::uint64_t ip;
    };
    std::vector<Frame> frames;
    SampleMode mode = sample.mode;
    bool first = true;
    for (std::uint64_t ip : sample.callchain) {
        if (ip >= PERF_CONTEXT_MAX) {
            mode = ip == PERF_CONTEXT_KERNEL ? SampleMode::Kernel
                   : ip == PERF_CONTEXT_USER ? SampleMode::User
                                             : SampleMode::Unknown;
            first = true;
            continue;
        }
        if (mode == SampleMode::Unknown) continue;  // a guest's or hypervisor's frames
        frames.push_back({mode, first ? ip : ip - 1});
        first = false;
    }
    // A chain the kernel could not make is the sample's own address.
    if (frames.empty()) frames.push_back({sample.mode, sample.ip});
    std::string out = command->second;
    for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
        out += ';';
        out += frame(sample, f->mode, f->ip);
    }
    return out;
}

Profile ProfileBuilder::take_interval() {
    return std::exchange(interval_, Profile(profile_.by_cpu(), profile_.kept_addresses()));
}

}  // namespace monitor::perf
