// main() for every GoogleTest program of monitord. Like gtest_main, plus: when every test
// that ran was skipped, exit with 77 so that meson reports the program as skipped (with the
// reasons printed) instead of passed; and run as the spinning probes' helper when started as
// one (monitor/loading/probe_process.hpp), so that a test can start the real helper from
// its own program, as the daemon does.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "monitor/loading/probe_process.hpp"

namespace {

class SkipCounter : public testing::EmptyTestEventListener {
  public:
    void OnTestEnd(const testing::TestInfo& info) override {
        const auto* r = info.result();
        if (r->Skipped()) {
            ++skipped_;
        } else {
            ++ran_;
        }
    }
    int skipped() const { return skipped_; }
    int ran() const { return ran_; }

  private:
    int skipped_ = 0;
    int ran_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
    if (argc == 4 && std::string_view(argv[1]) == monitor::ProbeProcess::kHelperFlag) {
        return monitor::run_probe_helper(std::atoi(argv[2]), std::atoi(argv[3]));
    }
    testing::InitGoogleTest(&argc, argv);
    auto* counter = new SkipCounter;  // owned by gtest's listener list
    testing::UnitTest::GetInstance()->listeners().Append(counter);
    int rc = RUN_ALL_TESTS();
    if (rc == 0 && counter->ran() == 0 && counter->skipped() > 0) {
        std::fprintf(stderr, "all %d tests skipped\n", counter->skipped());
        return 77;
    }
    return rc;
}
