// Runs a fuzz target over files, without libFuzzer: each FILE, or each file in each DIRECTORY,
// given to LLVMFuzzerTestOneInput once. The normal builds (GCC, the sanitizers) run every
// target over its seed corpus and over the inputs of crashes found before (regressions/).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
    namespace fs = std::filesystem;
    std::size_t runs = 0;
    for (int i = 1; i < argc; ++i) {
        std::vector<fs::path> files;
        if (fs::is_directory(argv[i])) {
            for (const auto& e : fs::recursive_directory_iterator(argv[i])) {
                if (e.is_regular_file()) files.push_back(e.path());
            }
        } else {
            files.emplace_back(argv[i]);
        }
        for (const auto& f : files) {
            std::FILE* in = std::fopen(f.c_str(), "rb");
            if (in == nullptr) {
                std::fprintf(stderr, "cannot read %s\n", f.c_str());
                return 1;
            }
            std::vector<std::uint8_t> bytes;
            std::uint8_t block[4096];
            for (std::size_t n; (n = std::fread(block, 1, sizeof block, in)) > 0;) {
                bytes.insert(bytes.end(), block, block + n);
            }
            std::fclose(in);
            LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
            ++runs;
        }
    }
    std::printf("%zu inputs ran\n", runs);
    return runs > 0 ? 0 : 1;
}
