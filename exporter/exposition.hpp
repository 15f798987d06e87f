// The two formats Prometheus scrapes: the text format 0.0.4 (prometheus-cpp's serializer) and
// OpenMetrics 1.0, chosen by the scraper's Accept header; and gzip when it accepts it.
#pragma once

#include <prometheus/metric_family.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace exporter {

enum class Format { Text, OpenMetrics };

// OpenMetrics when the Accept header lists application/openmetrics-text (with any version
// Prometheus sends, 0.0.1 or 1.0.0) ahead of or instead of text/plain; the text format
// otherwise, as node_exporter does.
Format negotiate(std::string_view accept);
std::string_view content_type(Format f);
std::string render(const std::vector<prometheus::MetricFamily>& families, Format f);

// Whether an Accept-Encoding header accepts gzip (not with q=0).
bool accepts_gzip(std::string_view accept_encoding);
// The gzip stream of `body`; nullopt if zlib failed.
std::optional<std::string> gzip(std::string_view body);

}  // namespace exporter
