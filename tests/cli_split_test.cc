// `tessera` and `tessera-all` (src/main/CMakeLists.txt): the client verbs run in an executable
// that loads none of the servers' libraries, and every other command line reaches tessera-all.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "server_process.h"

namespace {

namespace fs = std::filesystem;
using tessera::testing::RunShell;

std::string Bin() {
  const char* bin = getenv("TESSERA_BIN");
  return bin != nullptr && fs::exists(bin) ? bin : "";
}

TEST(CliSplit, TheClientVerbsLoadNoServerLibrary) {
  const std::string bin = Bin();
  if (bin.empty()) GTEST_SKIP() << "TESSERA_BIN not set";
  const auto ldd = RunShell("ldd " + bin);
  ASSERT_EQ(ldd.rc, 0) << ldd.out;
  // Nor cpp-httplib (it initializes OpenSSL at load) or Abseil's shared libraries (linked
  // statically: the loader's symbol lookups were most of a command's start; a shared copy beside
  // the static one would be two Abseils in one process).
  for (const char* lib : {"libgrpc", "libprotobuf", "libsqlite3", "libupb", "libre2", "libcares",
                          "libcpp-httplib", "libabsl_"}) {
    EXPECT_EQ(ldd.out.find(lib), std::string::npos) << lib << " is loaded by tessera:\n" << ldd.out;
  }
  const auto get = RunShell(bin + " get --help");
  EXPECT_EQ(get.rc, 0) << get.out;
  EXPECT_NE(get.out.find("Usage: tessera get"), std::string::npos) << get.out;
}

TEST(CliSplit, EveryOtherCommandLineIsHandedToTesseraAll) {
  const std::string bin = Bin();
  if (bin.empty()) GTEST_SKIP() << "TESSERA_BIN not set";
  const auto server = RunShell(bin + " server --help");
  EXPECT_EQ(server.rc, 0) << server.out;
  EXPECT_NE(server.out.find("Usage: tessera server"), std::string::npos) << server.out;
  // The whole list, client verbs and servers alike.
  const auto help = RunShell(bin + " --help");
  EXPECT_EQ(help.rc, 0) << help.out;
  for (const char* verb : {"server", "agent", "scheduler", "get", "apply", "bench", "sim"}) {
    EXPECT_NE(help.out.find(std::string("  ") + verb), std::string::npos) << verb << help.out;
  }
  const auto completion = RunShell(bin + " completion bash");
  EXPECT_EQ(completion.rc, 0) << completion.out;
  EXPECT_NE(completion.out.find("server"), std::string::npos);
  // A mistyped verb is a usage error, as before.
  EXPECT_EQ(RunShell(bin + " no-such-verb").rc, 2);
}

TEST(CliSplit, WithoutTesseraAllTheClientVerbsRunAndTheRestSaysWhatIsMissing) {
  const std::string bin = Bin();
  if (bin.empty()) GTEST_SKIP() << "TESSERA_BIN not set";
  const fs::path dir = fs::temp_directory_path() / ("cli_split_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path alone = dir / "tessera";
  fs::copy_file(bin, alone, fs::copy_options::overwrite_existing);
  const auto get = RunShell(alone.string() + " get --help");
  EXPECT_EQ(get.rc, 0) << get.out;
  const auto server = RunShell(alone.string() + " server --help");
  EXPECT_EQ(server.rc, 127) << server.out;
  EXPECT_NE(server.out.find((dir / "tessera-all").string()), std::string::npos) << server.out;
  EXPECT_NE(server.out.find("could not be started"), std::string::npos) << server.out;
  fs::remove_all(dir);
}

}  // namespace
