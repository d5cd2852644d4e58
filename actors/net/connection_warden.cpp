#include "actors/net/connection_warden.hpp"

#include "actors/metrics/task_metrics.hpp"
#include "actors/net/next_symbol.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

namespace {

// What the accept() interposer needs; 0 as the port means "not watching".
std::atomic<int> watched_port{0};
std::atomic<size_t> accept_limit{0};
std::atomic<size_t> live_connections{0};  // from the last sweep, plus accepts since
std::atomic<size_t> refused_at_accept{0}; // not yet logged

using accept_fn = int (*)(int, sockaddr*, socklen_t*);

accept_fn libc_accept() {
  static auto fn = troupe::next_symbol<accept_fn>("accept", "libc");
  return fn;
}

int port_of(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  if (addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  return -1;
}

int local_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return -1;
  return port_of(addr);
}

// The numeric host of an address; IPv4-mapped IPv6 addresses as IPv4.
std::string host_of(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, text, sizeof(text));
  } else if (addr.ss_family == AF_INET6) {
    auto& a6 = reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a6))
      inet_ntop(AF_INET, &a6.s6_addr[12], text, sizeof(text));
    else
      inet_ntop(AF_INET6, &a6, text, sizeof(text));
  }
  return text;
}

} // namespace

// Exported even where the build hides symbols by default: libcaf_io must
// bind to it.
extern "C" __attribute__((visibility("default"))) int accept(int fd, sockaddr* addr,
                                                             socklen_t* len) {
  int connection = libc_accept()(fd, addr, len);
  int port = watched_port.load(std::memory_order_relaxed);
  if (connection < 0 || port == 0 || local_port(fd) != port)
    return connection;
  if (live_connections.fetch_add(1) + 1 <= accept_limit.load(std::memory_order_relaxed))
    return connection;
  live_connections.fetch_sub(1);
  refused_at_accept.fetch_add(1);
  ::close(connection);
  errno = EAGAIN; // CAF reads this as "nothing to accept now"
  return -1;
}

namespace troupe {

warden_verdict judge_connections(const std::vector<accepted_connection>& connections,
                                 const warden_limits& limits) {
  warden_verdict verdict;
  std::vector<size_t> kept;
  for (size_t i = 0; i < connections.size(); ++i)
    (connections[i].idle >= limits.idle_timeout ? verdict.idle : kept).push_back(i);
  if (kept.size() <= limits.max_connections)
    return verdict;
  // Keep the cluster's hosts first, then the most recently active.
  std::stable_sort(kept.begin(), kept.end(), [&](size_t a, size_t b) {
    auto& x = connections[a];
    auto& y = connections[b];
    if (x.from_cluster_host != y.from_cluster_host)
      return x.from_cluster_host;
    return x.idle < y.idle;
  });
  verdict.over_limit.assign(kept.begin() + static_cast<std::ptrdiff_t>(limits.max_connections),
                            kept.end());
  return verdict;
}

std::vector<accepted_connection>
accepted_connections_on(uint16_t port, const std::vector<std::string>& cluster_addresses) {
  std::vector<accepted_connection> out;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr)
    return out;
  int own = dirfd(dir);
  while (auto* entry = readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || end == entry->d_name || fd == own)
      continue;
    int sock = static_cast<int>(fd);
    if (local_port(sock) != port)
      continue; // not a socket, or not ours
    int listening = 0;
    socklen_t len = sizeof(listening);
    if (getsockopt(sock, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening)
      continue;
    tcp_info info{};
    len = sizeof(info);
    if (getsockopt(sock, IPPROTO_TCP, TCP_INFO, &info, &len) != 0)
      continue;
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof(peer);
    if (getpeername(sock, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)
      continue;
    accepted_connection c;
    c.fd = sock;
    c.idle = std::chrono::milliseconds(info.tcpi_last_data_recv);
    auto host = host_of(peer);
    c.from_cluster_host = std::find(cluster_addresses.begin(), cluster_addresses.end(), host)
                          != cluster_addresses.end();
    c.peer = host + ":" + std::to_string(port_of(peer));
    // Shut down already (ours or the peer's): CAF is closing it.
    if (info.tcpi_state != TCP_ESTABLISHED)
      c.idle = std::chrono::milliseconds(-1);
    out.push_back(std::move(c));
  }
  closedir(dir);
  return out;
}

std::vector<std::string> resolve_hosts(const std::vector<std::string>& hosts) {
  std::vector<std::string> out;
  for (auto& host : hosts) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0)
      continue;
    for (auto* a = found; a != nullptr; a = a->ai_next) {
      sockaddr_storage addr{};
      std::memcpy(&addr, a->ai_addr, std::min<size_t>(a->ai_addrlen, sizeof(addr)));
      auto text = host_of(addr);
      if (!text.empty() && std::find(out.begin(), out.end(), text) == out.end())
        out.push_back(text);
    }
    freeaddrinfo(found);
  }
  return out;
}

std::string connection_warden_problem() {
  if (dlsym(RTLD_DEFAULT, "accept") != reinterpret_cast<void*>(&::accept))
    return "libc's accept is not the warden's; link actors/net/connection_warden.cpp into the "
           "executable";
  return {};
}

struct connection_warden::impl {
  impl(uint16_t port, warden_limits limits, std::vector<std::string> cluster_hosts,
       std::chrono::milliseconds sweep_interval)
    : port(port), limits(limits), metrics(metrics::connection_metrics::make(std::to_string(port))),
      cluster_hosts(std::move(cluster_hosts)),
      cluster_addresses(resolve_hosts(this->cluster_hosts)),
      resolved_at(std::chrono::steady_clock::now()), sweep_interval(sweep_interval) {}

  uint16_t port;
  warden_limits limits;
  metrics::connection_metrics metrics;
  // Resolved again now and then: a pod that restarts keeps its name, not its address.
  std::vector<std::string> cluster_hosts;
  std::vector<std::string> cluster_addresses;
  std::chrono::steady_clock::time_point resolved_at;
  std::chrono::milliseconds sweep_interval;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::thread thread;
  // Closed since the last log line.
  size_t closed_idle = 0;
  size_t closed_over_limit = 0;
  size_t closed_at_accept = 0;
  std::vector<std::string> examples;
  std::chrono::steady_clock::time_point last_log{};

  void sweep() {
    if (std::chrono::steady_clock::now() - resolved_at > std::chrono::seconds(30)) {
      cluster_addresses = resolve_hosts(cluster_hosts);
      resolved_at = std::chrono::steady_clock::now();
    }
    auto connections = accepted_connections_on(port, cluster_addresses);
    std::vector<accepted_connection> open;
    for (auto& c : connections)
      if (c.idle.count() >= 0)
        open.push_back(c);
    auto verdict = judge_connections(open, limits);
    auto close = [&](size_t i) {
      ::shutdown(open[i].fd, SHUT_RDWR); // CAF sees end-of-stream and closes it
      if (examples.size() < 3)
        examples.push_back(open[i].peer);
    };
    for (auto i : verdict.idle)
      close(i);
    for (auto i : verdict.over_limit)
      close(i);
    closed_idle += verdict.idle.size();
    closed_over_limit += verdict.over_limit.size();
    auto at_accept = refused_at_accept.exchange(0);
    closed_at_accept += at_accept;
    auto live = open.size() - verdict.idle.size() - verdict.over_limit.size();
    live_connections.store(live);
    metrics.open.set(static_cast<double>(live));
    metrics.refused_strangers.add(verdict.idle.size() + verdict.over_limit.size() + at_accept);
    report();
  }

  // At most one line every 5 s, so a flood does not flood the log too.
  void report() {
    auto now = std::chrono::steady_clock::now();
    if (now - last_log < std::chrono::seconds(5))
      return;
    auto refused = closed_at_accept;
    if (closed_idle + closed_over_limit + refused == 0)
      return;
    std::string what;
    auto add = [&](size_t count, const std::string& text) {
      if (count > 0)
        what += (what.empty() ? "" : "; ") + std::to_string(count) + text;
    };
    add(closed_idle,
        " closed after " + std::to_string(limits.idle_timeout.count()) + " ms in silence");
    add(closed_over_limit,
        " closed beyond cluster.max-connections = " + std::to_string(limits.max_connections));
    add(refused, " refused at accept, over cluster.max-connections = "
                   + std::to_string(limits.max_connections));
    std::string from;
    for (auto& e : examples)
      from += (from.empty() ? "" : ", ") + e;
    if (closed_idle + closed_over_limit > examples.size())
      from += ", ...";
    spdlog::warn("port {}: {}{}", port, what, from.empty() ? "" : " (from " + from + ")");
    closed_idle = closed_over_limit = closed_at_accept = 0;
    examples.clear();
    last_log = now;
  }

  void run() {
    std::unique_lock<std::mutex> guard{mutex};
    while (!wake.wait_for(guard, sweep_interval, [this] { return stopping; }))
      sweep();
    last_log = {};
    report(); // what the last interval closed
  }
};

connection_warden::connection_warden(uint16_t port, warden_limits limits,
                                     std::vector<std::string> cluster_hosts,
                                     std::chrono::milliseconds sweep_interval)
  : impl_(std::make_unique<impl>(port, limits, std::move(cluster_hosts), sweep_interval)) {
  accept_limit.store(limits.max_connections);
  live_connections.store(accepted_connections_on(port, impl_->cluster_addresses).size());
  watched_port.store(port);
  impl_->thread = std::thread([this] { impl_->run(); });
}

connection_warden::~connection_warden() {
  watched_port.store(0);
  {
    std::lock_guard<std::mutex> guard{impl_->mutex};
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  impl_->thread.join();
}

} // namespace troupe
