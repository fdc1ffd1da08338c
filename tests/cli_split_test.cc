// `tessera` and `tessera-all` (src/main/CMakeLists.txt): the client verbs run in an executable
// that loads none of the servers' libraries, and every other command line reaches tessera-all.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Output {
  int rc = -1;
  std::string text;  // stdout and stderr
};

Output Shell(const std::string& cmd) {
  Output o;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return o;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) o.text.append(buf.data(), n);
  const int status = pclose(p);
  o.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

std::string Bin() {
  const char* bin = getenv("TESSERA_BIN");
  return bin != nullptr && fs::exists(bin) ? bin : "";
}

TEST(CliSplit, TheClientVerbsLoadNoServerLibrary) {
  const std::string bin = Bin();
  if (bin.empty()) GTEST_SKIP() << "TESSERA_BIN not set";
  const Output ldd = Shell("ldd " + bin);
  ASSERT_EQ(ldd.rc, 0) << ldd.text;
  for (const char* lib : {"libgrpc", "libprotobuf", "libsqlite3", "libupb", "libre2", "libcares"}) {
    EXPECT_EQ(ldd.text.find(lib), std::string::npos) << lib << " is loaded by tessera:\n"
                                                     << ldd.text;
  }
  const Output get = Shell(bin + " get --help");
  EXPECT_EQ(get.rc, 0) << get.text;
  EXPECT_NE(get.text.find("Usage: tessera get"), std::string::npos) << get.text;
}

TEST(CliSplit, EveryOtherCommandLineIsHandedToTesseraAll) {
  const std::string bin = Bin();
  if (bin.empty()) GTEST_SKIP() << "TESSERA_BIN not set";
  const Output server = Shell(bin + " server --help");
  EXPECT_EQ(server.rc, 0) << server.text;
  EXPECT_NE(server.text.find("Usage: tessera server"), std::string::npos) << server.text;
  // The whole list, client verbs and servers alike.
  const Output help = Shell(bin + " --help");
  EXPECT_EQ(help.rc, 0) << help.text;
  for (const char* verb : {"server", "agent", "scheduler", "get", "apply", "bench", "sim"}) {
    EXPECT_NE(help.text.find(std::string("  ") + verb), std::string::npos) << verb << help.text;
  }
  const Output completion = Shell(bin + " completion bash");
  EXPECT_EQ(completion.rc, 0) << completion.text;
  EXPECT_NE(completion.text.find("server"), std::string::npos);
  // A mistyped verb is a usage error, as before.
  EXPECT_EQ(Shell(bin + " no-such-verb").rc, 2);
}

TEST(CliSplit, WithoutTesseraAllTheClientVerbsRunAndTheRestSaysWhatIsMissing) {
  const std::string bin = Bin();
  if (bin.empty()) GTEST_SKIP() << "TESSERA_BIN not set";
  const fs::path dir = fs::temp_directory_path() / ("cli_split_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path alone = dir / "tessera";
  fs::copy_file(bin, alone, fs::copy_options::overwrite_existing);
  const Output get = Shell(alone.string() + " get --help");
  EXPECT_EQ(get.rc, 0) << get.text;
  const Output server = Shell(alone.string() + " server --help");
  EXPECT_EQ(server.rc, 127) << server.text;
  EXPECT_NE(server.text.find((dir / "tessera-all").string()), std::string::npos) << server.text;
  EXPECT_NE(server.text.find("could not be started"), std::string::npos) << server.text;
  fs::remove_all(dir);
}

}  // namespace
