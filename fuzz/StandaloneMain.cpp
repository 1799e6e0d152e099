//===- StandaloneMain.cpp - Running a fuzz target without libFuzzer -------===//
//
// Part of the mdplan project.
//
//===----------------------------------------------------------------------===//
//
// A main() for the fuzz targets in builds without libFuzzer (GCC, or clang
// without MDPLAN_BUILD_FUZZERS): runs LLVMFuzzerTestOneInput once on every
// file named on the command line, and on every file of every directory
// named, in name order. The test suite uses it to replay the corpus and the
// inputs that once crashed (test/Fuzz).
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size);

namespace fs = std::filesystem;

static bool readFile(const fs::path &P, std::vector<uint8_t> &Out) {
  std::ifstream In(P, std::ios::binary);
  if (!In)
    return false;
  Out.assign(std::istreambuf_iterator<char>(In),
             std::istreambuf_iterator<char>());
  return !In.bad();
}

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
    return 2;
  }
  std::vector<fs::path> Inputs;
  for (int I = 1; I < argc; ++I) {
    fs::path P(argv[I]);
    std::error_code EC;
    if (fs::is_directory(P, EC)) {
      std::vector<fs::path> Files;
      for (const auto &E : fs::directory_iterator(P, EC))
        if (E.is_regular_file())
          Files.push_back(E.path());
      std::sort(Files.begin(), Files.end());
      Inputs.insert(Inputs.end(), Files.begin(), Files.end());
    } else {
      Inputs.push_back(P);
    }
    if (EC) {
      std::fprintf(stderr, "error: cannot read '%s': %s\n", argv[I],
                   EC.message().c_str());
      return 1;
    }
  }
  std::vector<uint8_t> Bytes;
  for (const fs::path &P : Inputs) {
    if (!readFile(P, Bytes)) {
      std::fprintf(stderr, "error: cannot read '%s'\n", P.c_str());
      return 1;
    }
    // Report the input first: if it crashes, the last line names it.
    std::fprintf(stderr, "running %s\n", P.filename().c_str());
    LLVMFuzzerTestOneInput(Bytes.data(), Bytes.size());
  }
  std::printf("%zu input%s, no crash\n", Inputs.size(),
              Inputs.size() == 1 ? "" : "s");
  return 0;
}
