// monitord-exporter between the real monitord and HTTP clients: curl, promtool, and a real
// Prometheus scraping it.
#include <crypt.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>

#include "cgroups.hpp"
#include "daemon_process.hpp"
#include "watchdog_support.hpp"

namespace itest {
namespace {

std::string exporter_bin() {
    const char* v = std::getenv("MONITORD_EXPORTER_BIN");
    return v != nullptr ? v : "/nonexistent";
}

bool have(const std::string& program) {
    return !find_in_path(program).empty();
}

// A loopback TCP socket listening on a port of the kernel's choosing.
struct Listener {
    monitor::UniqueFd fd;
    int port = 0;
};
Listener loopback_listener() {
    Listener l;
    l.fd.reset(::socket(AF_INET, SOCK_STREAM, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int on = 1;
    ::setsockopt(l.fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    EXPECT_EQ(::bind(l.fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(l.fd.get(), 128), 0);
    socklen_t len = sizeof a;
    ::getsockname(l.fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
    l.port = ntohs(a.sin_port);
    return l;
}

int free_port() {
    return loopback_listener().port;  // closed again: free for a moment
}

// The exporter on a socket it gets from its "systemd" (this test), as monitord-exporter.socket
// passes it.
struct Exporter {
    std::unique_ptr<Process> process;
    int port = 0;
    std::string url(const std::string& path = "/metrics") const {
        return "http://127.0.0.1:" + std::to_string(port) + path;
    }
};
Exporter start_exporter(const std::string& monitord_socket,
                        const std::vector<std::string>& args = {}) {
    Exporter e;
    auto l = loopback_listener();
    e.port = l.port;
    SpawnOptions o;
    o.pass_fd = l.fd.get();
    std::vector<std::string> argv{exporter_bin(), "--socket", monitord_socket};
    argv.insert(argv.end(), args.begin(), args.end());
    e.process = Process::start(argv, o);
    return e;  // the listening socket is the exporter's now: requests wait in its backlog
}

struct Http {
    int code = 0;
    std::string body;
    std::string headers;
};
// curl ARGS URL: the status code, the body and the response headers.
Http get(const std::string& url, std::vector<std::string> args = {}) {
    ScratchDir dir("curl");
    static const std::string curl = find_in_path("curl");
    std::vector<std::string> argv{curl,         "-sS",
                                  "--max-time", "10",
                                  "-D",         (dir.path() / "headers").string(),
                                  "-o",         (dir.path() / "body").string(),
                                  "-w",         "%{http_code}"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(url);
    auto r = run(argv, {}, 15s);
    Http h;
    h.code = std::atoi(r.out.c_str());
    std::ifstream b(dir.path() / "body", std::ios::binary);
    std::stringstream bs;
    bs << b.rdbuf();
    h.body = bs.str();
    std::ifstream hd(dir.path() / "headers");
    std::stringstream hs;
    hs << hd.rdbuf();
    h.headers = hs.str();
    return h;
}

// The samples of a text exposition: "name{labels}" -> value.
std::map<std::string, double> samples(const std::string& text) {
    std::map<std::string, double> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        auto space = line.rfind(' ');
        out[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
    }
    return out;
}

std::string cpu_seconds(int cpu, const char* mode) {
    return "monitord_cpu_seconds_total{cpu=\"" + std::to_string(cpu) + "\",mode=\"" + mode + "\"}";
}

constexpr const char* kStates[] = {"user",   "nice",  "system", "irq",        "softirq",
                                   "iowait", "steal", "guest",  "guest_nice", "idle"};

class ExporterTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!std::filesystem::exists(exporter_bin())) GTEST_SKIP() << "MONITORD_EXPORTER_BIN unset";
        daemon_ = Daemon::start({.args = {"--probe", "spin"}});  // the probe source too
        ASSERT_TRUE(daemon_);
        ASSERT_TRUE(daemon_->wait_samples(1));
        exporter_ = start_exporter(daemon_->socket());
    }
    std::unique_ptr<Daemon> daemon_;
    Exporter exporter_;
};

TEST_F(ExporterTest, EveryCpuHasItsTimeByStateAndTheLoadingAndProbes) {
    auto h = get(exporter_.url());
    ASSERT_EQ(h.code, 200) << h.body << exporter_.process->log();
    EXPECT_NE(h.headers.find("text/plain; version=0.0.4"), std::string::npos) << h.headers;
    auto s = samples(h.body);
    EXPECT_EQ(s["monitord_up"], 1);
    const auto cpus = daemon_->call("GetStatus")["cpus"];
    ASSERT_FALSE(cpus.empty());
    for (int cpu : cpus) {
        double total = 0;
        for (const char* state : kStates) {
            ASSERT_TRUE(s.contains(cpu_seconds(cpu, state))) << cpu_seconds(cpu, state);
            EXPECT_GE(s[cpu_seconds(cpu, state)], 0);
            total += s[cpu_seconds(cpu, state)];
        }
        // At least the one second monitord has measured, and no more than it has run.
        EXPECT_GE(total, 0.5) << "cpu" << cpu;
        EXPECT_LE(total, s["monitord_load_window_seconds"] + 30) << "cpu" << cpu;
        const std::string id = std::to_string(cpu);
        for (const char* source : {"probe", "procstat"}) {
            const auto key =
                "monitord_cpu_load_window_max_ratio{cpu=\"" + id + "\",source=\"" + source + "\"}";
            ASSERT_TRUE(s.contains(key)) << key;
            EXPECT_GE(s[key], 0);
            EXPECT_LE(s[key], 1);
        }
    }
    // The default collectors: each CPU's last second and its probe's details are off.
    EXPECT_EQ(h.body.find("monitord_cpu_load_ratio{"), std::string::npos);
    EXPECT_EQ(h.body.find("monitord_probe_state{"), std::string::npos);
    EXPECT_EQ((s["monitord_probes{state=\"running\"}"]), static_cast<double>(cpus.size()));
    EXPECT_EQ((s["monitord_probes{state=\"failed\"}"]), 0);
    EXPECT_EQ(s["monitord_cpus_online"], static_cast<double>(cpus.size()));
    // --watchdog none: no watchdog series.
    EXPECT_EQ(h.body.find("monitord_watchdog_armed"), std::string::npos);
}

TEST_F(ExporterTest, CpuTimeGrowsWithTheTimeThatPassed) {
    auto first = samples(get(exporter_.url()).body);
    const auto started = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(3s);
    auto second = samples(get(exporter_.url()).body);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const auto cpus = daemon_->call("GetStatus")["cpus"];
    for (int cpu : cpus) {
        double grew = 0;
        for (const char* state : kStates) {
            const auto key = cpu_seconds(cpu, state);
            EXPECT_GE(second[key], first[key]) << key << " went back";
            grew += second[key] - first[key];
        }
        // Whole ticks of about a second each: within a tick of the time that passed.
        EXPECT_NEAR(grew, elapsed, 1.2) << "cpu" << cpu;
    }
}

// The CPUs' context: what is read now from the first scrape, the rates once monitord has read
// twice (a second after the first scrape asked); each CPU's with --collector.cpu_context.
TEST_F(ExporterTest, TheCpusContextFromTheSecondReading) {
    auto e = start_exporter(daemon_->socket(), {"--collector.cpu_context"});
    auto s = samples(get(e.url()).body);
    ASSERT_EQ(s["monitord_up"], 1) << e.process->log();
    std::string body;
    for (int i = 0; i < 30 && !s.contains("monitord_interrupts_per_second"); ++i) {
        std::this_thread::sleep_for(200ms);
        body = get(e.url()).body;
        s = samples(body);
    }
    ASSERT_TRUE(s.contains("monitord_interrupts_per_second")) << body;
    EXPECT_GE(s["monitord_tasks_running"], 1) << "the scrape's own reader runs";
    EXPECT_GT(s["monitord_interrupts_per_second"], 0) << "a timer ticks somewhere";
    EXPECT_NE(body.find("monitord_interrupt_source_per_second{source="), std::string::npos) << body;
    if (std::filesystem::exists("/proc/pressure/cpu")) {
        EXPECT_TRUE(s.contains("monitord_cpu_pressure_ratio")) << body;
        const auto avg10 = "monitord_cpu_pressure_avg_ratio{window=\"10s\"}";
        EXPECT_TRUE(s.contains(avg10)) << body;
        EXPECT_LE(s[avg10], 1) << "a ratio, not the kernel's percent";
    }
    double per_cpu = 0;
    const auto cpus = daemon_->call("GetStatus")["cpus"];
    for (int cpu : cpus) {
        const auto key = "monitord_cpu_interrupts_per_second{cpu=\"" + std::to_string(cpu) + "\"}";
        ASSERT_TRUE(s.contains(key)) << key << "\n" << body;
        per_cpu += s[key];
    }
    // The machine's rate is the CPUs' sum, with the machine-wide rows (ERR, MIS) beside.
    EXPECT_NEAR(per_cpu, s["monitord_interrupts_per_second"],
                0.01 * s["monitord_interrupts_per_second"] + 1);
}

// The collectors switched as node_exporter's are: each CPU's last second and its probe on,
// the CPU time off (and not asked of monitord).
TEST_F(ExporterTest, CollectorsSwitchedOnAndOff) {
    auto e = start_exporter(daemon_->socket(),
                            {"--collector.cpu_load", "--collector.probe_cpu", "--no-collector.cpu",
                             "--collector.units", "--collector.units.limit", "2"});
    auto h = get(e.url());
    ASSERT_EQ(h.code, 200) << h.body << e.process->log();
    auto s = samples(h.body);
    EXPECT_EQ(s["monitord_up"], 1);
    EXPECT_EQ(h.body.find("monitord_cpu_seconds_total"), std::string::npos) << h.body;
    const auto cpus = daemon_->call("GetStatus")["cpus"];
    for (int cpu : cpus) {
        const std::string id = std::to_string(cpu);
        EXPECT_TRUE(s.contains("monitord_cpu_load_ratio{cpu=\"" + id + "\",source=\"probe\"}"));
        EXPECT_EQ((s["monitord_probe_state{cpu=\"" + id + "\",state=\"running\"}"]), 1);
    }
    EXPECT_NE(e.process->log().find(
                  "collectors load,cpu_load,probes,probe_cpu,watchdog,perf,units,context"),
              std::string::npos)
        << e.process->log();
    // This machine's units: how many, from which accounting, and at most the 2 busiest.
    const auto units = std::ranges::count_if(
        s, [](const auto& kv) { return kv.first.starts_with("monitord_unit_cpu_ratio{"); });
    EXPECT_LE(units, 2) << h.body;
    EXPECT_NE(h.body.find("monitord_units{accounting=\"cgroup"), std::string::npos) << h.body;

    // From none: the always-there metrics and the one named.
    auto only =
        start_exporter(daemon_->socket(), {"--collector.disable-defaults", "--collector.probes"});
    auto o = get(only.url());
    ASSERT_EQ(o.code, 200) << o.body << only.process->log();
    for (const auto& [name, value] : samples(o.body)) {
        EXPECT_TRUE(name.starts_with("monitord_probes{") || name.starts_with("monitord_up") ||
                    name.starts_with("monitord_exporter_") ||
                    name.starts_with("monitord_build_info") ||
                    name.starts_with("monitord_probe_fallback") ||
                    name.starts_with("monitord_start_time_seconds") ||
                    name.starts_with("monitord_cpus_online"))
            << name;
    }
    EXPECT_NE(o.body.find("monitord_probes{state=\"running\"}"), std::string::npos) << o.body;
}

// promtool reads the text format only; Prometheus itself reads the OpenMetrics one (below).
TEST_F(ExporterTest, PromtoolFindsTheScrapeClean) {
    if (!have("promtool"))
        GTEST_SKIP() << "promtool (Debian's prometheus package) is not installed";
    auto r = run({"/bin/sh", "-c", "curl -sS " + exporter_.url() + " | promtool check metrics"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.out + r.err, "") << "promtool has remarks";
}

TEST_F(ExporterTest, OpenMetricsAndGzipWhenAsked) {
    auto om = get(exporter_.url(), {"-H", "Accept: application/openmetrics-text; version=1.0.0"});
    ASSERT_EQ(om.code, 200);
    EXPECT_NE(om.headers.find("application/openmetrics-text; version=1.0.0"), std::string::npos)
        << om.headers;
    EXPECT_TRUE(om.body.ends_with("# EOF\n"));
    EXPECT_NE(om.body.find("# TYPE monitord_cpu_seconds counter\n"), std::string::npos);

    auto z = get(exporter_.url(), {"-H", "Accept-Encoding: gzip"});
    ASSERT_EQ(z.code, 200);
    EXPECT_NE(z.headers.find("Content-Encoding: gzip"), std::string::npos) << z.headers;
    ASSERT_GE(z.body.size(), 2u);
    EXPECT_EQ(static_cast<unsigned char>(z.body[0]), 0x1f);  // the gzip magic
    EXPECT_EQ(static_cast<unsigned char>(z.body[1]), 0x8b);
    auto plain = get(exporter_.url(), {"--compressed"});  // curl asks for gzip and inflates
    EXPECT_EQ(samples(plain.body)["monitord_up"], 1);
    EXPECT_LT(z.body.size(), plain.body.size());
}

TEST_F(ExporterTest, OtherPathsAre404AndOtherMethods405) {
    auto missing = get(exporter_.url("/metricz"));
    EXPECT_EQ(missing.code, 404);
    EXPECT_NE(missing.body.find("/metrics"), std::string::npos) << "says where the metrics are";
    EXPECT_EQ(get(exporter_.url("/")).code, 200);
    for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS", "PATCH"}) {
        auto r = get(exporter_.url(), {"-X", method, "--data", "x=1"});
        EXPECT_EQ(r.code, 405) << method;
        EXPECT_NE(r.headers.find("Allow: GET, HEAD"), std::string::npos) << method << r.headers;
    }
    auto head = get(exporter_.url(), {"--head"});  // curl writes the headers as the body
    EXPECT_EQ(head.code, 200);
    EXPECT_NE(head.headers.find("Content-Length: "), std::string::npos) << head.headers;
    EXPECT_EQ(head.body.find("monitord_up"), std::string::npos) << "HEAD has no body";
    EXPECT_TRUE(exporter_.process->alive());
}

TEST_F(ExporterTest, MonitordDownIsUpZeroAndItsReturnIsSeen) {
    ASSERT_EQ(samples(get(exporter_.url()).body)["monitord_up"], 1);
    const std::string socket = daemon_->socket();
    ASSERT_EQ(daemon_->stop(SIGTERM), 0);
    auto down = get(exporter_.url());
    EXPECT_EQ(down.code, 200) << "the exporter still answers";
    auto s = samples(down.body);
    EXPECT_EQ(s["monitord_up"], 0);
    EXPECT_EQ(s["monitord_exporter_scrape_errors_total"], 1);
    EXPECT_EQ(down.body.find("monitord_cpu_seconds_total"), std::string::npos)
        << "no stale figures";

    Daemon::Options o;
    o.socket = socket;
    auto again = Daemon::start(o);
    ASSERT_TRUE(again);
    ASSERT_TRUE(again->wait_samples(1));
    auto up = samples(get(exporter_.url()).body);
    EXPECT_EQ(up["monitord_up"], 1);
    EXPECT_TRUE(up.contains(cpu_seconds(0, "idle")));
}

// monitord stopped (SIGSTOP): each scrape waits for --timeout, and nothing else waits for
// it. Three scrapes at once end together, after one timeout; the index page is answered
// meanwhile.
TEST(ExporterStalledMonitord, HoldsUpNoOtherRequest) {
    if (!std::filesystem::exists(exporter_bin())) GTEST_SKIP() << "MONITORD_EXPORTER_BIN unset";
    auto d = Daemon::start();
    ASSERT_TRUE(d);
    auto e = start_exporter(d->socket(), {"--timeout", "3"});
    ASSERT_EQ(get(e.url()).code, 200) << e.process->log();  // connected to monitord
    ASSERT_EQ(::kill(d->pid(), SIGSTOP), 0);
    using Clock = std::chrono::steady_clock;
    const auto started = Clock::now();
    std::vector<std::thread> scrapers;
    std::vector<Http> scraped(3);
    std::vector<double> took(3);
    for (std::size_t i = 0; i < scraped.size(); ++i) {
        scrapers.emplace_back([&, i] {
            scraped[i] = get(e.url());
            took[i] = std::chrono::duration<double>(Clock::now() - started).count();
        });
    }
    std::this_thread::sleep_for(300ms);  // the scrapes are waiting
    const auto asked = Clock::now();
    auto index = get(e.url("/"));
    const double index_took = std::chrono::duration<double>(Clock::now() - asked).count();
    for (auto& t : scrapers) t.join();
    ::kill(d->pid(), SIGCONT);
    EXPECT_EQ(index.code, 200);
    EXPECT_LT(index_took, 1.0) << "the index page waited for monitord";
    for (std::size_t i = 0; i < scraped.size(); ++i) {
        EXPECT_EQ(scraped[i].code, 200) << e.process->log();
        EXPECT_EQ(samples(scraped[i].body)["monitord_up"], 0);
        EXPECT_LT(took[i], 5.5) << "scrape " << i << " waited for another's timeout";
    }
    std::printf(
        "monitord stopped: the index page in %.3f s; three scrapes in %.2f, %.2f and "
        "%.2f s (--timeout 3)\n",
        index_took, took[0], took[1], took[2]);
    // And monitord back: answered again.
    Http h;
    for (int i = 0; i < 20 && samples(h.body)["monitord_up"] != 1; ++i) {
        h = get(e.url());
        if (samples(h.body)["monitord_up"] != 1) std::this_thread::sleep_for(200ms);
    }
    EXPECT_EQ(samples(h.body)["monitord_up"], 1) << e.process->log();
    EXPECT_EQ(e.process->stop(SIGTERM), 0) << e.process->log();
}

// Connections that send half a request and then nothing, 4,096 of them from one address (as
// many as the exporter holds at a time): all but 64 are closed at once, and a scraper at
// another address is answered within a second.
TEST_F(ExporterTest, SlowConnectionsFromOneAddressLeaveRoomForOthers) {
    constexpr int kSlow = 4096;
    rlimit l{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &l), 0);
    if (l.rlim_max < kSlow + 200) GTEST_SKIP() << "the descriptor limit is " << l.rlim_max;
    l.rlim_cur = std::max<rlim_t>(l.rlim_cur, kSlow + 200);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &l), 0);
    std::vector<monitor::UniqueFd> slow;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(exporter_.port));
    const std::string half = "GET /metrics HTTP/1.1\r\nHost: slow\r\n";
    for (int i = 0; i < kSlow; ++i) {
        monitor::UniqueFd fd{::socket(AF_INET, SOCK_STREAM, 0)};
        ASSERT_TRUE(fd);
        ASSERT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << i;
        ::send(fd.get(), half.data(), half.size(), MSG_NOSIGNAL);  // may find it closed
        slow.push_back(std::move(fd));
    }
    // From 127.0.0.2, another address of the loopback.
    const auto asked = std::chrono::steady_clock::now();
    auto h = get(exporter_.url(), {"--interface", "127.0.0.2"});
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
    EXPECT_EQ(h.code, 200) << exporter_.process->log();
    EXPECT_EQ(samples(h.body)["monitord_up"], 1);
    EXPECT_LT(took, 1.0);
    // The slow ones the exporter closed read as ended; those it keeps would block.
    int open = 0;
    for (const auto& fd : slow) {
        char c = 0;
        if (::recv(fd.get(), &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN) ++open;
    }
    EXPECT_LE(open, 64);
    EXPECT_GE(open, 1);
    std::printf(
        "%d slow connections from 127.0.0.1: %d kept open; a scrape from 127.0.0.2 took "
        "%.3f s\n",
        kSlow, open, took);
}

// A key and a self-signed certificate for 127.0.0.1 in `dir`, made by openssl; false without it.
bool make_certificate(const std::filesystem::path& dir) {
    if (!have("openssl")) return false;
    auto r = run({find_in_path("openssl"), "req", "-x509", "-newkey", "ec", "-pkeyopt",
                  "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                  "/CN=monitord-exporter test", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
                  (dir / "server.key").string(), "-out", (dir / "server.crt").string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0;
}

std::string bcrypt(const std::string& password) {
    char setting[CRYPT_GENSALT_OUTPUT_SIZE];
    EXPECT_NE(crypt_gensalt_rn("$2y$", 5, nullptr, 0, setting, sizeof setting), nullptr);
    crypt_data data{};
    const char* h = crypt_r(password.c_str(), setting, &data);
    return h != nullptr ? h : "";
}

// --web.config.file in exporter-toolkit's format: TLS, and basic authentication as curl sees it.
TEST(ExporterWebConfig, TlsAndBasicAuthAsCurlSeesThem) {
    if (!std::filesystem::exists(exporter_bin())) GTEST_SKIP() << "MONITORD_EXPORTER_BIN unset";
    ScratchDir dir("web-config");
    if (!make_certificate(dir.path())) GTEST_SKIP() << "openssl is not installed";
    std::ofstream(dir.path() / "web.yml") << "tls_server_config:\n"
                                             "  cert_file: server.crt\n"
                                             "  key_file: server.key\n"
                                             "  min_version: TLS13\n"
                                             "http_server_config:\n"
                                             "  headers:\n"
                                             "    X-Frame-Options: deny\n"
                                             "basic_auth_users:\n"
                                             "  prometheus: '"
                                          << bcrypt("scrape-me") << "'\n";
    auto d = Daemon::start();
    ASSERT_TRUE(d);
    auto e = start_exporter(d->socket(), {"--web.config.file", (dir.path() / "web.yml").string()});
    const std::string https = "https://127.0.0.1:" + std::to_string(e.port) + "/metrics";
    const std::string ca = (dir.path() / "server.crt").string();

    auto h = get(https, {"--cacert", ca});
    EXPECT_EQ(h.code, 401) << h.body << e.process->log();
    EXPECT_NE(h.headers.find("WWW-Authenticate: Basic realm=\"monitord-exporter\""),
              std::string::npos)
        << h.headers;
    EXPECT_NE(h.headers.find("X-Frame-Options: deny"), std::string::npos) << h.headers;
    EXPECT_EQ(h.body.find("monitord_up"), std::string::npos);

    h = get(https, {"--cacert", ca, "--user", "prometheus:scrape-you"});
    EXPECT_EQ(h.code, 401);
    h = get(https, {"--cacert", ca, "--user", "grafana:scrape-me"});
    EXPECT_EQ(h.code, 401);

    for (int i = 0; i < 2; ++i) {  // the second from what the exporter remembers
        h = get(https, {"--cacert", ca, "--user", "prometheus:scrape-me"});
        EXPECT_EQ(h.code, 200) << e.process->log();
        EXPECT_EQ(samples(h.body)["monitord_up"], 1);
        EXPECT_NE(h.headers.find("X-Frame-Options: deny"), std::string::npos) << h.headers;
    }

    // Not over plain HTTP, nor below the configured version, nor to a client that does not
    // trust the certificate.
    h = get("http://127.0.0.1:" + std::to_string(e.port) + "/metrics",
            {"--user", "prometheus:scrape-me"});
    EXPECT_NE(h.code, 200);
    h = get(https, {"--cacert", ca, "--tls-max", "1.2", "--user", "prometheus:scrape-me"});
    EXPECT_EQ(h.code, 0) << "TLS 1.2 was accepted below min_version TLS13";
    h = get(https, {"--user", "prometheus:scrape-me"});
    EXPECT_EQ(h.code, 0) << "curl trusted a self-signed certificate";
    EXPECT_TRUE(e.process->alive()) << e.process->log();
}

TEST(ExporterWebConfig, ABadFileStopsTheStartAndIsNamed) {
    if (!std::filesystem::exists(exporter_bin())) GTEST_SKIP() << "MONITORD_EXPORTER_BIN unset";
    ScratchDir dir("web-config");
    const auto file = (dir.path() / "web.yml").string();
    std::ofstream(file) << "tls_server_config:\n  cert_file: missing.crt\n  key_file: k\n";
    auto r = run({exporter_bin(), "--listen", "127.0.0.1:0", "--web.config.file", file}, {}, 10s);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(file + ":2: tls_server_config.cert_file: cannot read " +
                         (dir.path() / "missing.crt").string()),
              std::string::npos)
        << r.err;
    r = run({exporter_bin(), "--listen", "127.0.0.1:0", "--web.config.file", file + ".none"}, {},
            10s);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(file + ".none"), std::string::npos) << r.err;

    // A key that does not belong to the certificate: libmicrohttpd's refusal, said as such.
    if (make_certificate(dir.path())) {
        std::filesystem::rename(dir.path() / "server.key", dir.path() / "first.key");
        ASSERT_TRUE(make_certificate(dir.path()));
        std::ofstream(file) << "tls_server_config:\n  cert_file: server.crt\n"
                               "  key_file: first.key\n";
        r = run({exporter_bin(), "--listen", "127.0.0.1:0", "--web.config.file", file}, {}, 10s);
        EXPECT_EQ(r.exit_code, 1);
        EXPECT_NE(r.err.find("could not start TLS"), std::string::npos) << r.err;
    }
}

TEST(ExporterCommandLine, BadListenAddressesAreNamed) {
    if (!std::filesystem::exists(exporter_bin())) GTEST_SKIP() << "MONITORD_EXPORTER_BIN unset";
    auto r = run({exporter_bin(), "--listen", "localhost"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("\"localhost\" has no port"), std::string::npos) << r.err;
    r = run({exporter_bin(), "--listen", "127.0.0.1:http-ish"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("127.0.0.1:http-ish"), std::string::npos) << r.err;
    r = run({exporter_bin(), "--bogus"});
    EXPECT_EQ(r.exit_code, 2);
}

TEST(ExporterCommandLine, ACollectorNamedBothWaysOrUnknownIsAUsageError) {
    if (!std::filesystem::exists(exporter_bin())) GTEST_SKIP() << "MONITORD_EXPORTER_BIN unset";
    auto r = run({exporter_bin(), "--collector.cpu", "--no-collector.cpu"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--collector.cpu and --no-collector.cpu both given"), std::string::npos)
        << r.err;
    r = run({exporter_bin(), "--collector.cpufreq"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--collector.cpufreq"), std::string::npos) << r.err;
    // A limit for a collector that is off, or out of its range.
    r = run({exporter_bin(), "--collector.units.limit", "5"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--collector.units.limit with the units collector off: add "
                         "--collector.units"),
              std::string::npos)
        << r.err;
    r = run({exporter_bin(), "--collector.units", "--collector.units.limit", "1001"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--collector.units.limit"), std::string::npos) << r.err;
    r = run({exporter_bin(), "--help"});
    EXPECT_EQ(r.exit_code, 0);
    for (const char* flag : {"--collector.cpu_load", "--no-collector.perf", "disable-defaults"}) {
        EXPECT_NE(r.out.find(flag), std::string::npos) << flag << " in\n" << r.out;
    }
}

TEST(ExporterCommandLine, ListensWhereToldWithoutSystemd) {
    if (!std::filesystem::exists(exporter_bin())) GTEST_SKIP() << "MONITORD_EXPORTER_BIN unset";
    auto d = Daemon::start();
    ASSERT_TRUE(d);
    const int port = free_port();
    auto p = Process::start(
        {exporter_bin(), "--listen", "127.0.0.1:" + std::to_string(port), "--socket", d->socket()});
    Http h;
    for (int i = 0; i < 50 && h.code != 200; ++i) {
        std::this_thread::sleep_for(100ms);
        h = get("http://127.0.0.1:" + std::to_string(port) + "/metrics");
    }
    EXPECT_EQ(h.code, 200) << p->log();
    EXPECT_EQ(samples(h.body)["monitord_up"], 1);
    EXPECT_EQ(p->stop(SIGTERM), 0) << p->log();
}

// The cgroup a Prometheus test counts with a standing session, or why there is none.
struct CountedCgroup {
    std::unique_ptr<CgroupDir> dir;
    std::string relative;  // below kCgroupRoot, as monitord.conf names it
    std::string why_not;
};

CountedCgroup make_counted_cgroup() {
    CountedCgroup c;
    if (::geteuid() != 0) {
        c.why_not = "counting a cgroup needs root";
        return c;
    }
    const fs::path mount = cgroup2_mount();
    if (mount.empty()) {
        c.why_not = "cgroup2 is not mounted";
        return c;
    }
    if (auto why = perf_event_off_cgroup2(); !why.empty()) {
        c.why_not = why;
        return c;
    }
    if (mount != kCgroupRoot && mount.parent_path() != kCgroupRoot) {
        c.why_not = "cgroup2 is mounted at " + mount.string() + ", outside " + kCgroupRoot.string();
        return c;
    }
    auto dir = std::make_unique<CgroupDir>(
        mount / ("monitord-exporter-test-" + std::to_string(::getpid())), own_cgroup(mount));
    if (dir->error() != 0) {
        c.why_not = "cannot make a cgroup: " + std::string{std::strerror(dir->error())};
        return c;
    }
    c.relative = fs::relative(dir->path(), kCgroupRoot).string();
    c.dir = std::move(dir);
    return c;
}

// A real Prometheus scrapes the exporter every second; its rate() of the CPU time tells a
// CPU this test keeps busy from an idle one, and the rate of the task clock that a standing
// session counts in the busy process's cgroup is that CPU's busy time.
TEST_F(ExporterTest, PrometheusSeesTheBusyCpuBusyTheIdleOneIdleAndTheStandingSession) {
    if (!have("prometheus")) GTEST_SKIP() << "prometheus (Debian's package) is not installed";
    const auto cpus = daemon_->call("GetStatus")["cpus"];
    if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs";
    const int busy_cpu = cpus.back();
    const int idle_cpu = cpus.front();

    // The shipped rules and dashboard (etc/prometheus, etc/grafana: scripts/mixin).
    const char* prometheus_dir = std::getenv("MONITORD_PROMETHEUS_DIR");
    const char* grafana_dir = std::getenv("MONITORD_GRAFANA_DIR");
    ASSERT_TRUE(prometheus_dir != nullptr && grafana_dir != nullptr)
        << "MONITORD_PROMETHEUS_DIR and MONITORD_GRAFANA_DIR unset (meson sets them)";
    const auto dashboard = nlohmann::json::parse(
        std::ifstream(std::filesystem::path{grafana_dir} / "monitord.json"), nullptr, false);
    ASSERT_TRUE(dashboard.is_object()) << grafana_dir << "/monitord.json";

    // monitord again, petting a watchdog (a FIFO in its place), with a standing session
    // counting the cgroup of the busy process.
    ScratchDir wd_dir{ScratchDir::Everyone};
    FifoWatchdog watchdog(wd_dir.path());
    Daemon::Options options;
    options.no_watchdog = false;
    options.args = {"--watchdog", watchdog.path()};
    ScratchDir conf_dir{ScratchDir::Everyone};
    auto counted = make_counted_cgroup();
    if (counted.dir) {
        const auto conf = conf_dir / "monitord.conf";
        test_support::write_file(conf,
                                 "[[counters]]\nname = \"spin\"\n"
                                 "events = \"perf::TASK-CLOCK\"\nmetrics = \"sched\"\n"
                                 "target = \"cgroup\"\n"
                                 "cgroup = \"" +
                                     counted.relative + "\"\n");
        options.args.insert(options.args.end(), {"--config", conf.string()});
    } else {
        std::printf("no standing session in this run: %s\n", counted.why_not.c_str());
    }
    exporter_ = {};
    daemon_ = Daemon::start(options);
    ASSERT_TRUE(daemon_);
    ASSERT_TRUE(daemon_->wait_samples(1));
    exporter_ = start_exporter(daemon_->socket());

    ScratchDir dir("prometheus");
    const int port = free_port();
    {
        std::ofstream cfg(dir.path() / "prometheus.yml");
        cfg << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            << "rule_files:\n  - " << prometheus_dir << "/monitord-rules.yml\n  - "
            << prometheus_dir << "/monitord-alerts.yml\n"
            << "scrape_configs:\n  - job_name: monitord\n    static_configs:\n"
            << "      - targets: ['127.0.0.1:" << exporter_.port << "']\n";
    }
    auto prometheus = Process::start({find_in_path("prometheus"),
                                      "--config.file=" + (dir.path() / "prometheus.yml").string(),
                                      "--storage.tsdb.path=" + (dir.path() / "data").string(),
                                      "--web.listen-address=127.0.0.1:" + std::to_string(port)});
    // A process of its own, so that its cgroup holds nothing else. Its priority is raised,
    // as the idle probes' SCHED_IDLE counts only within their own autogroup (the test's).
    auto spinner = spin_at_top_priority(counted.dir.get());
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(busy_cpu, &one);
    ASSERT_EQ(::sched_setaffinity(spinner->pid(), sizeof one, &one), 0) << std::strerror(errno);

    const std::string api = "http://127.0.0.1:" + std::to_string(port) + "/api/v1/query";
    // One vector of samples by the value of `label`.
    auto query = [&](const std::string& q, const std::string& label) {
        std::map<std::string, double> out;
        auto h = get(api, {"-G", "--data-urlencode", "query=" + q});
        if (h.code != 200) return out;
        auto j = nlohmann::json::parse(h.body, nullptr, false);
        if (!j.is_object() || j["status"] != "success") return out;
        for (const auto& r : j["data"]["result"]) {
            out[r["metric"].value(label, "")] = std::stod(r["value"][1].get<std::string>());
        }
        return out;
    };
    const std::string cpu_query =
        "sum by (cpu) (rate(monitord_cpu_seconds_total{mode!~\"idle|iowait\"}[6s]))";
    const std::string session_query =
        "rate(monitord_perf_events_total{session=\"spin\",event=\"perf::TASK-CLOCK\"}[6s]) / 1e9";
    const std::string busy_label = std::to_string(busy_cpu);
    const std::string idle_label = std::to_string(idle_cpu);
    std::map<std::string, double> busy, session;
    // Prometheus needs a few seconds to start and a few scrapes for a rate. It asks for
    // OpenMetrics first: the rates exist only if it could read that format.
    for (int i = 0; i < 40; ++i) {
        std::this_thread::sleep_for(1s);
        if (i < 8) continue;
        busy = query(cpu_query, "cpu");
        if (counted.dir) session = query(session_query, "session");
        if (busy.contains(busy_label) && busy.contains(idle_label) && busy[busy_label] > 0.9 &&
            (!counted.dir || session["spin"] > 0.9)) {
            break;
        }
    }
    ASSERT_TRUE(busy.contains(busy_label)) << prometheus->log();
    std::printf("rate of busy CPU time: cpu%d %.3f, cpu%d %.3f\n", busy_cpu, busy[busy_label],
                idle_cpu, busy[idle_label]);
    EXPECT_GT(busy[busy_label], 0.9);
    EXPECT_LT(busy[idle_label], 0.2);
    // node_exporter's own recording rules (node-mixin's instance:node_num_cpu:sum and
    // instance:node_cpu_utilisation:rate5m), with only the metric's name and the range
    // changed: the label and mode names are node_exporter's.
    const auto num_cpu = query(
        "count without (cpu, mode) (monitord_cpu_seconds_total{job=\"monitord\",mode=\"idle\"})",
        "job");
    const auto utilisation = query(
        "1 - avg without (cpu) (sum without (mode) (rate(monitord_cpu_seconds_total"
        "{job=\"monitord\", mode=~\"idle|iowait|steal\"}[6s])))",
        "job");
    ASSERT_TRUE(num_cpu.contains("monitord")) << prometheus->log();
    ASSERT_TRUE(utilisation.contains("monitord")) << prometheus->log();
    const auto n = static_cast<double>(cpus.size());
    std::printf("node-mixin's rules on monitord: %g CPUs, utilisation %.3f\n",
                num_cpu.at("monitord"), utilisation.at("monitord"));
    EXPECT_EQ(num_cpu.at("monitord"), n);
    // The spinner's CPU busy, the others about idle.
    EXPECT_GT(utilisation.at("monitord"), 0.9 / n);
    EXPECT_LT(utilisation.at("monitord"), (1.0 + 0.2 * (n - 1)) / n);
    if (counted.dir) {
        ASSERT_TRUE(session.contains("spin")) << prometheus->log() << daemon_->log();
        std::printf("rate of the standing session's task clock: %.3f CPUs\n", session["spin"]);
        EXPECT_NEAR(session["spin"], busy[busy_label], 0.1);
        // The shipped metric group asked for by the table, exported: the CPUs its cgroup kept
        // busy over the last second, which the task clock's rate says too.
        const auto utilized =
            query("monitord_perf_metric{session=\"spin\",metric=\"cpus_utilized\"}", "session");
        ASSERT_TRUE(utilized.contains("spin")) << prometheus->log();
        std::printf("the standing session's cpus_utilized (metrics = \"sched\"): %.3f\n",
                    utilized.at("spin"));
        EXPECT_NEAR(utilized.at("spin"), session["spin"], 0.15);
    }

    // Every expression of the dashboard, its variables' and each recording rule's series
    // returns data: the dashboard's variables as Grafana would fill them ($job, every
    // $instance, a range of a few scrapes).
    auto has_data = [&](const std::string& q) {
        auto h = get(api, {"-G", "--data-urlencode", "query=" + q});
        auto j = nlohmann::json::parse(h.body, nullptr, false);
        return h.code == 200 && j.is_object() && j["status"] == "success" &&
               !j["data"]["result"].empty();
    };
    auto filled = [](std::string expr) {
        for (auto [var, value] :
             {std::pair{"$job", "monitord"}, {"$instance", ".*"}, {"$__rate_interval", "6s"}}) {
            for (auto at = expr.find(var); at != std::string::npos; at = expr.find(var)) {
                expr.replace(at, std::string_view{var}.size(), value);
            }
        }
        return expr;
    };
    std::vector<std::string> exprs;
    for (const auto& v : dashboard["templating"]["list"]) {
        if (v["type"] != "query") continue;
        // label_values(SELECTOR, label): the selector's series.
        const std::string def = v["definition"];
        const auto open = def.find('(');
        const auto comma = def.rfind(',');
        ASSERT_TRUE(open != std::string::npos && comma != std::string::npos) << def;
        exprs.push_back(filled(def.substr(open + 1, comma - open - 1)));
    }
    std::size_t panels = 0;
    for (const auto& p : dashboard["panels"]) {
        ++panels;
        for (const auto& t : p["targets"]) {
            const std::string expr = filled(t["expr"]);
            if (!counted.dir && expr.find("monitord_perf_") != std::string::npos) continue;
            exprs.push_back(expr);
        }
    }
    ASSERT_GE(panels, 8u);
    std::size_t records = 0;
    {
        std::ifstream rules(std::filesystem::path{prometheus_dir} / "monitord-rules.yml");
        const std::regex record{R"re(^\s*record: "?([a-z_:0-9]+)"?\s*$)re"};
        std::smatch m;
        for (std::string line; std::getline(rules, line);) {
            if (std::regex_match(line, m, record)) exprs.push_back(m[1]), ++records;
        }
    }
    ASSERT_GE(records, 4u);
    std::vector<std::string> empty;
    for (int i = 0; i < 20; ++i) {
        empty.clear();
        for (const auto& e : exprs) {
            if (!has_data(e)) empty.push_back(e);
        }
        if (empty.empty()) break;
        std::this_thread::sleep_for(1s);
    }
    std::printf(
        "the dashboard's %zu panels and the %zu recording rules: %zu expressions, "
        "%zu without data\n",
        panels, records, exprs.size(), empty.size());
    for (const auto& e : empty) ADD_FAILURE() << "no data: " << e;
    // The alerting rules load and evaluate in the real Prometheus.
    auto rules = nlohmann::json::parse(
        get("http://127.0.0.1:" + std::to_string(port) + "/api/v1/rules").body, nullptr, false);
    ASSERT_TRUE(rules.is_object()) << prometheus->log();
    std::size_t alerts = 0;
    for (const auto& g : rules["data"]["groups"]) {
        for (const auto& r : g["rules"]) {
            EXPECT_EQ(r["health"], "ok") << r.dump();
            alerts += r["type"] == "alerting" ? 1 : 0;
        }
    }
    EXPECT_GE(alerts, 8u);
    EXPECT_EQ(prometheus->stop(SIGTERM, 20s), 0);
}

}  // namespace
}  // namespace itest
