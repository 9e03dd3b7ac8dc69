// Moments: every observer sees every moment once, in the order they subscribed, and a
// moment announced while another is being seen follows it (the restart timeline's split).
#include "agent/moments.h"

#include <string>
#include <vector>

#include "agent/restart_timeline.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddprun {
namespace {

using ::testing::ElementsAre;

class Recorder : public MomentObserver {
 public:
  Recorder(std::string name, std::vector<std::string>& seen) : name_(name), seen_(seen) {}
  void See(const AgentMoment& moment) override {
    seen_.push_back(name_ + " " + MomentName(moment.kind));
  }

 private:
  const std::string name_;
  std::vector<std::string>& seen_;
};

// Announces a restart-explained moment whenever it sees workers start.
class Echo : public MomentObserver {
 public:
  explicit Echo(Moments& moments) : moments_(moments) {}
  void See(const AgentMoment& moment) override {
    if (moment.kind == AgentMoment::Kind::kWorkersStarted) {
      moments_.Announce(AgentMoment::Of(AgentMoment::Kind::kRestartExplained, moment.at));
    }
  }

 private:
  Moments& moments_;
};

TEST(Moments, EachObserverSeesEachMomentOnceInTheOrderTheySubscribed) {
  std::vector<std::string> seen;
  Moments moments;
  Recorder a("a", seen), b("b", seen);
  moments.Subscribe(a);
  moments.Subscribe(b);
  moments.Announce(AgentMoment::Of(AgentMoment::Kind::kJoinSent, absl::UnixEpoch()));
  moments.Announce(AgentMoment::Of(AgentMoment::Kind::kRunEnded, absl::UnixEpoch()));
  EXPECT_THAT(seen, ElementsAre("a join-sent", "b join-sent", "a run-ended", "b run-ended"));
}

TEST(Moments, AMomentAnnouncedWhileOneIsSeenFollowsItForEveryObserver) {
  std::vector<std::string> seen;
  Moments moments;
  Recorder a("a", seen), b("b", seen);
  Echo echo(moments);
  moments.Subscribe(a);
  moments.Subscribe(echo);
  moments.Subscribe(b);
  moments.Announce(AgentMoment::Of(AgentMoment::Kind::kWorkersStarted, absl::UnixEpoch()));
  EXPECT_THAT(seen, ElementsAre("a workers-started", "b workers-started", "a restart-explained",
                                "b restart-explained"));
}

// The restart timeline, subscribed to the stream, announces the split it makes whole.
TEST(Moments, TheRestartTimelineAnnouncesEachSplitItMakesWhole) {
  Moments moments;
  RestartTimeline timeline(&moments);
  std::vector<RestartSplit> splits;
  class Splits : public MomentObserver {
   public:
    explicit Splits(std::vector<RestartSplit>& out) : out_(out) {}
    void See(const AgentMoment& m) override {
      if (m.kind == AgentMoment::Kind::kRestartExplained) out_.push_back(*m.split);
    }

   private:
    std::vector<RestartSplit>& out_;
  } collector(splits);
  moments.Subscribe(timeline);
  moments.Subscribe(collector);
  const absl::Time t0 = absl::FromUnixSeconds(100);
  using Kind = AgentMoment::Kind;
  moments.Announce(AgentMoment::Of(Kind::kFailureSeen, t0));
  moments.Announce(AgentMoment::Of(Kind::kStopOrdered, t0 + absl::Milliseconds(20)));
  moments.Announce(AgentMoment::Of(Kind::kWorkersStopped, t0 + absl::Milliseconds(120)));
  AgentMoment starting = AgentMoment::Of(Kind::kRoundStarting, t0 + absl::Milliseconds(130));
  starting.assignment.emplace();
  starting.assignment->round = 3;
  starting.assignment->restart_count = 1;
  moments.Announce(starting);
  EXPECT_TRUE(splits.empty());
  moments.Announce(AgentMoment::Of(Kind::kWorkersStarted, t0 + absl::Milliseconds(160)));
  ASSERT_EQ(splits.size(), 1u);
  EXPECT_EQ(splits[0].round, 3);
  EXPECT_EQ(splits[0].total, absl::Milliseconds(160));
}

}  // namespace
}  // namespace ddprun
