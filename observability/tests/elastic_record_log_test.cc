// torchelastic's events as torch writes them: the expected texts below are what Python 3.11's
// json.dumps printed for the same values (see docs/events.md), so a line ddprun writes is the
// line torch would.

#include "observability/elastic_record_log.h"

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "observability/elastic_record_fields.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

using ::testing::HasSubstr;

TEST(EventLogTest, StringsAreEscapedAsPythonsJsonDumps) {
  EXPECT_EQ(PythonJsonString("plain"), "\"plain\"");
  EXPECT_EQ(PythonJsonString("quote\" back\\ nl\n tab\t cr\r bs\b ff\f ctl\x01 del\x7f"),
            R"("quote\" back\\ nl\n tab\t cr\r bs\b ff\f ctl\u0001 del\u007f")");
  EXPECT_EQ(PythonJsonString("\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80"),
            R"("\u00e9\u4e2d\ud83d\ude00")");
  EXPECT_EQ(PythonJsonString(""), "\"\"");
  EXPECT_EQ(PythonJsonString("bad \xff byte"), R"("bad \ufffd byte")");  // Python never holds one
}

TEST(EventLogTest, FloatsAreWrittenAsPythonsRepr) {
  EXPECT_EQ(PythonFloat(0.209221), "0.209221");
  EXPECT_EQ(PythonFloat(5.0), "5.0");
  EXPECT_EQ(PythonFloat(1e16), "1e+16");
  EXPECT_EQ(PythonFloat(4.5e-05), "4.5e-05");
  EXPECT_EQ(PythonFloat(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(PythonFloat(0.1), "0.1");
  EXPECT_EQ(PythonFloat(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(PythonFloat(12.5), "12.5");
  EXPECT_EQ(PythonFloat(0.0001), "0.0001");
  EXPECT_EQ(PythonFloat(123456.789), "123456.789");
  EXPECT_EQ(PythonFloat(-2.5e-07), "-2.5e-07");
  EXPECT_EQ(PythonFloat(0.0), "0.0");
}

TEST(EventLogTest, AWorkerEventHasTorchsKeysInTorchsOrderThenDdprunsRound) {
  RecordContext context;
  context.run_id = "job";
  context.role = "default";
  context.hostname = "node1";
  context.rdzv_backend = "c10d";
  context.entry_point = "python3";
  context.group_rank = 1;
  context.group_world_size = 2;
  context.restarts_used = 1;
  context.round = 3;
  WorkerFacts worker;
  worker.global_rank = 5;
  worker.local_rank = 1;
  worker.role_world_size = 8;
  worker.pid = 4242;
  worker.exit_code = -9;
  worker.failed_pid = 4242;
  EXPECT_EQ(
      SerializeRecord(StatusRecord(context, "FAILED", "WORKER", worker,
                                   std::string("{\"message\": \"<NONE>\"}"), std::nullopt)),
      R"({"name": "torchelastic.worker.status.FAILED", "source": "WORKER", "timestamp": 0, )"
      R"("metadata": {"run_id": "job", "global_rank": 5, "group_rank": 1, "worker_id": "4242", )"
      R"("role": "default", "hostname": "node1", "state": "FAILED", "total_run_time": 0, )"
      R"("rdzv_backend": "c10d", "raw_error": "{\"message\": \"<NONE>\"}", "metadata": )"
      R"("{\"group_world_size\": 2, \"entry_point\": \"python3\", \"local_rank\": [1], )"
      R"(\"role_rank\": [5], \"role_world_size\": [8], \"exit_code\": [-9], \"worker_pid\": )"
      R"([4242]}", "agent_restarts": 1, "duration_ms": null, "round": 3, "root_cause": null, )"
      R"("excluded": null}})");
}

TEST(EventLogTest, TheHandlerIsNullConsoleOrAFile) {
  EXPECT_EQ(ParseEventLogHandler("null")->kind, RecordLogSettings::Kind::kNull);
  EXPECT_EQ(ParseEventLogHandler("console")->kind, RecordLogSettings::Kind::kConsole);
  EXPECT_EQ(ParseEventLogHandler("file:/var/log/ev.jsonl")->path, "/var/log/ev.jsonl");
  absl::StatusOr<RecordLogSettings> bad = ParseEventLogHandler("dynamic_rendezvous");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("--event-log-handler='dynamic_rendezvous' is not valid: expected null, "
                        "console or file:PATH"));
  EXPECT_FALSE(ParseEventLogHandler("file:").ok());
}

// A link planted where the events go would choose what an agent (often root) writes to.
TEST(EventLogTest, AFileThatIsASymbolicLinkIsRefused) {
  testing::TempDir dir;
  const std::string target = dir.Write("target", "");
  const std::string link = dir.path() + "/events.jsonl";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  absl::StatusOr<RecordLog> log = RecordLog::Open(*ParseEventLogHandler("file:" + link));
  ASSERT_FALSE(log.ok());
  EXPECT_THAT(log.status().message(), HasSubstr("--event-log-handler=file:" + link + ": " + link +
                                                " is a symbolic link: give the file itself"));
  EXPECT_TRUE(RecordLog::Open(*ParseEventLogHandler("file:" + target)).ok());
}

}  // namespace
}  // namespace ddprun
