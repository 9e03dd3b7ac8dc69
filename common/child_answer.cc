#include "common/child_answer.h"

#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/process_status.h"
#include "common/unique_fd.h"

namespace ddprun {

absl::StatusOr<std::string> AnswerFromChild(const std::function<std::string()>& work,
                                            const std::string& what) {
  absl::StatusOr<Pipe> pipe = MakePipe(/*nonblocking_read=*/false);
  if (!pipe.ok()) return pipe.status();
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus(errno, absl::StrCat("fork (", what, ")"));
  if (pid == 0) {
    pipe->read_end.Reset();
    ::_exit(WriteAll(pipe->write_end.get(), work()).ok() ? 0 : 1);
  }
  pipe->write_end.Reset();
  std::string answer;
  char buf[65536];
  for (;;) {
    const ssize_t got = ::read(pipe->read_end.get(), buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    answer.append(buf, static_cast<size_t>(got));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("the ", what, " process died before answering (",
                                            DescribeWaitStatus(status), ")"));
  }
  return answer;
}

}  // namespace ddprun
