// The exporter's /metrics body at 2, 64, 256 and 1,024 CPUs (or the sizes given), with the
// default collectors and with every collector, beside the series node_exporter's cpu
// collector sends for the same machine (ten per CPU): the series per CPU, the bytes of the
// text format and of OpenMetrics, and both gzipped as Prometheus asks for them.
//
// The scrape is made up here, as monitord would answer for a machine of that size with both
// sources (sleeping or spinning probes) and a probe per CPU, a watchdog and no standing
// session: the figures of a real machine's scrape, without the machine (the exporter
// benchmark, exporter_bench.py, measures the real pipeline on synthetic /proc trees, where
// monitord runs no probes).
//
//   bench-exporter-body [CPUS...]
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "collectors.hpp"
#include "exposition.hpp"
#include "machine_metrics.hpp"

namespace {

using exporter::CollectorSet;

exporter::Scrape machine(int cpus) {
    exporter::Scrape s;
    s.at = std::chrono::system_clock::now();
    monitor::protocol::DaemonStatus st;
    st.version = "0.1.0";
    st.uptime = 86'400;
    st.probe_mode = "sleep";
    monitor::protocol::WatchdogInfo w;
    w.device = "/dev/watchdog0";
    w.identity = "i6300ESB timer";
    w.armed = true;
    w.timeout = 10;
    w.since_last_pet = 0.1;
    w.pets = 864'000;
    st.watchdog = w;
    monitor::LoadingReport l;
    l.window_seconds = 60;
    // Figures with the digits real ones have.
    auto source = [](const char* name, double load) {
        monitor::SourceLoad sl;
        sl.source = name;
        sl.stats = monitor::LoadStats{load, load * 0.97, load * 0.5, load * 1.3, 60};
        return sl;
    };
    l.machine = {source("probe", 37.125), source("procstat", 36.875)};
    for (int c = 0; c < cpus; ++c) {
        st.cpus.push_back(c);
        st.probes.push_back({c, "running", 2412.5 + c, 86'400u * 10u, 51'234.567 + c, ""});
        const double load = 1.25 + (c * 37 % 97);
        monitor::CpuLoading cl{c, true, {source("probe", load), source("procstat", load + 0.5)}};
        monitor::StateSeconds secs;
        for (std::size_t i = 0; i < monitor::kTimeStateCount; ++i) {
            secs.seconds[i] = 1234.56 * static_cast<double>(i + 1) + c;
        }
        cl.sources[1].state_seconds = secs;
        l.cpus.push_back(cl);
    }
    s.status = st;
    s.loading = l;
    return s;
}

// The series of a body whose labels hold cpu="0".
std::size_t per_cpu_series(const std::string& text) {
    std::size_t n = 0;
    for (std::size_t at = text.find("cpu=\"0\""); at != std::string::npos;
         at = text.find("cpu=\"0\"", at + 1)) {
        ++n;
    }
    return n;
}

double kib(std::size_t bytes) {
    return static_cast<double>(bytes) / 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<int> sizes{2, 64, 256, 1024};
    if (argc > 1) {
        sizes.clear();
        for (int i = 1; i < argc; ++i) {
            char* end = nullptr;
            const long n = std::strtol(argv[i], &end, 10);
            if (end == argv[i] || *end != '\0' || n < 1 || n > 8192) {
                std::fprintf(stderr, "bench-exporter-body: %s: a number of CPUs (1 to 8192)\n",
                             argv[i]);
                return 2;
            }
            sizes.push_back(static_cast<int>(n));
        }
    }
    auto all = CollectorSet::none();
    for (const auto& c : exporter::collectors()) all.set(c.id, true);
    const std::vector<std::pair<std::string, CollectorSet>> sets{
        {"default (" + CollectorSet::defaults().names() + ")", CollectorSet::defaults()},
        {"every collector", all}};

    std::printf("monitord-exporter's /metrics body, both sources, a probe per CPU, a watchdog\n");
    std::printf("(node_exporter's cpu collector: 10 series per CPU)\n\n");
    std::printf("%6s  %-48s %8s %10s %10s %10s %10s\n", "CPUs", "collectors", "per CPU", "text KiB",
                "gzip KiB", "OM KiB", "OM gz KiB");
    for (int cpus : sizes) {
        const auto scrape = machine(cpus);
        for (const auto& [name, set] : sets) {
            const auto families =
                exporter::machine_metrics(scrape, exporter::ExporterFacts{"0.1.0", 1, 0}, set);
            const auto text = exporter::render(families, exporter::Format::Text);
            const auto om = exporter::render(families, exporter::Format::OpenMetrics);
            const auto text_gz = exporter::gzip(text);
            const auto om_gz = exporter::gzip(om);
            std::printf("%6d  %-48s %8zu %10.1f %10.1f %10.1f %10.1f\n", cpus, name.c_str(),
                        per_cpu_series(text), kib(text.size()),
                        text_gz ? kib(text_gz->size()) : 0.0, kib(om.size()),
                        om_gz ? kib(om_gz->size()) : 0.0);
        }
    }
    return 0;
}
