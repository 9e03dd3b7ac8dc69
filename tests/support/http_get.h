#pragma once
// Test support: one HTTP GET on loopback, as Prometheus or a browser would send it.

#include <string>

namespace ddprun::testing {

struct HttpReply {
  int status = 0;       // 0: no answer (connection refused, or not HTTP)
  std::string headers;  // the header lines, as sent
  std::string body;
};

/// GET http://127.0.0.1:<port><path> (or another `method`), waiting at most 5 s.
HttpReply HttpGet(int port, const std::string& path, const std::string& method = "GET");

}  // namespace ddprun::testing
