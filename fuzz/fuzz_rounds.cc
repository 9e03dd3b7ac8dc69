// The rendezvous rules: a RoundStateMachine fed an arbitrary sequence of joins (some with a
// failed health check, some of agents that can be restarted in place), resumes (an agent that
// lost its master asking for its place back in some round, with a proof of its place, some
// forged: a restarted master takes rounds up from them), heartbeats, "stopped" notes, broken
// streams, byes, agents found gone, outages, reports, unhealthy leaves and clock ticks from up to 8
// sessions, with node-health limits and an exclude list. Besides no crash, every round it closes
// must be sound: no more members than --nnodes allows, group ranks 0..n-1, RANK offsets that add up
// to WORLD_SIZE, every assignment of a round the same, whether sent as the answer to joins or with
// the stop orders of a restart in place, and its proof holding for its member's agent; a store
// opens only for the running round, at group rank 0; and after every step, no host the run keeps
// out among a running round's members.

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz/fuzz_input.h"
#include "rendezvous/round_proof.h"
#include "rendezvous/round_state_machine.h"

namespace {

using ddprun::Outbound;

void Require(bool condition) {
  if (!condition) __builtin_trap();
}

// The round an outbound message begins for its session: an assignment, or the next round
// sent with a stop order; nullptr for others.
const ddprun::Assignment* Begun(const Outbound& o) {
  if (o.kind == Outbound::Kind::kAssign) return &o.assignment;
  if (o.kind == Outbound::Kind::kStop && o.next) return &*o.next;
  return nullptr;
}

void CheckRound(const std::vector<Outbound>& out, const ddprun::RendezvousSettings& settings,
                const std::map<ddprun::SessionId, std::string>& incarnation_of) {
  std::map<int64_t, std::vector<const Outbound*>> by_round;
  for (const Outbound& o : out) {
    if (const ddprun::Assignment* a = Begun(o)) by_round[a->round].push_back(&o);
  }
  for (const auto& [round, assigns] : by_round) {
    Require(static_cast<int>(assigns.size()) <= settings.max_nodes);
    std::set<int> group_ranks;
    int ranks = 0;
    const ddprun::Assignment& first = *Begun(*assigns.front());
    for (const Outbound* o : assigns) {
      const ddprun::Assignment& a = *Begun(*o);
      Require(o->kind == assigns.front()->kind);  // one path per round
      Require(a.group_world_size == static_cast<int>(assigns.size()));
      Require(a.world_size == first.world_size);
      Require(a.restart_count == first.restart_count);
      Require(a.restart_count <= settings.max_restarts);
      Require(a.base_rank >= 0 && a.base_rank < a.world_size);
      // Its proof holds for its own agent: a restarted master could take it up.
      Require(ddprun::ProofHolds(a, incarnation_of.at(o->session)));
      group_ranks.insert(a.group_rank);
      ranks += 2;  // every node joins with local_world_size 2 below
    }
    Require(static_cast<int>(group_ranks.size()) == static_cast<int>(assigns.size()));
    std::set<ddprun::SessionId> sessions;
    for (const Outbound* o : assigns) sessions.insert(o->session);
    Require(sessions.size() == assigns.size());  // one assignment per session and round
    Require(*group_ranks.rbegin() == static_cast<int>(assigns.size()) - 1);
    Require(first.world_size == ranks);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddprun::fuzz::FuzzInput in(data, size);
  ddprun::RendezvousSettings settings;
  settings.min_nodes = 1 + in.Below(3);
  settings.max_nodes = settings.min_nodes + in.Below(3);
  settings.max_restarts = in.Below(4);
  settings.join_timeout = absl::Seconds(1 + in.Below(20));
  settings.last_call_timeout = absl::Milliseconds(in.Below(3000));
  settings.keep_alive_interval = absl::Milliseconds(1 + in.Below(2000));
  settings.keep_alive_max_attempt = 1 + in.Below(3);
  settings.exit_barrier_timeout = absl::Seconds(in.Below(10));
  settings.node_health.max_node_failures = in.Below(3);
  settings.node_health.max_node_flaps = in.Below(3);
  settings.node_health.node_cooldown =
      in.Below(4) == 0 ? absl::InfiniteDuration() : absl::Milliseconds(1 + in.Below(5000));
  if (in.Below(4) == 0) settings.node_health.exclude_hosts = {absl::StrCat("node", in.Below(4))};
  std::map<ddprun::SessionId, std::string> host_of;         // the host of each session's last join
  std::map<ddprun::SessionId, std::string> incarnation_of;  // and its incarnation
  absl::Time now = absl::UnixEpoch();
  ddprun::RoundStateMachine rounds(settings, now);
  for (int steps = 0; !in.empty() && steps < 2000; ++steps) {
    const ddprun::SessionId session = 1 + in.Below(8);
    switch (in.Below(10)) {
      case 0:
      case 7: {
        ddprun::NodeInfo node;
        node.host = absl::StrCat("node", in.Below(4));
        node.addr = node.host;
        node.pid = in.Below(3);
        node.incarnation = absl::StrCat("inc", in.Below(10));  // sometimes an old session's
        node.local_world_size = 2;
        node.node_rank_hint = in.Below(3) - 1;
        node.last_round = in.Below(4) - 1;
        node.restarts_seen = in.Below(3);
        if (in.Below(6) == 0) node.failed_check = "it ended with exit code 1";
        node.restarts_in_place = in.Below(2) == 0;
        if (in.Below(2) == 0) {  // a resume, of the running round or another
          ddprun::Assignment resumed;
          resumed.round = std::max<int64_t>(0, rounds.round() + in.Below(3) - 1);
          resumed.group_world_size = 1 + in.Below(3);
          resumed.group_rank = in.Below(resumed.group_world_size);
          resumed.base_rank = 2 * resumed.group_rank;
          resumed.world_size = 2 * resumed.group_world_size;
          resumed.restart_count = in.Below(4);
          // Its proof, as a master would have made it: the other places' agents are inc0,
          // inc1, ..., by group rank, so that resumes of several sessions can agree.
          std::vector<ddprun::Assignment> round(resumed.group_world_size, resumed);
          std::vector<ddprun::Assignment*> places;
          std::vector<std::string> incarnations;
          for (int g = 0; g < resumed.group_world_size; ++g) {
            round[g].group_rank = g;
            round[g].base_rank = 2 * g;
            places.push_back(&round[g]);
            incarnations.push_back(g == resumed.group_rank ? node.incarnation
                                                           : absl::StrCat("inc", g));
          }
          ddprun::ProveRound(places, {incarnations.begin(), incarnations.end()});
          resumed = round[resumed.group_rank];
          if (in.Below(8) == 0) resumed.round_digest[in.Below(32)] ^= 1;  // a forged one
          node.resume = resumed;
        }
        host_of[session] = node.host;
        incarnation_of[session] = node.incarnation;
        (void)rounds.Join(session, node, now);
        break;
      }
      case 5:
        if (in.Below(16) == 0) {
          rounds.Stop("stopped by request", now);  // `ddprun stop`, rarely: it ends the run
        } else {
          rounds.Leave(session, "unhealthy", now);
        }
        break;
      case 1:
        rounds.Heartbeat(session, now);
        break;
      case 2:
        rounds.Disconnect(session, now);
        break;
      case 3: {
        ddprun::ReportedFailure failure;
        failure.host = "node";
        failure.rank = in.Below(8);
        failure.time = now;
        failure.peer_lost = in.Below(2) == 0;
        rounds.ReportFailure(session, rounds.round() - in.Below(2), {failure}, now);
        break;
      }
      case 4:
        rounds.ReportSuccess(session, rounds.round() - in.Below(2), now);
        break;
      case 6:
        rounds.ReportStopped(session, rounds.round() - in.Below(2));
        break;
      case 8:
        switch (in.Below(3)) {
          case 0:
            rounds.Bye(session, now);
            break;
          case 1:
            rounds.AgentGone(session, now);
            break;
          default:
            rounds.OutageExplained(session, rounds.round(), absl::Milliseconds(in.Byte()));
        }
        break;
      default:
        now += absl::Milliseconds(in.Byte()) * (1 + in.Below(40));
        rounds.Tick(now);
        break;
    }
    const std::vector<Outbound> out = rounds.TakeOutbound();
    CheckRound(out, settings, incarnation_of);
    for (const Outbound& o : out) {  // group rank 0's store opens for the running round only
      Require(o.kind != Outbound::Kind::kOpenStore ||
              (o.store_round == rounds.round() && !rounds.members().empty() &&
               o.session == rounds.members().front()));
    }
    // A host the run keeps out has no agent in a running round once a step is done. (While
    // finishing, its members may finish: stopping them would fail a run that may succeed.)
    for (ddprun::SessionId member : rounds.members()) {
      auto host = host_of.find(member);  // none: a place a restarted master holds
      Require(rounds.phase() != ddprun::RoundStateMachine::Phase::kRunning ||
              host == host_of.end() || !rounds.health().Excluded(host->second, now));
    }
    Require(static_cast<int>(rounds.members().size()) <= settings.max_nodes);
    Require(rounds.restarts_spent() <= settings.max_restarts);
    // The record of rounds (the status): rounds in order, each ended but the last, which
    // runs exactly while a round runs; the status shows the members in group-rank order.
    const auto& history = rounds.history();
    const bool runs = rounds.phase() == ddprun::RoundStateMachine::Phase::kRunning ||
                      rounds.phase() == ddprun::RoundStateMachine::Phase::kFinishing;
    for (size_t i = 0; i < history.size(); ++i) {
      Require(i == 0 || history[i].round > history[i - 1].round);
      Require(history[i].ended >= history[i].began);
      Require(history[i].ended != absl::InfiniteFuture() || (i + 1 == history.size() && runs));
    }
    Require(!runs || (!history.empty() && history.back().round == rounds.round() &&
                      history.back().ended == absl::InfiniteFuture()));
    const std::vector<ddprun::NodeView> nodes = rounds.Nodes();
    for (size_t i = 0; i < rounds.members().size(); ++i) {
      Require(nodes.at(i).session == rounds.members()[i] &&
              nodes[i].group_rank == static_cast<int>(i));
    }
  }
  return 0;
}
