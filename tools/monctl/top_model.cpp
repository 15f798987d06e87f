#include "top_model.hpp"

#include <algorithm>
#include <climits>
#include <string_view>
#include <utility>

#include "views.hpp"

namespace monctl::top {
namespace {

constexpr std::string_view kDefaultSource = "procstat";

// The last second's load of a row, or nullopt.
std::optional<double> last_load(const Row& r) {
    if (r.load == nullptr || !r.load->stats) return std::nullopt;
    return r.load->stats->avg_prev_sec;
}

// The rates of `now`'s events against `before`, the previous read: of the same session when
// it has the same events and has not counted for less time since.
std::vector<EventRate> rates_of(const monitor::protocol::CounterReport& now,
                                const monitor::protocol::CounterReport* before) {
    const bool same_session =
        before != nullptr && before->events.size() == now.events.size() &&
        now.elapsed > before->elapsed &&
        std::equal(now.events.begin(), now.events.end(), before->events.begin(),
                   [](const auto& a, const auto& b) { return a.name == b.name; });
    std::vector<EventRate> out;
    out.reserve(now.events.size());
    for (std::size_t i = 0; i < now.events.size(); ++i) {
        const auto& e = now.events[i];
        EventRate r{e.name, e.value.count, e.value.scaled, e.value.running, 0};
        if (same_session) {
            const double delta = e.value.scaled - before->events[i].value.scaled;
            r.per_second = std::max(0.0, delta) / (now.elapsed - before->elapsed);
        } else if (now.elapsed > 0) {
            r.per_second = e.value.scaled / now.elapsed;
        }
        out.push_back(std::move(r));
    }
    return out;
}

}  // namespace

std::string_view sort_name(SortOrder s) {
    return s == SortOrder::Cpu ? "cpu" : "load";
}

std::string_view task_sort_name(TaskSort s) {
    switch (s) {
        case TaskSort::Load:
            return "load";
        case TaskSort::Cpu:
            return "cpu";
        case TaskSort::Pid:
            return "pid";
        case TaskSort::Name:
            return "name";
        case TaskSort::Unit:
            return "unit";
    }
    return "load";
}

std::vector<const monitor::TaskLoad*> TopModel::task_rows() const {
    std::vector<const monitor::TaskLoad*> out;
    if (!snapshot_ || !snapshot_->loading.tasks) return out;
    for (const auto& t : snapshot_->loading.tasks->top) out.push_back(&t);
    // The chosen column first, then the busiest, then by thread id: one order, whatever the
    // reply's.
    auto busiest = [](const monitor::TaskLoad* a, const monitor::TaskLoad* b) {
        if (a->load != b->load) return a->load > b->load;
        return a->tid < b->tid;
    };
    auto by = [&](auto key) {
        std::ranges::sort(out, [&](const monitor::TaskLoad* a, const monitor::TaskLoad* b) {
            const auto ka = key(*a);
            const auto kb = key(*b);
            if (ka != kb) return ka < kb;
            return busiest(a, b);
        });
    };
    switch (task_sort_) {
        case TaskSort::Load:
            std::ranges::sort(out, busiest);
            break;
        case TaskSort::Cpu:
            by([](const monitor::TaskLoad& t) { return t.cpu; });
            break;
        case TaskSort::Pid:
            by([](const monitor::TaskLoad& t) { return t.pid; });
            break;
        case TaskSort::Name:
            by([](const monitor::TaskLoad& t) { return std::string_view{t.comm}; });
            break;
        case TaskSort::Unit:
            // Tasks of no unit (the kernel's threads) after those of one.
            by([](const monitor::TaskLoad& t) {
                return std::pair{t.unit.empty(), std::string_view{t.unit}};
            });
            break;
    }
    return out;
}

void TopModel::update(Snapshot snapshot) {
    const monitor::protocol::CounterReport* before = nullptr;
    if (snapshot_ && snapshot_->counters && !stale()) before = &*snapshot_->counters;
    rates_ = snapshot.counters ? rates_of(*snapshot.counters, before) : std::vector<EventRate>{};
    snapshot_ = std::move(snapshot);
    lost_reason_.clear();
}

void TopModel::lost(std::string why) {
    lost_reason_ = why.empty() ? std::string{"no reply"} : std::move(why);
}

std::vector<std::string> TopModel::sources() const {
    std::vector<std::string> names;
    if (snapshot_) {
        for (const auto& l : snapshot_->loading.machine) names.push_back(l.source);
    }
    return names;
}

std::string TopModel::source() const {
    const auto names = sources();
    auto has = [&](std::string_view n) { return std::ranges::find(names, n) != names.end(); };
    if (!chosen_source_.empty() && (names.empty() || has(chosen_source_))) return chosen_source_;
    if (names.empty() || has(kDefaultSource)) return std::string{kDefaultSource};
    return names.front();
}

Row TopModel::machine() const {
    Row r{"all", true, -1, nullptr};
    if (snapshot_) r.load = monitor::find_source(snapshot_->loading.machine, source());
    return r;
}

const monitor::CpuContextSample* TopModel::context_sample() const {
    if (!snapshot_ || !snapshot_->loading.context || !snapshot_->loading.context->sample) {
        return nullptr;
    }
    return &*snapshot_->loading.context->sample;
}

std::vector<Row> TopModel::rows() const {
    std::vector<Row> out;
    if (!snapshot_) return out;
    const auto name = source();
    const auto* context = context_sample();
    out.reserve(snapshot_->loading.cpus.size());
    for (const auto& c : snapshot_->loading.cpus) {
        Row r{format_cpu_label(c), c.online, c.cpu, monitor::find_source(c.sources, name)};
        if (context != nullptr) {
            // The context's CPUs are sorted by number.
            auto it = std::ranges::lower_bound(context->cpus, c.cpu, {},
                                               &monitor::CpuContextFigures::cpu);
            if (it != context->cpus.end() && it->cpu == c.cpu) r.context = &*it;
        }
        out.push_back(std::move(r));
    }
    auto by_cpu = [](const Row& a, const Row& b) { return a.cpu < b.cpu; };
    if (sort_ == SortOrder::Cpu) {
        std::ranges::stable_sort(out, by_cpu);
    } else {
        std::ranges::stable_sort(out, [&](const Row& a, const Row& b) {
            const auto la = last_load(a);
            const auto lb = last_load(b);
            if (la.has_value() != lb.has_value()) return la.has_value();
            if (la && *la != *lb) return *la > *lb;
            return by_cpu(a, b);
        });
    }
    return out;
}

void TopModel::clamp_scroll(int rows, int page) {
    scroll_ = std::clamp(scroll_, 0, std::max(0, rows - std::max(page, 0)));
}

void TopModel::set_at(std::optional<WallTime> at) {
    at_ = at ? std::optional{std::chrono::floor<std::chrono::seconds>(*at)} : std::nullopt;
}

void TopModel::history_failed(std::string why) {
    history_error_ = why.empty() ? std::string{"no reply"} : std::move(why);
    at_.reset();
}

bool TopModel::apply(Action a, int page, WallTime now) {
    page = std::max(page, 1);
    if (a == Action::Quit) return false;
    history_error_.clear();
    if (help_ || a == Action::Help) {
        help_ = !help_;
        return true;
    }
    switch (a) {
        case Action::Quit:
        case Action::Help:
            break;
        case Action::NextSource: {
            const auto names = sources();
            if (names.empty()) break;
            auto it = std::ranges::find(names, source());
            chosen_source_ = it == names.end() || ++it == names.end() ? names.front() : *it;
            break;
        }
        case Action::ToggleSort:
            sort_ = sort_ == SortOrder::Cpu ? SortOrder::Load : SortOrder::Cpu;
            break;
        case Action::ToggleUnits:
            units_ = !units_;
            break;
        case Action::ToggleContext:
            context_ = !context_;
            break;
        case Action::ToggleTasks:
            tasks_ = !tasks_;
            break;
        case Action::NextTaskSort:
        case Action::PrevTaskSort: {
            const int step = a == Action::NextTaskSort ? 1 : kTaskSorts - 1;
            task_sort_ = static_cast<TaskSort>((static_cast<int>(task_sort_) + step) % kTaskSorts);
            break;
        }
        case Action::Up:
            scroll_ = std::max(0, scroll_ - 1);
            break;
        case Action::Down:
            scroll_ = scroll_ < INT_MAX ? scroll_ + 1 : scroll_;
            break;
        case Action::PageUp:
            scroll_ = std::max(0, scroll_ - page);
            break;
        case Action::PageDown:
            scroll_ = scroll_ <= INT_MAX - page ? scroll_ + page : INT_MAX;
            break;
        case Action::Home:
            scroll_ = 0;
            break;
        case Action::End:
            scroll_ = INT_MAX;  // the frame brings it back to the last page
            break;
        case Action::Earlier:
        case Action::MuchEarlier:
            set_at(at_.value_or(now) - (a == Action::Earlier ? kStep : kLongStep));
            break;
        case Action::Later:
        case Action::MuchLater:
            if (at_) {
                const auto later = *at_ + (a == Action::Later ? kStep : kLongStep);
                // Within the current second is now.
                set_at(later < std::chrono::floor<std::chrono::seconds>(now) ? std::optional{later}
                                                                             : std::nullopt);
            }
            break;
        case Action::Now:
            at_.reset();
            break;
    }
    return true;
}

}  // namespace monctl::top
