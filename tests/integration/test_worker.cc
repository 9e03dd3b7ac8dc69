// A small worker program for the integration tests: each mode is one behaviour a real
// training process can have (print its environment, crash, hang, ignore SIGTERM, fork,
// flood its output). Files it writes let the tests wait on events instead of sleeping.
//
//   test_worker env DIR                 write the environment to DIR/env.<RANK>.<restart>
//   test_worker crash-once RANK CODE DIR  on restart 0 that rank exits CODE, the others wait
//                                       to be stopped; later attempts write DIR/ran.<RANK>.<n>
//   test_worker crash-until N DIR       while TORCHELASTIC_RESTART_COUNT < N, rank 1 exits 1 (at
//                                       restart K it first writes DIR/at.K and waits for
//                                       DIR/go.K when DIR/pause.K exists; every rank then
//                                       writes DIR/up.K.<RANK>) and the others wait to be
//                                       stopped; at restart N every rank exits 0
//   test_worker heartbeat-hang DIR      beat on DDPRUN_HEARTBEAT_FD every 20 ms; on restart 0,
//                                       rank 1 stops beating after 3 beats and hangs; on later
//                                       restarts every rank writes DIR/ran.<RANK>.<restart>
//                                       and exits 0 before its first beat
//   test_worker late-heartbeat MS       start beating only after MS ms (an `import torch`
//                                       that holds the GIL), then beat 5 times and exit 0
//   test_worker wait-signal DIR         write DIR/ready.<RANK>, then on a signal write its
//                                       name to DIR/signal.<RANK> and exit 128+signal
//   test_worker ignore-term DIR         ignore SIGTERM, write DIR/ready.<RANK>, wait forever
//   test_worker fork-tree DIR           fork a child that waits forever; write
//                                       "<own pid> <child pid>" to DIR/pids.<RANK>; wait
//   test_worker escape DIR              fork a child that calls setsid() and waits forever;
//                                       write its pid to DIR/escaped.<RANK>; exit 0
//   test_worker escape-and-wait DIR     the same, then wait forever
//   test_worker progress DIR            write "progress 50%\r" to stderr, wait for DIR/release
//   test_worker round-env DIR           write the environment to DIR/env.<RANK>.r<DDPRUN_ROUND>,
//                                       then wait for DIR/release and exit 0
//   test_worker count-starts DIR        append "started round=<DDPRUN_ROUND> restart=<count>" to
//                                       DIR/starts.<RANK>, wait for DIR/release; on SIGTERM
//                                       append "stopped" and exit 143
//   test_worker fail-on-host HOST DIR   as count-starts, and the line also says host=<name>
//                                       t=<unix us>; on host HOST (gethostname) local rank 0
//                                       appends "failing t=<unix us>" to DIR/failures and exits 1
//                                       (when DIR/gated exists, once DIR/fail-now does)
//   test_worker spew N                  print N numbered lines to stdout as fast as it can
//   test_worker partial TEXT            print TEXT with no newline and exit 0
//   test_worker error-file CODE         write a torch-format error file, exit CODE
//   test_worker huge-error-file CODE    rank 1 writes an error file with a 100 KB message and
//                                       exits CODE; the others wait to be stopped
//   test_worker vfork-wait              vfork() a child that never execs or exits: the worker
//                                       waits in uninterruptible sleep (killable) for good
//   test_worker wedge DIR               local rank 0: write its pid to DIR/pid.<RANK> and wait
//                                       (the test freezes it: tests/support/freezer.h); local
//                                       rank 1: write DIR/ready.<RANK>, wait for DIR/fail, exit 1
//   test_worker exit CODE               exit CODE
//   test_worker kill-self SIG           die of signal SIG
//   test_worker args ARGS...            print each argument on its own line: arg=<value>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <string>

extern char** environ;

namespace {

std::string Env(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

std::string Rank() { return Env("RANK"); }

long long NowMicros() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}
std::string Restart() { return Env("TORCHELASTIC_RESTART_COUNT"); }

// Writes `content` to `path` atomically (rename), so a test never reads half a file.
void WriteFile(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << content;
  }
  rename(tmp.c_str(), path.c_str());
}

[[noreturn]] void WaitForever() {
  for (;;) pause();
}

// count-starts: where a stop is recorded, set before the handler is installed.
char g_starts_path[4096];
void RecordStop(int) {
  const int fd = open(g_starts_path, O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd >= 0) {
    const char line[] = "stopped\n";
    (void)!write(fd, line, sizeof line - 1);
    close(fd);
  }
  _exit(128 + SIGTERM);
}

std::string g_signal_dir;
void RecordSignal(int sig) {
  const std::string path = g_signal_dir + "/signal." + Rank();
  WriteFile(path, std::string("SIG") + sigabbrev_np(sig));
  _exit(128 + sig);
}

int Usage() {
  fprintf(stderr, "test_worker: unknown mode; see the comment at the top of test_worker.cc\n");
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  const std::string mode = argv[1];
  if (mode == "env" && argc == 3) {
    std::string all;
    for (char** e = environ; *e; ++e) all += std::string(*e) + "\n";
    WriteFile(std::string(argv[2]) + "/env." + Rank() + "." + Restart(), all);
    return 0;
  }
  if (mode == "crash-once" && argc == 5) {
    const std::string dir = argv[4];
    if (Restart() != "0") {
      WriteFile(dir + "/ran." + Rank() + "." + Restart(), Env("MASTER_PORT"));
      return 0;
    }
    WriteFile(dir + "/port." + Rank() + ".0", Env("MASTER_PORT"));
    if (Rank() == argv[2]) {
      fprintf(stderr, "rank %s: simulated crash\n", argv[2]);
      return atoi(argv[3]);
    }
    WaitForever();
  }
  if (mode == "crash-until" && argc == 4) {
    const std::string dir = argv[3];
    const std::string count = Restart();
    if (atoi(count.c_str()) >= atoi(argv[2])) return 0;
    const bool pause = access((dir + "/pause." + count).c_str(), F_OK) == 0;
    if (pause) WriteFile(dir + "/up." + count + "." + Rank(), "");  // every rank runs
    if (Rank() != "1") WaitForever();
    // A checkpoint the test asked for: it samples the launchers, then lets the crash happen.
    if (pause) {
      WriteFile(dir + "/at." + count, "");
      const std::string go = dir + "/go." + count;
      while (access(go.c_str(), F_OK) != 0) usleep(2000);
    }
    std::fprintf(stderr, "test_worker: rank 1 fails on purpose (crash-until %s, restart %s)\n",
                 argv[2], count.c_str());
    return 1;
  }
  if (mode == "heartbeat-hang" && argc == 3) {
    const int fd = atoi(Env("DDPRUN_HEARTBEAT_FD").c_str());
    if (Restart() != "0") {
      // The restart succeeds at once, before any beat: it is under the startup bound, not
      // --worker-heartbeat-timeout, which a loaded machine's pause between beats could pass.
      WriteFile(std::string(argv[2]) + "/ran." + Rank() + "." + Restart(), "");
      return 0;
    }
    for (int beat = 0;; ++beat) {
      if (Rank() == "1" && beat == 3) WaitForever();  // hung: no more beats
      (void)!write(fd, ".", 1);
      usleep(20000);
    }
  }
  if (mode == "late-heartbeat" && argc == 3) {
    const int fd = atoi(Env("DDPRUN_HEARTBEAT_FD").c_str());
    usleep(static_cast<useconds_t>(atoi(argv[2])) * 1000);
    for (int beat = 0; beat < 5; ++beat) {
      (void)!write(fd, ".", 1);
      usleep(20000);
    }
    return 0;
  }
  if (mode == "wait-signal" && argc == 3) {
    g_signal_dir = argv[2];
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) signal(sig, RecordSignal);
    WriteFile(g_signal_dir + "/ready." + Rank(), "");
    WaitForever();
  }
  if (mode == "ignore-term" && argc == 3) {
    signal(SIGTERM, SIG_IGN);
    WriteFile(std::string(argv[2]) + "/ready." + Rank(), "");
    WaitForever();
  }
  if (mode == "fork-tree" && argc == 3) {
    const pid_t child = fork();
    if (child == 0) WaitForever();
    WriteFile(std::string(argv[2]) + "/pids." + Rank(),
              std::to_string(getpid()) + " " + std::to_string(child));
    WaitForever();
  }
  if ((mode == "escape" || mode == "escape-and-wait") && argc == 3) {
    const pid_t child = fork();
    if (child == 0) {
      setsid();
      WaitForever();
    }
    WriteFile(std::string(argv[2]) + "/escaped." + Rank(), std::to_string(child));
    if (mode == "escape-and-wait") WaitForever();
    return 0;
  }
  if (mode == "progress" && argc == 3) {
    fputs("progress 50%\r", stderr);
    const std::string release = std::string(argv[2]) + "/release";
    while (access(release.c_str(), F_OK) != 0) usleep(2000);
    return 0;
  }
  if (mode == "round-env" && argc == 3) {
    std::string all;
    for (char** e = environ; *e; ++e) all += std::string(*e) + "\n";
    const std::string dir = argv[2];
    WriteFile(dir + "/env." + Rank() + ".r" + Env("DDPRUN_ROUND"), all);
    const std::string release = dir + "/release";
    while (access(release.c_str(), F_OK) != 0) usleep(2000);
    return 0;
  }
  if ((mode == "count-starts" && argc == 3) || (mode == "fail-on-host" && argc == 4)) {
    const bool fail_on_host = mode == "fail-on-host";
    const std::string dir = argv[fail_on_host ? 3 : 2];
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    if (fail_on_host) {
      std::ofstream(dir + "/starts." + Rank(), std::ios::app)
          << "started round=" << Env("DDPRUN_ROUND") << " restart=" << Restart() << " host=" << host
          << " t=" << NowMicros() << "\n";
      if (std::string(host) == argv[2] && Env("LOCAL_RANK") == "0") {
        if (access((dir + "/gated").c_str(), F_OK) == 0) {
          while (access((dir + "/fail-now").c_str(), F_OK) != 0) usleep(2000);
        }
        std::ofstream(dir + "/failures", std::ios::app) << "failing t=" << NowMicros() << "\n";
        return 1;
      }
    }
    const std::string starts = dir + "/starts." + Rank();
    snprintf(g_starts_path, sizeof g_starts_path, "%s", starts.c_str());
    signal(SIGTERM, RecordStop);
    if (!fail_on_host) {
      std::ofstream(starts, std::ios::app)
          << "started round=" << Env("DDPRUN_ROUND") << " restart=" << Restart() << "\n";
    }
    const std::string release = dir + "/release";
    while (access(release.c_str(), F_OK) != 0) usleep(2000);
    return 0;
  }
  if (mode == "spew" && argc == 3) {
    const long n = atol(argv[2]);
    for (long i = 0; i < n; ++i) printf("rank %s line %ld\n", Rank().c_str(), i);
    return 0;
  }
  if (mode == "partial" && argc == 3) {
    fputs(argv[2], stdout);
    return 0;
  }
  if (mode == "error-file" && argc == 3) {
    WriteFile(Env("TORCHELASTIC_ERROR_FILE"),
              "{\"message\": {\"message\": \"RuntimeError: rank " + Rank() +
                  " hit a bad batch\", \"extraInfo\": {\"py_callstack\": \"Traceback (most "
                  "recent call last):\\n  File \\\"train.py\\\", line 7\", \"timestamp\": \"" +
                  std::to_string(time(nullptr)) + "\"}}}");
    return atoi(argv[2]);
  }
  if (mode == "huge-error-file" && argc == 3) {  // rank 1 only: a 100 KB message, exit CODE
    if (Rank() != "1") WaitForever();
    WriteFile(Env("TORCHELASTIC_ERROR_FILE"),
              "{\"message\": {\"message\": \"RuntimeError: " + std::string(100000, 'x') +
                  "\", \"extraInfo\": {\"py_callstack\": \"\", \"timestamp\": \"" +
                  std::to_string(time(nullptr)) + "\"}}}");
    return atoi(argv[2]);
  }
  if (mode == "vfork-wait" && argc == 2) {
    if (vfork() == 0) WaitForever();  // the parent stays in do_vfork's wait: state D
    return 1;                         // not reached while the child lives
  }
  if (mode == "wedge" && argc == 3) {
    const std::string dir = argv[2];
    if (Env("LOCAL_RANK") == "1") {
      WriteFile(dir + "/ready." + Rank(), "");
      while (access((dir + "/fail").c_str(), F_OK) != 0) usleep(10000);
      return 1;
    }
    WriteFile(dir + "/pid." + Rank(), std::to_string(getpid()));
    WaitForever();
  }
  if (mode == "exit" && argc == 3) return atoi(argv[2]);
  if (mode == "kill-self" && argc == 3) {
    kill(getpid(), atoi(argv[2]));
    WaitForever();
  }
  if (mode == "args") {
    for (int i = 2; i < argc; ++i) printf("arg=%s\n", argv[i]);
    return 0;
  }
  return Usage();
}
