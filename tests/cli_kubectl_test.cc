// kubectl's habits in `tessera`, against a real server process (issue 23, point 9): output
// formats (jsonpath, custom-columns, --sort-by, --no-headers), --field-selector, get -w,
// delete -f / -l / --all, --dry-run on the client and on the server, drain listing what it
// evicts and waiting with a timeout, explain, and shell completion.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_process_fixture.h"
#include "httplib.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class CliKubectlTest : public CliProcessTest {
 protected:
  void SetUp() override {
    CliProcessTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_EQ(Run("apply -f " + Example("nodes.yaml")).rc, 0);
  }
  // Writes `text` to DIR/name and returns the path.
  std::string File(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  static std::string Job(const std::string& name, int gpus, const std::string& team) {
    return "apiVersion: tessera.dev/v1\nkind: TrainingJob\nmetadata:\n  name: " + name +
           "\n  labels: {team: " + team + "}\nspec:\n  groups:\n  - {name: w, count: 1, " +
           "gpusPerReplica: " + std::to_string(gpus) + "}\n";
  }
  std::vector<std::string> Names(const std::string& args = "") {
    Result r = Run("get jobs -o name " + args);
    std::vector<std::string> out;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("trainingjob/", 0) == 0) out.push_back(line);  // not "No resources found"
    }
    return out;
  }
};

TEST_F(CliKubectlTest, OutputFormatsSortingAndFieldSelectors) {
  ASSERT_EQ(Run("apply -f " + File("b.yaml", Job("b", 2, "cv"))).rc, 0);
  ASSERT_EQ(Run("apply -f " + File("a.yaml", Job("a", 4, "nlp"))).rc, 0);
  WaitFor("jobs", "a", Scheduled);
  WaitFor("jobs", "b", Scheduled);

  Result r = Run("get jobs -o jsonpath='{.items[*].metadata.name}'");
  EXPECT_EQ(r.out, "a b");
  r = Run("get jobs a -o jsonpath='{.spec.groups[0].gpusPerReplica}'");
  EXPECT_EQ(r.out, "4");
  r = Run(
      R"(get jobs -o jsonpath='{range .items[*]}{.metadata.name}:{.metadata.labels.team}{"\n"}{end}')");
  EXPECT_EQ(r.out, "a:nlp\nb:cv\n");
  r =
      Run("get jobs -o custom-columns=NAME:.metadata.name,GPUS:.spec.groups[0].gpusPerReplica,"
          "MISSING:.status.nothing");
  EXPECT_THAT(r.out, HasSubstr("NAME  GPUS  MISSING\na     4     <none>\nb     2     <none>\n"));
  r =
      Run("get jobs --sort-by=.spec.groups[0].gpusPerReplica --no-headers -o custom-columns="
          "N:.metadata.name");
  EXPECT_EQ(r.out, "b\na\n");
  r = Run("get jobs --field-selector metadata.name=b -o name");
  EXPECT_EQ(r.out, "trainingjob/b\n");
  EXPECT_TRUE(Names("--field-selector status.phase=Pending").empty());
  r = Run("get jobs --field-selector spec.gpus=1");
  EXPECT_NE(r.rc, 0);
  EXPECT_THAT(r.out, HasSubstr("not supported"));
  // A malformed template is refused before anything is read, saying where.
  r = Run("get jobs -o 'jsonpath={.items[*'");
  EXPECT_NE(r.rc, 0);
  EXPECT_THAT(r.out, HasSubstr("at character"));
}

TEST_F(CliKubectlTest, WatchPrintsChangesAfterTheListing) {
  ASSERT_EQ(Run("apply -f " + File("a.yaml", Job("a", 1, "nlp"))).rc, 0);
  // The watch runs in the background; once its listing is in the file it follows changes from
  // the listing's revision, so what is applied after that cannot be missed.
  const std::string out = dir_ + "/watch.out";
  ASSERT_EQ(RunShell("(" + TesseraBin() + " get jobs -w --request-timeout 20 -o name > " + out +
                     " 2>&1 &)")
                .rc,
            0);
  for (int i = 0; i < 200 && Slurp(out).find("trainingjob/a") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_THAT(Slurp(out), HasSubstr("trainingjob/a"));
  ASSERT_EQ(Run("apply -f " + File("b.yaml", Job("b", 1, "cv"))).rc, 0);
  ASSERT_EQ(Run("delete jobs a").rc, 0);
  std::string seen;
  for (int i = 0; i < 200; ++i) {
    seen = Slurp(out);
    if (seen.find("trainingjob/b") != std::string::npos &&
        seen.rfind("trainingjob/a") != seen.find("trainingjob/a")) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_THAT(seen, HasSubstr("trainingjob/b"));
  EXPECT_NE(seen.rfind("trainingjob/a"), seen.find("trainingjob/a")) << "the deletion: " << seen;
  RunShell("pkill -f 'get jobs -w --request-timeout 20' || true");
}

// Many new objects go in one batch request (one store transaction), not a GET and a POST each;
// applied again, the batch is refused (they exist) and each object is updated on its own.
TEST_F(CliKubectlTest, ManyNewObjectsAreCreatedInOneBatch) {
  std::string text;
  for (int i = 0; i < 5; ++i) text += (i ? "---\n" : "") + Job("j" + std::to_string(i), 1, "nlp");
  const std::string many = File("many.yaml", text);
  auto batches = [&] {
    httplib::Client c(url_);
    auto r = c.Get("/metrics", {{"Authorization", "Bearer " + token_}});
    if (!r || r->status != 200) return -1.0;
    // tessera_api_requests_total{verb="batch",resource="...",code="201"} N
    double n = 0;
    std::istringstream in(r->body);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("tessera_api_requests_total{verb=\"batch\"", 0) == 0 &&
          line.find("code=\"201\"") != std::string::npos) {
        n += std::stod(line.substr(line.rfind(' ') + 1));
      }
    }
    return n;
  };
  const double before = batches();
  Result r = Run("apply -f " + many);
  ASSERT_EQ(r.rc, 0) << r.out;
  for (int i = 0; i < 5; ++i) {
    EXPECT_THAT(r.out, HasSubstr("trainingjob.tessera.dev/j" + std::to_string(i) + " created"));
  }
  EXPECT_EQ(batches(), before + 1);
  EXPECT_EQ(Names().size(), 5u);
  // Again, one label changed: each exists, so each is configured on its own.
  std::string changed = text;
  changed.replace(changed.find("team: nlp"), 9, "team: cv");
  r = Run("apply -f " + File("many.yaml", changed));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("trainingjob.tessera.dev/j0 configured"));
  EXPECT_THAT(r.out, HasSubstr("trainingjob.tessera.dev/j4 configured"));
  EXPECT_EQ(batches(), before + 1);
  EXPECT_EQ(Names("-l team=cv").size(), 1u);
}

TEST_F(CliKubectlTest, DeleteByFileLabelAndAllWithDryRuns) {
  const std::string both = File("both.yaml", Job("a", 1, "nlp") + "---\n" + Job("b", 1, "cv"));
  // Dry runs store nothing: the client's checks the schema, the server's everything.
  Result r = Run("apply -f " + both + " --dry-run");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("trainingjob.tessera.dev/a created (dry run)"));
  r = Run("apply -f " + both + " --dry-run=server");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("trainingjob.tessera.dev/b created (server dry run)"));
  EXPECT_TRUE(Names().empty());
  // The server's dry run refuses what the server would: a member larger than every node.
  r = Run("apply -f " + File("big.yaml", Job("big", 12, "nlp")) + " --dry-run=server");
  EXPECT_NE(r.rc, 0);
  EXPECT_THAT(r.out, HasSubstr("most GPUs of any node in the fleet"));
  EXPECT_THAT(r.out, HasSubstr("big.yaml:8: spec.groups[0].gpusPerReplica"));

  ASSERT_EQ(Run("apply -f " + both).rc, 0);
  r = Run("delete -f " + both + " --dry-run=server");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"a\" deleted (server dry run)"));
  EXPECT_EQ(Names().size(), 2u);
  r = Run("delete jobs -l team=cv");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(Names(), ::testing::ElementsAre("trainingjob/a"));
  r = Run("delete -f " + both);  // b is gone already: reported, a still deleted
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("both.yaml:10"));
  EXPECT_THAT(r.out, HasSubstr("\"a\" deleted"));
  ASSERT_EQ(Run("apply -f " + both).rc, 0);
  r = Run("delete jobs --all");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(Names().empty());
  // One form at a time.
  EXPECT_NE(Run("delete jobs a --all").rc, 0);
  EXPECT_NE(Run("delete jobs").rc, 0);
}

TEST_F(CliKubectlTest, DrainListsWhatItEvictsAndWaitsForIt) {
  ASSERT_EQ(Run("apply -f " + File("a.yaml", Job("a", 8, "nlp"))).rc, 0);
  Json job = WaitFor("jobs", "a", Scheduled);
  const std::string node = job["status"]["placement"][0]["node"];
  Result r = Run("drain " + node + " --timeout 30");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("evicting trainingjob default/a"));
  EXPECT_THAT(r.out, HasSubstr("trainingjob default/a evicted (now "));
  EXPECT_THAT(r.out, HasSubstr("node/" + node + " drained"));
  job = Json::parse(Run("get jobs a -o json").out);
  for (const Json& m : job["status"].value("placement", Json::array())) {
    EXPECT_NE(m["node"], node);
  }
  // With no scheduler to requeue it, the gang stays: the drain times out naming it.
  job = WaitFor("jobs", "a", Scheduled);
  const std::string second = job["status"]["placement"][0]["node"];
  server_.Kill(SIGTERM);
  extra_args_ = {"--no-scheduler"};
  StartServer();
  r = Run("drain " + second + " --timeout 2");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("evicting trainingjob default/a"));
  EXPECT_THAT(r.out, HasSubstr("timed out after 2s waiting for: trainingjob default/a"));
}

TEST_F(CliKubectlTest, ExplainAndCompletionNeedNoServer) {
  Result r = RunShell("TESSERA_SERVER=http://127.0.0.1:1 " + TesseraBin() +
                      " explain trainingjob.spec.groups");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("FIELD:    spec.groups <[]object> -required-"));
  EXPECT_THAT(r.out, HasSubstr("gpusPerReplica  <integer> -required-\n      >= 0, <= 16"));
  r = Run("explain node --recursive");
  EXPECT_THAT(r.out, HasSubstr("SCOPE:    Cluster"));
  r = Run("explain trainingjob.spec.grops");
  EXPECT_NE(r.rc, 0);
  EXPECT_THAT(r.out, HasSubstr("did you mean \"groups\""));

  // The bash script completes subcommands, resource types, flags and (from the server) names.
  ASSERT_EQ(Run("apply -f " + File("a.yaml", Job("llama", 1, "nlp"))).rc, 0);
  const std::string script = dir_ + "/completion.sh";
  ASSERT_EQ(Run("completion bash > " + script).rc, 0);
  auto complete = [&](const std::string& words, int cword) {
    return RunShell("PATH=" + TesseraBin().substr(0, TesseraBin().rfind('/')) +
                    ":$PATH bash -c 'source " + script + "; COMP_WORDS=(" + words +
                    "); COMP_CWORD=" + std::to_string(cword) +
                    "; _tessera; echo \"${COMPREPLY[*]}\"'")
        .out;
  };
  EXPECT_EQ(complete("tessera dra", 1), "dra-driver drain\n");
  EXPECT_EQ(complete("tessera drai", 1), "drain\n");
  EXPECT_EQ(complete("tessera get trai", 2), "trainingjob trainingjobs\n");
  EXPECT_EQ(complete("tessera get jobs --sort", 3), "--sort-by\n");
  EXPECT_EQ(complete("tessera describe jobs ll", 3), "llama\n");
  EXPECT_THAT(complete("tessera sim p", 2), HasSubstr("pack"));
  EXPECT_THAT(Run("completion zsh").out, HasSubstr("bashcompinit"));
  // Exit codes: 2 for a wrong command line, 1 for a command that ran and failed, 0 for help.
  EXPECT_EQ(Run("completion fish").rc, 2);
  EXPECT_EQ(Run("no-such-command").rc, 2);
  EXPECT_EQ(Run("get").rc, 2);
  EXPECT_EQ(Run("get jobs --no-such-flag").rc, 2);
  EXPECT_EQ(Run("get jobs no-such-job").rc, 1);
  EXPECT_EQ(Run("get --help").rc, 0);
  // Every command a user runs says how, with an example.
  for (const char* cmd :
       {"apply", "get",           "describe", "delete",    "cordon",     "uncordon",
        "drain", "top",           "logs",     "explain",   "completion", "cancel",
        "hold",  "release",       "history",  "server",    "agent",      "up",
        "gpus",  "device-plugin", "sim pack", "sim replay"}) {
    EXPECT_THAT(Run(std::string(cmd) + " --help").out, ::testing::ContainsRegex("Examples?:"))
        << cmd;
  }
}

TEST_F(CliKubectlTest, ConnectionErrorsAndConfigTyposSayWhatIsWrong) {
  Result r = Run("get jobs --server htp://foo");
  EXPECT_NE(r.rc, 0);
  EXPECT_THAT(r.out, HasSubstr("the scheme must be http:// or https://"));
  EXPECT_THAT(r.out, Not(HasSubstr("http://htp://")));
  r = Run("get jobs --server http://127.0.0.1:1");
  EXPECT_NE(r.rc, 0);
  EXPECT_THAT(r.out, HasSubstr("could not connect (nothing listening there, or refused)"));
  // A misspelt key in the config file is an error, not a silently missing token.
  const std::string home = dir_ + "/home";
  std::filesystem::create_directories(home + "/.tessera");
  std::ofstream(home + "/.tessera/config")
      << "current-context: lab\ncontexts:\n- name: lab\n  server: " << url_ << "\n  tokn: abc\n";
  r = RunShell("env -u TESSERA_TOKEN -u TESSERA_SERVER HOME=" + home + " " + TesseraBin() +
               " get jobs");
  EXPECT_NE(r.rc, 0);
  EXPECT_THAT(r.out, HasSubstr("contexts[0]: unknown key \"tokn\"; did you mean \"token\"?"));
}

}  // namespace
}  // namespace tessera::testing
