#!/usr/bin/env python3
"""Runs the reliability scenarios and rewrites the matrix in docs/reliability.md from what
they measured (the "[ netns ]", "[ soak ]" and "[ slow link ]" lines the tests print).

  scripts/reliability_report.py [--build-dir build]     # as root, after scripts/build.sh

The netns scenarios need root; without it they are skipped and their rows say so.
"""
import argparse
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "reliability.md"
BEGIN, END = "<!-- matrix:begin -->", "<!-- matrix:end -->"

# (test, scenario, what the user sees, [(measure label, column)])
SCENARIOS = [
    ("NetnsTest.AWorkerCrashOnOneHostRestartsEveryHost", "worker crash (exit 7) on one of 2 hosts",
     "every worker on both hosts restarts once, RESTART_COUNT 1; exit 0", []),
    ("NetnsTest.AWorkerKilledByASignalEndsTheJobOnEveryHostWithItsStatus",
     "a worker killed by SIGABRT, no restart left", "both hosts exit 134 naming a rank on host 2 as the root cause", []),
    ("NetnsTest.NoLineAWorkerPrintsIsLost", "2 hosts x 2 workers print 5,000 lines each (--tee=1)",
     "every line on its host's console, none cut or mixed", []),
    ("MultiNode.OverASlowLinkTheJobStillFormsAndRestarts",
     "a slow link: 100 ms each way, a 300 ms stall every 7th chunk (a TCP proxy; no netem here)",
     "the job forms, a worker crash restarts every worker once, exit 0",
     [("100 ms each way with stalls: job formed, crashed and restarted in", "whole job")]),
    ("NetnsTest.AnAgentKilledTheSurvivorsGoOnWithoutIt", "agent SIGKILL on one of 3 hosts (--nnodes=2:3)",
     "the other two hosts restart without it, no restart spent; its workers die with it",
     [("agent SIGKILL: survivors running again after", "recovery")]),
    ("NetnsTest.APartitionedHostStopsItsWorkersTheOthersGoOnAndItRejoins",
     "a host's link goes down (partition), later up again",
     "the cut-off host stops its workers and waits; the others go on without it; healed, it "
     "rejoins and the job grows back",
     [("partition: cut-off host's workers stopped after", "detection"),
      ("partition: the other hosts running again after", "recovery"),
      ("partition: healed host back in the job after", "rejoin")]),
    ("NetnsTest.ALateJoinerGrowsTheJobWithoutSpendingARestart", "a third host joins a running 2:3 job",
     "every worker restarts once with WORLD_SIZE 6, no restart spent",
     [("late joiner: all 3 hosts running after", "recovery")]),
    ("NetnsTest.AFlappingHostComesBackEachTime", "a host's link goes down and up 3 times (`--max-node-flaps=4`)",
     "each time it stops its workers and rejoins; no restart spent; exit 0", []),
    ("NetnsTest.AHostThatKeepsFailingIsExcludedAndTheJobFinishesWithoutIt",
     "host 3's workers fail whenever they run there (`--nnodes=2:3 --max-restarts=5 "
     "--max-node-failures=2 --node-cooldown=0`)",
     "after 2 failures host 3 is excluded (its agent exits 69); hosts 1-2 go on and finish, exit 0; "
     "restarts spent: 2; every summary names host 3 with its count",
     [("node excluded: 2nd failure on node3 to hosts 1-2 running again", "recovery")]),
    ("NetnsTest.ASpareHostTakesTheExcludedHostsPlaceAtOnce",
     "the same with a spare host 4 waiting at the `--nnodes` maximum (`--max-node-failures=1`)",
     "host 4 takes host 3's place in the very next round",
     [("spare: failure on node3 to hosts 1, 2 and the spare running", "recovery")]),
    ("NetnsTest.AHostWhoseHealthCheckFailsNeverJoinsAndTheSummaryShowsWhy",
     "host 2's `--health-check` fails",
     "host 2 never joins; the job starts on hosts 1 and 3; every summary shows host 2's check output",
     [("health check: node2's agent started to kept out", "detection")]),
    ("NetnsTest.AHostWhoseLinkFlapsPastTheLimitIsExcluded",
     "a host's link goes down twice (`--max-node-flaps=2 --node-cooldown=0`)",
     "back after the first; excluded at the second (exit 69); the others go on; no restart spent", []),
    ("NetnsTest.AnExcludedHostThatHostsTheMasterServesItUntilTheOthersFinish",
     "host 1 hosts the master and its check fails (`--node-cooldown=0`)",
     "host 1 runs no worker but serves the master until hosts 2-3 finish (exit 0), then exits 69", []),
    ("NetnsTest.ACooldownEndsAndTheNodeIsAdmittedAgainInTheNextRound",
     "host 3's check fails once, `--node-cooldown=1`",
     "kept out, checked again after 1 s, taken in at the next round (no restart spent)",
     [("cooldown: node3 kept out to in the job (cooldown 1 s)", "recovery")]),
    ("NetnsTest.TheMasterOnItsOwnHostKilledAndRestartedStopsNoWorker",
     "ddprun-master on its own host SIGKILLed, started again 3 s later",
     "no worker stops (each started once); the new master takes round 0 up from the agents, "
     "which have their places back; no restart spent",
     [("master restart: every agent back in its round after", "recovery")]),
    ("NetnsTest.TheMastersHostCutOffForFiveSecondsStopsNoWorker",
     "ddprun-master's host cut off (link down) for 5 s, then back",
     "the agents lose it and find group rank 0's store still there: their workers go on; "
     "healed, each has its place back; no worker stops",
     [("master's host cut off for 5 s: every agent back in its round after healing", "rejoin")]),
    ("EtcdNetnsTest.EtcdsLeaderMemberKilledNothingHappensToTheJob",
     "etcd-v3, a 3-member etcd (one member on each of the 3 hosts), `lease_ttl=8`: etcd's "
     "leader member SIGKILLed mid-job",
     "etcd elects another among the two left; the run's leader stays, no agent loses its master, "
     "every worker started once",
     [("etcd leader member SIGKILL: etcd has a new leader after", "detection")]),
    ("EtcdNetnsTest.TheLeadersHostCutOffTheOthersReformWithoutItUnderANewLeader",
     "etcd-v3, `--nnodes=2:3`, `lease_ttl=3`: the run's leader's host cut off (its etcd member "
     "with it)",
     "its lease runs out, another host leads, the other two re-form without it (no restart "
     "spent); the cut-off host stops its own workers",
     [("leader's host cut off: the others running again (round 1) after", "recovery")]),
    ("EtcdNetnsTest.TheNodeTheJobStartedFromLostForGoodTheJobGoesOnWithTwo",
     "etcd-v3, `--nnodes=2:3`: host 1 (the first agent: the run's leader and group rank 0) lost "
     "for good, its etcd member too",
     "the two left elect a leader, re-form without it (no restart spent) and finish, exit 0",
     [("first node lost for good: the other two running again (round 1) after", "recovery")]),
    ("EtcdNetnsTest.EtcdQuorumLostTheWorkersGoOnAndTheRoundGoesOnWhenItIsBack",
     "etcd-v3: 2 of the 3 etcd members frozen (quorum lost), thawed later",
     "workers go on; the run's leader steps down once it cannot renew its lease, the agents say "
     "etcd does not answer, no round re-forms; quorum back, a leader is elected and every agent "
     "has its place back: no worker stops",
     [("etcd quorum lost: the run's leader stepped down after", "detection"),
      ("etcd quorum lost: every agent back in its round after quorum returned", "quorum back")]),
    ("EtcdV3.TheLeadersAgentKilledTheOthersGoOnUnderANewLeaderAtOnce",
     "etcd-v3 (one member, loopback), 3 agents `--nnodes=2:3`: the run's leader's agent SIGKILLed",
     "nothing listens at its address any more: its lease is revoked and another leads at once; the "
     "other two re-form without it (no restart spent), well before a 20 s lease ran out", []),
    ("EtcdV3.TheNextLeaderTakesOverWhatTheLastOneRemembered",
     "etcd-v3, `--max-node-failures=2`: a node's worker fails, then the run's leader's agent is "
     "SIGKILLed",
     "the leader kept the run's memory in etcd (fenced by its election); the next leader's master "
     "still counts that node's failure and the restart spent", []),
    ("EtcdV3.ACertificateEitherSideDoesNotTrustIsRefusedWithTheSettingsToCheck",
     "etcd-v3 over TLS with client certificates: etcd's certificate not signed by `cacert`; then "
     "a client certificate etcd does not trust; then the right files",
     "the first refused at once (exit 75, the keys to check); the second said with the keys to "
     "check, exit 75 at join_timeout; the right files run", []),
    ("EtcdV3.TwoRunsOnOneEtcdKeepApart", "etcd-v3: two run ids on one etcd",
     "each job has its own leader, ranks and world size; both runs' keys gone after", []),
    ("EtcdV3.AWrongPasswordIsRefusedWithTheSettingsToCheck",
     "etcd-v3 with etcd authentication: a wrong password, then the right one",
     "refused: exit 75 with etcd's reason and the keys to check; the right one runs", []),
    ("NetnsTest.TwoJobsOnOneMasterDoNotSeeEachOther", "two run ids on one ddprun-master",
     "each job has its own ranks and world size", []),
    ("MultiNode.SilentMasterTheWorkersGoOnAndTheAgentsHaveTheirPlacesBackWhenItAnswers",
     "master stops answering (SIGSTOP), then answers again",
     "agents notice within keep_alive_interval + heartbeat_timeout; their workers go on; each "
     "has its place back when the master answers", []),
    ("MultiNode.KillNineOfOneAgentLeavesTheOtherRunningAlone",
     "agent SIGKILL (2 agents on loopback, --nnodes=1:2)",
     "its connection breaks and nothing listens on its store's port any more: the other node "
     "goes on alone at once, no restart spent", []),
    ("DdpAcrossHosts.TheStaticFormTrains",
     "real DDP (torch 1.13, gloo), 2 hosts x 2 workers, torchrun's static command line; host "
     "names loopback on each host, no --local-addr",
     "trains; workers get --master-addr:--master-port and the agent's store there", []),
    ("DdpAcrossHosts.TheC10dFormTrains", "the same with torchrun's c10d command line",
     "trains; the hosting node has group rank 0: its store on the endpoint's port", []),
    ("DdpAcrossHosts.ASecondHostJoiningLaterGrowsTheJob", "real DDP, --nnodes=1:2, a second host joins",
     "both restart as one world of 4 and train; no restart spent", []),
    ("DdpAcrossHosts.ACrashOnTheSecondHostRestartsBothAndTrainsTheSame",
     "real DDP, a worker on the second host crashes at step 5",
     "every worker restarts (RESTART_COUNT 1) and ends with the parameters of an uncrashed run", []),
    ("DdpAcrossHosts.RankZeroOnAHostThatIsNotTheEndpoint",
     "real DDP, ddprun-master on a third host",
     "trains; MASTER_ADDR is the address the master saw group rank 0's agent connect from", []),
    ("DdpAcrossHosts.TheMasterKilledAndStartedAgain3sLaterStopsNoWorker",
     "real DDP on 2 hosts, ddprun-master on a third SIGKILLed mid-training, started again 3 s "
     "later",
     "no worker restarted (the same pids), TORCHELASTIC_RESTART_COUNT 0; every rank's parameters "
     "and losses equal an undisturbed run's", []),
    ("DdpAcrossHosts.TheMastersHostCutOffFor5sStopsNoWorker",
     "real DDP on 2 hosts, the master's host cut off for 5 s mid-training",
     "the same: no worker restarted, losses equal an undisturbed run's", []),
    ("DdpAcrossHosts.TheEtcdFormTrainsAndACrashRestartsBothToTheSameParameters",
     "real DDP, torchrun's `--rdzv_backend=etcd` command line (run on etcd's v3 API), a worker "
     "crashes at step 5",
     "every worker restarts (RESTART_COUNT 1) and ends with the parameters of an uncrashed run", []),
    ("DdpAcrossHosts.EtcdFrozenMidTrainingStopsNoWorker",
     "real DDP on 2 hosts, etcd (one member, a third host) frozen for 4 s mid-training",
     "the run's leader steps down, the workers go on; etcd back, a leader is elected: no worker "
     "restarted (the same pids), RESTART_COUNT 0, losses equal an undisturbed run's", []),
    ("DdpAcrossHosts.WorkersThatCannotMeetAreStoppedWithTheirMeetingPointNamed",
     "real DDP, group rank 0 gives a --local-addr where no store is; the job is stopped",
     "workers retry in init_process_group; stopped, each node's summary names their MASTER_ADDR "
     "and MASTER_PORT", []),
    ("NetnsTest.AnOperatorOnAnotherHostSeesTheJobAndStopsIt",
     "an operator on a third host runs `ddprun status`, reads /api/v1/status, then `ddprun stop`",
     "the table names both hosts; every agent stops its workers and exits 0; nothing left",
     [("ddprun stop: every agent exited 0 within", "recovery")]),
    ("Soak.TwoHundredCrashRestartCyclesKeepTheLaunchersFlat", "200 crash-and-restart cycles, 2 agents",
     "fds, threads and RSS of ddprun-master and both agents stay flat; nothing left", []),
]


def run(build_dir):
    names = "|".join(re.escape(t.split(".", 1)[1]) for t, *_ in SCENARIOS)
    proc = subprocess.run(["ctest", "--test-dir", str(build_dir), "-V", "-R", names],
                          capture_output=True, text=True)
    return proc.stdout


def table(output):
    measures = dict(re.findall(r"\[ (?:netns|soak|slow link) \] (.*?) ([0-9.]+) ms", output))
    soak = re.findall(r"\[ soak \] (.*)", output)
    status = {}
    for m in re.finditer(r"Test +#\d+: (\S+) \.+\s*\**\s*(Passed|Failed|Skipped|Not Run)", output):
        status[m.group(1)] = m.group(2)
    rows = ["| scenario | what the user sees | detection | recovery | orphans | result | test |",
            "|---|---|---|---|---|---|---|"]
    for test, scenario, sees, wanted in SCENARIOS:
        cols = {"detection": "-", "recovery": "-"}
        for label, column in wanted:
            if label in measures:
                value = f"{float(measures[label]):.0f} ms"
                if column == "whole job":
                    cols["recovery"] = f"whole job (form, crash, restart, finish): {value}"
                elif column == "rejoin":
                    cols["recovery"] += f"; back {value} after healing"
                elif column == "quorum back":
                    cols["recovery"] += f"; every agent back {value} after quorum returned"
                else:
                    cols[column] = value
        result = status.get(test, "not run")
        # The netns scenarios and the soak check that nothing of theirs is left running.
        checks_orphans = test.startswith(("NetnsTest.", "EtcdNetnsTest.", "DdpAcrossHosts.", "Soak."))
        orphans = ("0" if result == "Passed" else "?") if checks_orphans else "not checked"
        rows.append(f"| {scenario} | {sees} | {cols['detection']} | {cols['recovery']} | {orphans} "
                    f"| {result} | `{test}` |")
    lines = "\n".join(rows)
    if soak:
        lines += "\n\nSoak footprint (sampled after cycle 10 and after cycle 190):\n\n" + "\n".join(
            f"- {line}" for line in soak)
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", default=str(ROOT / "build"))
    args = parser.parse_args()
    output = run(args.build_dir)
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        sys.exit(f"{DOC} has no {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{BEGIN}\n{table(output)}\n{END}{tail}")
    print(f"rewrote the matrix in {DOC}")


if __name__ == "__main__":
    main()
