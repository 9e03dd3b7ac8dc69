#include "observability/metrics_http.h"

#include <CivetServer.h>
#include <google/protobuf/struct.pb.h>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/listen_socket.h"
#include "observability/run_status.h"
#include "prometheus/text_serializer.h"

namespace ddprun {

struct HttpAnswer {
  int status = 200;
  std::string type = "text/plain; charset=utf-8";
  std::string body;
};

// The page and its JSON are never taken for another type, framed, or made to load or send
// anything elsewhere (its own inline script and style aside).
constexpr char kSafetyHeaders[] =
    "Cache-Control: no-store\r\n"
    "X-Content-Type-Options: nosniff\r\n"
    "Content-Security-Policy: default-src 'self'; img-src 'self' data:; "
    "style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'; "
    "frame-ancestors 'none'\r\n";

// One URI: `respond` gives the status, the body and its type. Not a CivetHandler: CivetHandler
// has no hook for WebDAV's methods (PROPFIND, MKCOL, LOCK, ...), and civetweb's own answer to
// them, with no document root, crashes the process. A route answers every method itself.
class Route {
 public:
  explicit Route(std::function<HttpAnswer(mg_connection*)> respond)
      : respond_(std::move(respond)) {}

  // Answers the request; what civetweb's begin_request returns (the status: 1-999 tells
  // civetweb the request is answered).
  static int Serve(mg_connection* conn, const Route& route) {
    const HttpAnswer response = route.Answer(conn);
    Send(conn, response);
    return response.status;
  }

 private:
  HttpAnswer Answer(mg_connection* conn) const {
    const char* method = mg_get_request_info(conn)->request_method;
    if (method == nullptr || std::strcmp(method, "GET") != 0) {
      return HttpAnswer{405, "text/plain; charset=utf-8", "this port only answers GET\n"};
    }
    // civetweb's threads have small stacks, fixed when it was built (pthread_attr_setstacksize),
    // that a status of many nodes (or a sanitizer's larger frames) overflows: the answer is
    // made on a thread of the usual size. A scrape a second makes that one thread a second.
    return std::async(std::launch::async, respond_, conn).get();
  }

  // One write of the whole answer. Not mg_printf: its 8 KiB buffer on civetweb's small stack
  // overflows it under a sanitizer.
  static void Send(mg_connection* conn, const HttpAnswer& response) {
    const std::string allow = response.status == 405 ? "Allow: GET\r\n" : "";
    const std::string answer = absl::StrCat(
        "HTTP/1.1 ", response.status, " ", mg_get_response_code_text(conn, response.status),
        "\r\nContent-Type: ", response.type, "\r\nContent-Length: ", response.body.size(), "\r\n",
        allow, kSafetyHeaders, "Connection: close\r\n\r\n", response.body);
    mg_write(conn, answer.data(), answer.size());
  }

  std::function<HttpAnswer(mg_connection*)> respond_;
};

namespace {

HttpAnswer Metrics(const MetricsHttpOptions& options) {
  std::vector<prometheus::MetricFamily> families;
  if (options.master_status) {
    absl::StatusOr<v1::StatusReply> status = options.master_status("", /*lists=*/false);
    families = options.master_metrics(status.ok() ? *status : v1::StatusReply());
  }
  if (options.agent_metrics) {
    for (prometheus::MetricFamily& f : options.agent_metrics()) families.push_back(std::move(f));
  }
  HttpAnswer response;
  response.type = "text/plain; version=0.0.4; charset=utf-8";
  response.body = prometheus::TextSerializer().Serialize(families);
  return response;
}

HttpAnswer StatusAnswer(const MetricsHttpOptions& options, mg_connection* conn) {
  HttpAnswer response;
  response.type = "application/json";
  std::string run_id;
  CivetServer::getParam(conn, "run_id", run_id);
  absl::StatusOr<v1::StatusReply> status = options.master_status(run_id, /*lists=*/true);
  if (!status.ok()) {
    google::protobuf::Struct error;
    (*error.mutable_fields())["error"].set_string_value(std::string(status.status().message()));
    response.status = 404;
    response.body = StatusJson(error, /*indent=*/false);
    return response;
  }
  response.body = StatusJson(*status, /*indent=*/false);
  return response;
}

}  // namespace

// civetweb's stop waits for its accept thread, which looks at its stop flag only between
// polls of up to 2 s: an agent would take that long to exit. Connections to the port wake
// the poll; they are made until the server has stopped.
MetricsHttp::~MetricsHttp() {
  if (server_ == nullptr) return;
  std::atomic<bool> stopped{false};
  const bool any = options_.host == "0.0.0.0" || options_.host == "::" || options_.host.empty();
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(any ? "127.0.0.1" : options_.host.c_str(), std::to_string(port_).c_str(),
                    &hints, &found) != 0) {
    found = nullptr;  // no waking: the stop takes its 2 s
  }
  std::thread waker([&stopped, found] {
    while (found != nullptr && !stopped.load()) {
      const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0) {
        (void)::connect(fd, found->ai_addr, found->ai_addrlen);
        ::close(fd);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  server_.reset();
  stopped = true;
  waker.join();
  if (found != nullptr) ::freeaddrinfo(found);
}

absl::StatusOr<std::unique_ptr<MetricsHttp>> MetricsHttp::Start(MetricsHttpOptions options) {
  std::unique_ptr<MetricsHttp> http(new MetricsHttp());
  http->options_ = std::move(options);
  const MetricsHttpOptions& o = http->options_;
  auto add = [&](const std::string& uri, std::function<HttpAnswer(mg_connection*)> respond) {
    http->routes_.emplace(uri, std::make_unique<Route>(std::move(respond)));
  };
  add("/metrics", [&o](mg_connection*) { return Metrics(o); });
  if (o.master_status) {
    add("/api/v1/status", [&o](mg_connection* conn) { return StatusAnswer(o, conn); });
  }
  // Every other URI: civetweb's own answer (it has no document root here) must never run.
  http->other_ = std::make_unique<Route>([&o](mg_connection* conn) {
    HttpAnswer response;
    const mg_request_info* request = mg_get_request_info(conn);
    if (!o.master_status) {
      response.status = 404;
      response.body =
          "this agent serves /metrics only: the job's status page is on the metrics port of "
          "the node that hosts the rendezvous master, or of ddprun-master\n";
    } else if (std::strcmp(request->local_uri, "/") != 0) {
      response.status = 404;
      response.body = "not found: this port serves /, /metrics and /api/v1/status\n";
    } else {
      response.type = "text/html; charset=utf-8";
      response.body = kStatusPageHtml;
    }
    return response;
  });
  // The routes are in place before the port listens, and every request goes through
  // begin_request: a request that came in before handlers set after the start would get
  // civetweb's own 404, whose page overflows civetweb's small thread stack (a crash of the
  // agent that hosts the master, seen when a client polled the port as the agent started).
  CivetCallbacks callbacks;
  callbacks.begin_request = &MetricsHttp::BeginRequest;
  const std::string address = HostPort(o.host, o.port);
  // A scrape a second and a page or two need few threads, but a client that opens a
  // connection and sends nothing holds one until its read times out, and a request waits
  // for a free thread: 16 threads, and 1 s for each read (Prometheus and browsers send
  // their request at once), so that 64 such clients at once delay a scrape by 4 s, within
  // Prometheus' 10 s scrape timeout (4 threads and 3 s made it 48 s).
  const std::vector<std::string> civet = {"listening_ports",    address, "num_threads", "16",
                                          "request_timeout_ms", "1000"};
  try {
    http->server_ = std::make_unique<CivetServer>(civet, &callbacks, http.get());
  } catch (const CivetException&) {
    // civetweb's own words ("null context when constructing CivetServer") say nothing to a
    // user: a listen of our own on the same address says why (in use, no permission).
    absl::StatusOr<std::vector<UniqueFd>> own = ListenTcp(o.host, o.port);
    const std::string why =
        own.ok() ? "the HTTP server could not start there" : std::string(own.status().message());
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address, ": ", why,
                                               "; choose another --metrics-port, or 0 for any "
                                               "free port"));
  }
  const std::vector<int> ports = http->server_->getListeningPorts();
  http->port_ = ports.empty() ? 0 : ports.front();
  return http;
}

int MetricsHttp::BeginRequest(mg_connection* conn) {
  const auto* server = static_cast<const CivetServer*>(mg_get_user_data(mg_get_context(conn)));
  const auto* http = static_cast<const MetricsHttp*>(server->getUserContext());
  const char* uri = mg_get_request_info(conn)->local_uri;
  const auto route = http->routes_.find(uri != nullptr ? uri : "");
  return Route::Serve(conn, route != http->routes_.end() ? *route->second : *http->other_);
}

}  // namespace ddprun
