#pragma once
// BackendSettings: what a rendezvous backend reads from its own --rdzv-conf keys and its
// --rdzv-endpoint, beyond what every backend shares (RendezvousSettings). The agent carries
// it, unread, from the command line to the backend's network half; each backend derives its
// own beside its network half (net/) and only that backend's code looks inside.

namespace ddprun {

struct BackendSettings {
  virtual ~BackendSettings() = default;
};

}  // namespace ddprun
