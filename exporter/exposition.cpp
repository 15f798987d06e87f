#include "exposition.hpp"

#include <fmt/compile.h>
#include <fmt/format.h>
#include <prometheus/text_serializer.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <sstream>

namespace exporter {
namespace {

std::string lower(std::string_view s) {
    std::string out{s};
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// The entries of a comma-separated header: the media range (lower case) and its q (1 when not
// given).
struct Entry {
    std::string value;
    double q = 1;
};
std::vector<Entry> entries(std::string_view header) {
    std::vector<Entry> out;
    while (!header.empty()) {
        auto comma = header.find(',');
        std::string_view item = header.substr(0, comma);
        header = comma == std::string_view::npos ? std::string_view{} : header.substr(comma + 1);
        Entry e;
        auto semi = item.find(';');
        e.value = lower(trim(item.substr(0, semi)));
        while (semi != std::string_view::npos) {
            item = item.substr(semi + 1);
            semi = item.find(';');
            auto param = trim(item.substr(0, semi));
            if (param.size() > 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=') {
                e.q = std::strtod(std::string{param.substr(2)}.c_str(), nullptr);
            }
        }
        if (!e.value.empty()) out.push_back(std::move(e));
    }
    return out;
}

// Appends `s` with backslashes and newlines escaped, and double quotes when `quote`.
void append_escaped(std::string& out, std::string_view s, bool quote) {
    for (char c : s) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '"' && quote) {
            out += "\\\"";
        } else {
            out += c;
        }
    }
}

void append_number(std::string& out, double v) {
    if (std::isnan(v)) {
        out += "NaN";
    } else if (std::isinf(v)) {
        out += v > 0 ? "+Inf" : "-Inf";
    } else {
        // The shortest text that reads back as the same double.
        fmt::format_to(std::back_inserter(out), FMT_COMPILE("{}"), v);
    }
}

std::string_view type_name(prometheus::MetricType t) {
    switch (t) {
        case prometheus::MetricType::Counter:
            return "counter";
        case prometheus::MetricType::Gauge:
            return "gauge";
        case prometheus::MetricType::Summary:
            return "summary";
        case prometheus::MetricType::Histogram:
            return "histogram";
        default:
            return "unknown";
    }
}

double value_of(const prometheus::MetricFamily& f, const prometheus::ClientMetric& m) {
    switch (f.type) {
        case prometheus::MetricType::Counter:
            return m.counter.value;
        case prometheus::MetricType::Gauge:
            return m.gauge.value;
        default:
            return m.untyped.value;
    }
}

// OpenMetrics 1.0: a counter's family is named without `_total` and its samples with it;
// the exposition ends with "# EOF". Only counters and gauges are made here.
std::string openmetrics(const std::vector<prometheus::MetricFamily>& families) {
    std::string out;
    // Written in place, sample by sample: no string is made per label or number.
    std::size_t samples = 0;
    for (const auto& f : families) samples += f.metric.size();
    out.reserve(samples * 80);
    for (const auto& f : families) {
        std::string_view name = f.name;
        std::string_view suffix;
        if (f.type == prometheus::MetricType::Counter && name.ends_with("_total")) {
            name.remove_suffix(6);
            suffix = "_total";
        }
        out.append("# TYPE ").append(name).append(" ").append(type_name(f.type)).append("\n");
        if (!f.help.empty()) {
            out.append("# HELP ").append(name).append(" ");
            append_escaped(out, f.help, true);
            out += '\n';
        }
        for (const auto& m : f.metric) {
            out.append(name).append(suffix);
            if (!m.label.empty()) {
                out += '{';
                for (std::size_t i = 0; i < m.label.size(); ++i) {
                    if (i > 0) out += ',';
                    out.append(m.label[i].name).append("=\"");
                    append_escaped(out, m.label[i].value, true);
                    out += '"';
                }
                out += '}';
            }
            out += ' ';
            append_number(out, value_of(f, m));
            out += '\n';
        }
    }
    out += "# EOF\n";
    return out;
}

}  // namespace

Format negotiate(std::string_view accept) {
    double openmetrics_q = 0;
    double text_q = 0;
    for (const auto& e : entries(accept)) {
        if (e.value == "application/openmetrics-text") {
            openmetrics_q = std::max(openmetrics_q, e.q);
        } else if (e.value == "text/plain" || e.value == "text/*" || e.value == "*/*") {
            text_q = std::max(text_q, e.q);
        }
    }
    return openmetrics_q > 0 && openmetrics_q >= text_q ? Format::OpenMetrics : Format::Text;
}

std::string_view content_type(Format f) {
    return f == Format::OpenMetrics ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                                    : "text/plain; version=0.0.4; charset=utf-8";
}

std::string render(const std::vector<prometheus::MetricFamily>& families, Format f) {
    if (f == Format::OpenMetrics) return openmetrics(families);
    std::ostringstream out;
    prometheus::TextSerializer{}.Serialize(out, families);
    return out.str();
}

bool accepts_gzip(std::string_view accept_encoding) {
    for (const auto& e : entries(accept_encoding)) {
        if ((e.value == "gzip" || e.value == "*") && e.q > 0) return true;
    }
    return false;
}

namespace {

// One deflate stream per thread, reset for each body: made afresh, its 256 KiB of state would
// be allocated (and faulted in) at every scrape.
class Deflater {
  public:
    Deflater() {
        // 16 + 15 window bits: a gzip header and trailer around the deflate stream. The
        // fastest level: a scrape's CPU matters more than its bytes, and on these repetitive
        // lines level 1 saves nearly as much as the default (a two-CPU scrape: 4,481 bytes,
        // 945 gzipped at level 1, 858 at level 6).
        ok_ = deflateInit2(&z_, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) ==
              Z_OK;
    }
    ~Deflater() {
        if (ok_) deflateEnd(&z_);
    }
    Deflater(const Deflater&) = delete;
    Deflater& operator=(const Deflater&) = delete;

    std::optional<std::string> compress(std::string_view body) {
        if (!ok_ || deflateReset(&z_) != Z_OK) return std::nullopt;
        std::string out(deflateBound(&z_, static_cast<uLong>(body.size())) + 32, '\0');
        z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
        z_.avail_in = static_cast<uInt>(body.size());
        z_.next_out = reinterpret_cast<Bytef*>(out.data());
        z_.avail_out = static_cast<uInt>(out.size());
        const int rc = deflate(&z_, Z_FINISH);
        out.resize(z_.total_out);
        if (rc != Z_STREAM_END) return std::nullopt;
        return out;
    }

  private:
    z_stream z_{};
    bool ok_ = false;
};

}  // namespace

std::optional<std::string> gzip(std::string_view body) {
    thread_local Deflater deflater;
    return deflater.compress(body);
}

}  // namespace exporter
