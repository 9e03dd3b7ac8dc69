// ddprun: torchrun's command line, ddprun's agent.
#include "launcher/run_ddprun.h"

int main(int argc, char** argv) { return ddprun::RunDdprun(argc, argv); }
