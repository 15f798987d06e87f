#include "logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/systemd_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace monitord {

bool stderr_is_journal() {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): at start-up, before any thread
    const char* env = std::getenv("JOURNAL_STREAM");
    if (env == nullptr) return false;
    unsigned long long dev = 0;
    unsigned long long ino = 0;
    if (std::sscanf(env, "%llu:%llu", &dev, &ino) != 2) return false;
    struct stat st {};
    if (::fstat(STDERR_FILENO, &st) < 0) return false;
    return st.st_dev == dev && st.st_ino == ino;
}

void set_log_level(spdlog::level::level_enum level) {
    spdlog::set_level(level);
}

void setup_logging(spdlog::level::level_enum level) {
    std::shared_ptr<spdlog::logger> logger;
    if (stderr_is_journal()) {
        logger = std::make_shared<spdlog::logger>(
            "monitord", std::make_shared<spdlog::sinks::systemd_sink_mt>("monitord"));
        logger->set_pattern("%v");
    } else {
        logger = std::make_shared<spdlog::logger>(
            "monitord", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
        logger->set_pattern("%H:%M:%S.%e %^%l%$: %v");
    }
    spdlog::set_default_logger(logger);
    set_log_level(level);
}

}  // namespace monitord
