// The tools people already run, against a 2-agent job on this machine (docs/observability.md):
// a real Prometheus server (Debian's, started on loopback) scrapes the hosting agent's
// --metrics-port, and a real headless browser (Debian's chromium) watches the status page.
// Both are installed by scripts/install-deps.sh; a missing one fails the test.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/integration/two_agent_job.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"
#include "tests/support/http_get.h"
#include "tests/support/temp_dir.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;

// Two agents in crash-until 2 mode, paused at restarts 0 and 1 until the test says go.
struct PausedJob : TwoAgentJob {
  TempDir dir;

  // `both`: start the two agents; else only the host, and StartOther() later.
  explicit PausedJob(bool both = true) {
    WriteFile(dir / "pause.0", "");
    WriteFile(dir / "pause.1", "");
    StartHost(Args());
    if (both) StartOther();
  }
  void StartOther() { TwoAgentJob::StartOther(Args()); }
  std::vector<std::string> Args() const { return {"crash-until", "2", dir.path()}; }
  // Lets every paused restart go on, and checks that the job then succeeds.
  void Finish() {
    WriteFile(dir / "go.0", "");
    WriteFile(dir / "go.1", "");
    for (auto* agent : {host.get(), other.get()}) {
      ProcessResult r = agent->Wait(absl::Seconds(30));
      EXPECT_EQ(r.exit_code, 0) << r.err;
    }
  }
};

// What Prometheus answers for `query` (its HTTP API's JSON).
std::string Query(int port, const std::string& query) {
  return HttpGet(port, "/api/v1/query?query=" + query).body;
}

TEST(ObservabilityTools, PrometheusScrapesARestartIntoRestartsTotal) {
  PausedJob job;
  ASSERT_TRUE(WaitUntil([&] { return FileExists(job.dir / "at.0"); }, absl::Seconds(30)));
  TempDir prom;
  const int prom_port = FreeLoopbackPort();
  WriteFile(prom / "prometheus.yml",
            absl::StrCat("global:\n  scrape_interval: 1s\n"
                         "scrape_configs:\n  - job_name: ddprun\n    static_configs:\n"
                         "      - targets: ['127.0.0.1:",
                         job.metrics_port, "']\n"));
  auto prometheus =
      ChildProcess::Start({"/usr/bin/prometheus", "--config.file=" + (prom / "prometheus.yml"),
                           "--storage.tsdb.path=" + (prom / "data"),
                           absl::StrCat("--web.listen-address=127.0.0.1:", prom_port)});
  std::string answer;
  // Scraped while round 0 runs: no restart yet.
  ASSERT_TRUE(WaitUntil(
      [&] {
        answer = Query(prom_port, "ddprun_restarts_total");
        return answer.find("\"run_id\":\"job\"") != std::string::npos;
      },
      absl::Seconds(60)))
      << answer << prometheus->ErrSoFar();
  EXPECT_THAT(answer, HasSubstr(",\"0\"]"));
  WriteFile(job.dir / "go.0", "");  // rank 1 exits 1: a restart
  ASSERT_TRUE(WaitUntil(
      [&] {
        answer = Query(prom_port, "ddprun_restarts_total");
        return answer.find(",\"1\"]") != std::string::npos;
      },
      absl::Seconds(30)))
      << answer;
  EXPECT_THAT(answer, HasSubstr("\"job\":\"ddprun\""));
  answer = Query(prom_port, "ddprun_worker_failures_total");
  EXPECT_THAT(answer, HasSubstr("\"cause\":\"exit_code\""));
  EXPECT_THAT(Query(prom_port, "up"), HasSubstr(",\"1\"]"));
  ::kill(prometheus->pid(), SIGTERM);
  prometheus->Wait(absl::Seconds(30));
  job.Finish();
}

TEST(ObservabilityTools, TheStatusPageShowsANewRoundAndItsFailureWithoutAReload) {
  PausedJob job(/*both=*/false);  // the page first shows the host alone, gathering
  ASSERT_TRUE(
      WaitUntil([&] { return HttpGet(job.metrics_port, "/").status == 200; }, absl::Seconds(30)))
      << "the host agent's log:\n"
      << job.host->ErrSoFar();
  // DDPRUN_DOCS_SCREENSHOT: where to keep the screenshot (docs/images/status-page.png).
  const char* keep = ::getenv("DDPRUN_DOCS_SCREENSHOT");
  const std::string screenshot = keep != nullptr ? keep : job.dir / "status-page.png";
  // The page while the first node waits, then after the failure, while round 1 runs.
  auto browser = ChildProcess::Start(
      {"/usr/bin/python3", kSourceDir + "/tests/integration/status_page_browser.py",
       absl::StrCat("http://127.0.0.1:", job.metrics_port, "/"), job.dir.path(), screenshot});
  ASSERT_TRUE(WaitUntil([&] { return FileExists(job.dir / "seen.gathering"); }, absl::Seconds(90)))
      << browser->ErrSoFar();
  job.StartOther();
  ProcessResult result = browser->Wait(absl::Seconds(120));
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_THAT(result.out, HasSubstr("after the crash; 2 rounds listed"));
  EXPECT_TRUE(FileExists(screenshot));
  job.Finish();
}

}  // namespace
}  // namespace ddprun::testing
