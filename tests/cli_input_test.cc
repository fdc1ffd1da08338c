// What `tessera apply` does with bad input, against a real server: hostile or malformed files
// are refused with a message naming the file and line (never a crash or an "internal error"),
// every error at once, and nothing is written unless every object is valid.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_process_fixture.h"

namespace tessera::testing {
namespace {

class CliInputTest : public CliProcessTest {
 protected:
  // Writes `text` to DIR/name and returns the path.
  std::string File(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  // `tessera ARGS` with at most 1 GiB of memory: input that would exhaust memory fails fast
  // instead of taking the machine down. AddressSanitizer reserves terabytes of shadow address
  // space at start, so under it the cap is ASan's own resident-memory limit, not `ulimit -v`.
  static Result RunLimited(const std::string& args) {
#if defined(__SANITIZE_ADDRESS__)
    return RunTessera(
        args, "export ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}hard_rss_limit_mb=1024\"; ");
#else
    return RunTessera(args, "ulimit -v 1048576; ");
#endif
  }
  std::string Jobs() { return Run("get jobs -o name").out; }
};

constexpr char kJob[] =
    "apiVersion: tessera.dev/v1\nkind: TrainingJob\nmetadata: {name: NAME}\n"
    "spec:\n  groups: [{name: w, count: 1, gpusPerReplica: 1}]\n";

std::string Job(const std::string& name) {
  std::string j = kJob;
  j.replace(j.find("NAME"), 4, name);
  return j;
}

TEST_F(CliInputTest, HostileFilesAreRefusedWithoutExhaustingMemory) {
  // Billion laughs: 10^9 strings once the aliases are expanded.
  std::string laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    const std::string prev(1, static_cast<char>(c - 1));
    laughs += std::string(1, c) + ": &" + std::string(1, c) + " [";
    for (int i = 0; i < 10; ++i) laughs += (i ? ", *" : "*") + prev;
    laughs += "]\n";
  }
  Result r = RunLimited("apply -f " + File("laughs.yaml", laughs));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("laughs.yaml:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("values (aliases expanded): refused"), std::string::npos) << r.out;
  r = RunLimited("apply -f /dev/zero");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("/dev/zero: larger than 16 MiB: refused"), std::string::npos) << r.out;
  std::string deep = "a: ";
  for (int i = 0; i < 100; ++i) deep += "[";
  for (int i = 0; i < 100; ++i) deep += "]";
  r = RunLimited("apply -f " + File("deep.yaml", deep + "\n"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("nests deeper than 64 levels"), std::string::npos) << r.out;
}

TEST_F(CliInputTest, DuplicateKeysBadBytesAndNumericNamesAreUserErrors) {
  // A repeated key is refused (the JSON API refuses it too), not resolved to the last value.
  Result r = Run("apply -f " + File("dup.yaml", Job("dup") + "  priority: 5\n  priority: 7\n"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("dup.yaml:7: repeats the key \"priority\""), std::string::npos) << r.out;
  // Invalid UTF-8 and a number where the name goes: the file and line, never "internal error".
  r = Run("apply -f " + File("utf8.yaml", Job("u") + "  image: \"caf\xe9\"\n"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("utf8.yaml:6: not valid UTF-8"), std::string::npos) << r.out;
  r = Run("apply -f " + File("num.yaml", Job("12345") + "\n"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("num.yaml:3: trainingjob/: metadata.name: must be a string"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
  EXPECT_EQ(Jobs(), "");
}

TEST_F(CliInputTest, AMultiDocumentFileIsCheckedWholeAndEveryErrorIsShownWithItsLine) {
  const std::string file = File("jobs.yaml", Job("good") + "---\n" +
                                                 "apiVersion: tessera.dev/v1\n"
                                                 "kind: TrainingJob\n"
                                                 "metadata: {name: Bad_5}\n"
                                                 "spec:\n"
                                                 "  gpuModel: [H100]\n"
                                                 "  groups:\n"
                                                 "  - name: w\n"
                                                 "    count: 0\n"
                                                 "    gpusPerReplica: 1\n");
  Result r = Run("apply -f " + file);
  EXPECT_EQ(r.rc, 1) << r.out;
  // Every error, each with the line of jobs.yaml it is about.
  EXPECT_NE(r.out.find("jobs.yaml:9: trainingjob/Bad_5: metadata.name: must be a lower-case DNS "
                       "label (a-z, 0-9, '-', at most 63 characters)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("jobs.yaml:14: trainingjob/Bad_5: spec.groups[0].count: must be > 0"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("jobs.yaml:11: trainingjob/Bad_5: spec.gpuModel: unknown field; did you "
                       "mean \"gpuModels\"?"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("nothing applied: 3 error(s)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("in the URL"), std::string::npos) << r.out;
  // The valid first document was not applied either.
  EXPECT_EQ(Jobs(), "");
}

TEST_F(CliInputTest, DirectoriesAndEmptyInput) {
  // A directory: its *.yaml, *.yml and *.json files in name order, as kubectl reads one.
  File("d/b.yml", Job("second"));
  File("d/a.yaml", Job("first"));
  File("d/notes.txt", "not a manifest");
  Result r = Run("apply -f " + dir_ + "/d");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("trainingjob.tessera.dev/first created\n"
                       "trainingjob.tessera.dev/second created"),
            std::string::npos)
      << r.out;
  // Nothing to apply is an error, not a silent success.
  std::filesystem::create_directories(dir_ + "/empty");
  r = Run("apply -f " + dir_ + "/empty");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("a directory without *.yaml, *.yml or *.json files"), std::string::npos)
      << r.out;
  r = Run("apply -f " + File("empty.yaml", "# only a comment\n---\n"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("no objects passed to apply"), std::string::npos) << r.out;
  r = Run("apply -f " + dir_ + "/missing.yaml");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("missing.yaml: cannot be read"), std::string::npos) << r.out;
}

TEST_F(CliInputTest, AJobInAMisspeltQueueWaitsAndSaysWhichQueueItMeant) {
  server_.Kill(SIGKILL);
  dir_ = MakeTempDir("tessera_cli_queues");
  File("queues.yaml", "queues: [{name: research}]\n");
  extra_args_ = {"--queue-config", dir_ + "/queues.yaml"};
  StartServer();
  Result r =
      Run("apply -f - <<'EOF'\n"
          "kind: Node\napiVersion: tessera.dev/v1\nmetadata: {name: a}\n"
          "spec: {gpuType: H100, gpuCount: 8}\n---\n"
          "kind: TrainingJob\napiVersion: tessera.dev/v1\nmetadata: {name: typo}\n"
          "spec: {queue: reserch, groups: [{name: w, count: 1, gpusPerReplica: 4}]}\n---\n"
          "kind: TrainingJob\napiVersion: tessera.dev/v1\nmetadata: {name: plain}\n"
          "spec: {groups: [{name: w, count: 1, gpusPerReplica: 4}]}\n"
          "EOF\n");
  ASSERT_EQ(r.rc, 0) << r.out;
  // `default` is implicit: a job naming no queue runs.
  WaitFor("jobs", "plain", Scheduled);
  Json job = WaitFor("jobs", "typo", [](const Json& j) {
    return j["status"].value("message", "").find("unknown queue") != std::string::npos;
  });
  EXPECT_EQ(job["status"]["message"],
            "waiting: spec.queue: unknown queue \"reserch\"; did you mean \"research\"?");
  EXPECT_FALSE(job["status"].contains("placement"));
  // `get jobs` says why in a word (REASON), the prose stays in describe.
  r = Run("get jobs");
  EXPECT_NE(r.out.find("REASON"), std::string::npos) << r.out;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("typo +[A-Za-z]+ +QueueRejected +4 ")) << r.out;
  // With Queue objects the CLI warns at apply time already.
  r =
      Run("apply -f - <<'EOF'\n"
          "kind: Queue\napiVersion: tessera.dev/v1\nmetadata: {name: team-a}\nspec: {}\n---\n"
          "kind: TrainingJob\napiVersion: tessera.dev/v1\nmetadata: {name: typo2}\n"
          "spec: {queue: tema-a, groups: [{name: w, count: 1, gpusPerReplica: 1}]}\n"
          "EOF\n");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("-:9: trainingjob/typo2: spec.queue: no queue \"tema-a\"; did you mean "
                       "\"team-a\"?"),
            std::string::npos)
      << r.out;
  r = Run("get events");
  EXPECT_NE(r.out.find("Warning"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("QueueRejected"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tessera::testing
