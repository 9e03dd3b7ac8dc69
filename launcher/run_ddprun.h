#pragma once
// What `ddprun` does with its command line, up to its exit status: the health-check child
// mode, `ddprun status` / `stop`, or a job (logging, the signal mask, the subreaper and the
// orphan guard, the backend's start, ElasticAgent::Run()). A process runs it once.

namespace ddprun {

int RunDdprun(int argc, char** argv);

}  // namespace ddprun
