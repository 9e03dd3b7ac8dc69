// The trivial worker of the launch and restart benchmarks. It records, with the wall clock
// (shared by every process on the machine), the moment it started running, so that the
// benchmark can measure launch -> all workers running without trusting any launcher's logs.
//
//   bench_worker DIR exit         write DIR/start.<RANK>.<restart>, exit 0
//   bench_worker DIR crash-once   restart 0: rank 1 writes DIR/crash and exits 1, the others
//                                 wait to be stopped; later restarts write start.* and exit 0
//   bench_worker DIR hold         write start.*, wait until DIR/release exists, exit 0
//   bench_worker DIR hold-world   write DIR/start.<RANK>.w<WORLD_SIZE>, wait for DIR/release

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <string>

namespace {

long long NowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void Record(const std::string& path, long long ns) {
  const std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  fprintf(f, "%lld\n", ns);
  fclose(f);
  rename(tmp.c_str(), path.c_str());
}

std::string Env(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

}  // namespace

int main(int argc, char** argv) {
  const long long started = NowNs();
  if (argc != 3) return 64;
  const std::string dir = argv[1];
  const std::string mode = argv[2];
  const std::string rank = Env("RANK");
  const std::string restart = Env("TORCHELASTIC_RESTART_COUNT");
  if (mode != "hold-world") Record(dir + "/start." + rank + "." + restart, started);
  if (mode == "exit") return 0;
  if (mode == "crash-once") {
    // After the crash every start is a replacement: exit 0. (torchrun restarts a healthy
    // node without counting it, so TORCHELASTIC_RESTART_COUNT cannot tell.)
    const std::string crash = dir + "/crash";
    if (restart != "0" || access(crash.c_str(), F_OK) == 0) return 0;
    if (rank == "1") {
      // Crash only once every rank of the first round is running, so that no first start
      // can be mistaken for a restart.
      const int world = atoi(Env("WORLD_SIZE").c_str());
      for (int r = 0; r < world; ++r) {
        const std::string started_file = dir + "/start." + std::to_string(r) + ".0";
        while (access(started_file.c_str(), F_OK) != 0) usleep(1000);
      }
      Record(crash, NowNs());
      return 1;
    }
    for (;;) pause();
  }
  if (mode == "hold-world") {
    Record(dir + "/start." + rank + ".w" + Env("WORLD_SIZE"), started);
    const std::string release = dir + "/release";
    while (access(release.c_str(), F_OK) != 0) usleep(5000);
    return 0;
  }
  if (mode == "hold") {
    const std::string release = dir + "/release";
    while (access(release.c_str(), F_OK) != 0) usleep(5000);
    return 0;
  }
  return 64;
}
