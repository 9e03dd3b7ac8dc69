// Seeing a running job (docs/observability.md): `ddprun status` and `ddprun stop` against a
// 2-agent job on this machine, and what --metrics-port serves. The agents are started as
// users start them (no --local-addr); the second is told it does not host the master
// (is_host=0), so that the test knows which one serves the status page.

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
using ::testing::Not;

bool AllReady(const TempDir& dir, int ranks) {
  for (int rank = 0; rank < ranks; ++rank) {
    if (!FileExists(dir / absl::StrCat("ready.", rank))) return false;
  }
  return true;
}

TEST(Observability, StatusShowsTheJobAndStopEndsItCleanly) {
  TempDir dir;
  TwoAgentJob job;
  job.Start({"wait-signal", dir.path()});
  ASSERT_TRUE(WaitUntil([&] { return AllReady(dir, 4); }, absl::Seconds(30)))
      << job.host->ErrSoFar() << job.other->ErrSoFar();

  ProcessResult list = job.Admin({"status"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("RUN"));
  EXPECT_THAT(list.out, HasSubstr("job  running  0      2/2    4      0/3"));

  ProcessResult one = job.Admin({"status", "--rdzv-id=job"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_THAT(one.out, HasSubstr("run 'job': running, round 0, world size 4, nodes 2, "
                                 "restarts 0 of 3 used (3 left)"));
  EXPECT_THAT(one.out, HasSubstr("GROUP RANK"));
  EXPECT_THAT(one.out, HasSubstr("0-1    running"));
  EXPECT_THAT(one.out, HasSubstr("2-3    running"));

  ProcessResult json = job.Admin({"status", "--rdzv-id=job", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, HasSubstr("\"schema_version\": 1"));
  EXPECT_THAT(json.out, HasSubstr("\"first_rank\": 2"));

  // The page's JSON is the CLI's, and the metrics say the same.
  HttpReply api = HttpGet(job.metrics_port, "/api/v1/status?run_id=job");
  EXPECT_EQ(api.status, 200);
  EXPECT_THAT(api.body, HasSubstr("\"run_id\":\"job\",\"state\":\"running\""));
  // 8 characters of each agent's 32: the whole incarnation is what a rejoin is matched by,
  // and the review evicted a node with it.
  EXPECT_THAT(api.body, ::testing::ContainsRegex("\"agent_id\":\"[0-9a-f]{8}\""));
  EXPECT_THAT(api.body, Not(::testing::ContainsRegex("\"agent_id\":\"[0-9a-f]{9,}")));
  EXPECT_EQ(HttpGet(job.metrics_port, "/api/v1/status?run_id=other").status, 404);
  HttpReply page = HttpGet(job.metrics_port, "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_THAT(page.headers, HasSubstr("X-Content-Type-Options: nosniff\r\n"));
  EXPECT_THAT(page.headers, HasSubstr("Content-Security-Policy: default-src 'self';"));
  EXPECT_THAT(api.headers, HasSubstr("X-Content-Type-Options: nosniff\r\n"));
  // WebDAV's methods once crashed the agent that hosts the master (civetweb's own answer,
  // with no document root): every method but GET is refused on every path; the job goes on.
  for (const char* method : {"PROPFIND", "PROPPATCH", "MKCOL", "LOCK", "UNLOCK", "COPY", "MOVE",
                             "TRACE", "CONNECT", "NOSUCHMETHOD"}) {
    for (const char* path : {"/", "/metrics", "/api/v1/status", "/elsewhere"}) {
      // civetweb itself answers 400 to a method it cannot parse a request of (COPY without
      // Destination, an unknown name): never our handler, never a crash.
      EXPECT_THAT(HttpGet(job.metrics_port, path, method).status, ::testing::AnyOf(400, 405))
          << method << " " << path;
    }
  }
  EXPECT_EQ(HttpGet(job.metrics_port, "/").status, 200) << job.host->ErrSoFar();  // still up
  EXPECT_THAT(job.host->ErrSoFar(),  // the page's address, at the default log level
              ::testing::ContainsRegex(
                  absl::StrCat("the job's status page on http://[^ ]+:", job.metrics_port, "/\n")));
  EXPECT_THAT(page.body, HasSubstr("fetch(\"/api/v1/status\""));
  EXPECT_THAT(page.body, Not(HasSubstr("http")));  // nothing from elsewhere
  const std::string metrics = job.Metrics();
  EXPECT_THAT(metrics, HasSubstr("ddprun_world_size{run_id=\"job\"} 4"));
  EXPECT_THAT(metrics, HasSubstr("ddprun_nodes{run_id=\"job\",state=\"running\"} 2"));
  EXPECT_THAT(metrics, HasSubstr("ddprun_agent_workers{run_id=\"job\",state=\"running\"} 2"));

  // This job has no token: anyone who reaches the master could send this stop (the review
  // stopped a job with --reason="training complete"), so it never looks like success. With
  // a token it exits 0 (NetnsTest.AnOperatorOnAnotherHostSeesTheJobAndStopsIt).
  ProcessResult stop = job.Admin({"stop", "--rdzv-id=job", "--reason=maintenance"});
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_THAT(stop.out, HasSubstr("run 'job' stops: its 2 agents stop their workers and exit 143 "
                                  "(without a token, a stop is never taken for success)"));
  for (auto* agent : {job.host.get(), job.other.get()}) {
    ProcessResult r = agent->Wait(absl::Seconds(30));
    EXPECT_EQ(r.exit_code, 143) << r.err;
    EXPECT_THAT(r.err, HasSubstr("warning: stopped by request from "));
    EXPECT_THAT(r.err, HasSubstr(": maintenance; exiting 143, not 0: this job has no token"));
  }
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(ReadFile(dir / absl::StrCat("signal.", rank)), "SIGTERM") << rank;
  }
}

TEST(Observability, AFailureShowsInTheStatusAndTheMetrics) {
  TempDir dir;
  WriteFile(dir / "pause.0", "");
  WriteFile(dir / "pause.1", "");
  TwoAgentJob job;
  job.Start({"crash-until", "2", dir.path()});
  ASSERT_TRUE(WaitUntil([&] { return FileExists(dir / "at.0"); }, absl::Seconds(30)));
  WriteFile(dir / "go.0", "");  // rank 1 exits 1: round 1 begins
  ASSERT_TRUE(WaitUntil([&] { return FileExists(dir / "at.1"); }, absl::Seconds(30)));
  ProcessResult one = job.Admin({"status", "--rdzv-id=job"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_THAT(one.out, HasSubstr("round 1, world size 4, nodes 2, restarts 1 of 3 used (2 left)"));
  EXPECT_THAT(one.out, HasSubstr("last failure (round 0): rank 1 (local rank 1) on"));
  EXPECT_THAT(one.out, HasSubstr(", exit code 1, pid "));
  EXPECT_THAT(one.out, HasSubstr("\n  test_worker: rank 1 fails on purpose (crash-until 2, "
                                 "restart 0)\n"));  // the stderr tail
  EXPECT_THAT(one.out, HasSubstr("rank 1 on "));    // the round's end, in the rounds table
  const std::string metrics = job.Metrics();
  EXPECT_THAT(metrics, HasSubstr("ddprun_restarts_total{run_id=\"job\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("ddprun_restarts_left{run_id=\"job\"} 2"));
  EXPECT_THAT(metrics, HasSubstr("ddprun_rounds_total{run_id=\"job\"} 2"));
  EXPECT_THAT(
      metrics,
      HasSubstr("ddprun_worker_failures_total{run_id=\"job\",cause=\"exit_code\",code=\"1\"} 1"));
  // This node's side: rank 1 failed here, and rank 0 was stopped for it.
  EXPECT_THAT(metrics,
              HasSubstr("ddprun_agent_worker_exits_total{run_id=\"job\",cause=\"exit_code\","
                        "code=\"1\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("ddprun_agent_worker_starts_total{run_id=\"job\"} 4"));
  EXPECT_THAT(metrics, HasSubstr("ddprun_round_duration_seconds_count{run_id=\"job\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("ddprun_agent_restart_count{run_id=\"job\"} 1"));
  WriteFile(dir / "go.1", "");
  for (auto* agent : {job.host.get(), job.other.get()}) {
    ProcessResult r = agent->Wait(absl::Seconds(30));
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
}

TEST(Observability, StatusAndStopNeedTheJobsToken) {
  TempDir dir;
  TwoAgentJob job;
  job.Start({"wait-signal", dir.path()}, {{"DDPRUN_RDZV_TOKEN", "s3cret"}});
  ASSERT_TRUE(WaitUntil([&] { return AllReady(dir, 4); }, absl::Seconds(30)));
  const std::map<std::string, std::optional<std::string>> no_token = {
      {"DDPRUN_RDZV_TOKEN", std::nullopt}};
  ProcessResult status = job.Admin({"status"}, no_token);
  EXPECT_EQ(status.exit_code, 1);
  EXPECT_THAT(status.err, HasSubstr("this master requires a job token and none was given"));
  EXPECT_THAT(status.err, HasSubstr("DDPRUN_RDZV_TOKEN"));
  ProcessResult refused = job.Admin({"stop", "--rdzv-id=job"}, no_token);
  EXPECT_EQ(refused.exit_code, 1);
  ProcessResult long_reason =
      job.Admin({"stop", "--rdzv-id=job", "--reason=" + std::string(2000, 'x')},
                {{"DDPRUN_RDZV_TOKEN", "s3cret"}});
  EXPECT_EQ(long_reason.exit_code, 1);
  EXPECT_THAT(long_reason.err, HasSubstr("--reason is 2000 bytes; at most 1024"));
  ProcessResult wrong = job.Admin({"stop", "--rdzv-id=job"}, {{"DDPRUN_RDZV_TOKEN", "guess"}});
  EXPECT_EQ(wrong.exit_code, 1);
  ProcessResult listed = job.Admin({"status"}, {{"DDPRUN_RDZV_TOKEN", "s3cret"}});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr("job  running"));  // the refused stops stopped nothing
  TempDir token_dir;
  WriteFile(token_dir / "token", "s3cret\n", 0600);
  ProcessResult stop = job.Admin(
      {"stop", "--rdzv-id=job", "--rdzv-conf=token_file=" + (token_dir / "token")}, no_token);
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  for (auto* agent : {job.host.get(), job.other.get()}) {
    EXPECT_EQ(agent->Wait(absl::Seconds(30)).exit_code, 0);
  }
}

TEST(Observability, BadAdminCommandsSayWhatToFix) {
  ProcessResult no_endpoint = RunProcess({kDdprun, "status"});
  EXPECT_EQ(no_endpoint.exit_code, 2);
  EXPECT_THAT(no_endpoint.err, HasSubstr("--rdzv-endpoint is required"));
  ProcessResult no_id = RunProcess({kDdprun, "stop", "--rdzv-endpoint=127.0.0.1:1"});
  EXPECT_EQ(no_id.exit_code, 2);
  EXPECT_THAT(no_id.err, HasSubstr("--rdzv-id is required"));
  const int nobody = FreeLoopbackPort();
  ProcessResult unreachable = RunProcess(
      {kDdprun, "status", absl::StrCat("--rdzv-endpoint=127.0.0.1:", nobody), "--timeout=2"});
  EXPECT_EQ(unreachable.exit_code, 1);
  EXPECT_THAT(unreachable.err, HasSubstr("cannot reach the rendezvous master at 127.0.0.1:"));
  EXPECT_THAT(unreachable.err, HasSubstr("check --rdzv-endpoint"));
  ProcessResult bad_port =
      RunProcess(DdprunWithTestWorker({"--standalone", "--metrics-port=http"}, {"env", "/tmp"}));
  EXPECT_EQ(bad_port.exit_code, 2);
  EXPECT_THAT(bad_port.err, HasSubstr("--metrics-port='http' is not valid"));
}

TEST(Observability, AOneNodeJobServesItsAgentsMetricsAndATakenPortIsAnError) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  auto agent = ChildProcess::Start(DdprunWithTestWorker(
      {"--standalone", "--nproc-per-node=2", absl::StrCat("--metrics-port=", port)},
      {"wait-signal", dir.path()}));
  ASSERT_TRUE(WaitUntil([&] { return AllReady(dir, 2); }, absl::Seconds(30))) << agent->ErrSoFar();
  // Where to look, at the default log level.
  EXPECT_THAT(agent->ErrSoFar(), ::testing::ContainsRegex(absl::StrCat(
                                     "warning: metrics on http://[^ ]+:", port, "/metrics\n")));
  std::string metrics;
  ASSERT_TRUE(WaitUntil(
      [&] {
        metrics = HttpGet(port, "/metrics").body;
        return metrics.find("state=\"running\"} 2") != std::string::npos;
      },
      absl::Seconds(10)))
      << metrics;
  EXPECT_THAT(metrics, HasSubstr("ddprun_agent_worker_starts_total"));
  EXPECT_EQ(HttpGet(port, "/").status, 404);  // no master here: no status page
  // Read-only, whatever a client sends.
  for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS", "PATCH", "PROPFIND", "MKCOL"}) {
    EXPECT_EQ(HttpGet(port, "/metrics", method).status, 405) << method;
  }
  EXPECT_EQ(HttpGet(port, "/metrics").status, 200);
  ProcessResult taken = RunProcess(DdprunWithTestWorker(
      {"--standalone", absl::StrCat("--metrics-port=", port)}, {"env", dir.path()}));
  EXPECT_EQ(taken.exit_code, 75);
  EXPECT_THAT(taken.err, HasSubstr("--metrics-port: cannot serve metrics on 0.0.0.0:"));
  EXPECT_THAT(taken.err, HasSubstr(absl::StrCat("cannot listen on port ", port,
                                                ": it is in use; "
                                                "choose another --metrics-port")));
  EXPECT_THAT(taken.err, Not(HasSubstr("CivetServer"))) << "civetweb's words mean nothing here";
  ::kill(agent->pid(), SIGTERM);
  EXPECT_EQ(agent->Wait(absl::Seconds(30)).exit_code, 143);
}

}  // namespace
}  // namespace ddprun::testing
