#include "distributed/tcp_bootstrap.h"

#include "core/error.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

namespace pt::dist {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kMagic = 0x50544944;  // "PTID"
constexpr uint32_t kMaxBlob = 1 << 20;

struct Fd {  // closes on scope exit
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

// Sends or receives exactly n bytes before the deadline; false on timeout, a closed peer or an error.
bool transfer(int fd, void* data, size_t n, bool send, Clock::time_point deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    pollfd pfd{fd, static_cast<short>(send ? POLLOUT : POLLIN), 0};
    if (::poll(&pfd, 1, remaining_ms(deadline)) <= 0) return false;
    const ssize_t k = send ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k <= 0) {
      if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      return false;
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

std::string seconds(double s) { return fmt::format("{:g} s", s); }

std::vector<uint8_t> serve(const LaunchInfo& launch, std::span<const uint8_t> blob, double timeout_s,
                           Clock::time_point deadline) {
  Fd listener(::socket(AF_INET6, SOCK_STREAM, 0));
  bool v6 = listener.fd >= 0;
  if (!v6) listener.fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listener.fd < 0) fail("rank 0: cannot create a TCP socket: {}", std::strerror(errno));
  int one = 1, zero = 0;
  ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  if (v6) {  // dual stack: IPv4 peers too
    ::setsockopt(listener.fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<uint16_t>(launch.master_port));
    rc = ::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } else {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(launch.master_port));
    rc = ::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  }
  if (rc != 0 || ::listen(listener.fd, launch.world_size) != 0)
    fail("rank 0: cannot listen on TCP port {} (MASTER_PORT): {}; pick a free port", launch.master_port,
         std::strerror(errno));
  std::vector<bool> joined(static_cast<size_t>(launch.world_size), false);
  joined[0] = true;
  int waiting = launch.world_size - 1;
  while (waiting > 0) {
    pollfd pfd{listener.fd, POLLIN, 0};
    if (::poll(&pfd, 1, remaining_ms(deadline)) <= 0) {
      std::string missing;
      for (size_t r = 0; r < joined.size(); ++r)
        if (!joined[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      fail(
          "rank 0: ranks {} did not connect to port {} within {}; are they running, with MASTER_ADDR set to "
          "this "
          "host?",
          missing, launch.master_port, seconds(timeout_s));
    }
    Fd peer(::accept(listener.fd, nullptr, nullptr));
    if (peer.fd < 0) continue;
    int32_t hello[3] = {0, 0, 0};  // magic, rank, world size
    if (!transfer(peer.fd, hello, sizeof hello, false, deadline) || static_cast<uint32_t>(hello[0]) != kMagic)
      continue;  // not one of ours: ignore
    const int rank = hello[1];
    if (hello[2] != launch.world_size)
      fail(
          "rank 0: rank {} says the world has {} ranks, this one {}; launch every rank with the same "
          "WORLD_SIZE",
          rank, hello[2], launch.world_size);
    if (rank <= 0 || rank >= launch.world_size || joined[static_cast<size_t>(rank)])
      fail("rank 0: a second process claims rank {}; give every process its own RANK", rank);
    const uint32_t header[2] = {kMagic, static_cast<uint32_t>(blob.size())};
    if (!transfer(peer.fd, const_cast<uint32_t*>(header), sizeof header, true, deadline) ||
        !transfer(peer.fd, const_cast<uint8_t*>(blob.data()), blob.size(), true, deadline))
      fail("rank 0: sending the id to rank {} failed: {}", rank, std::strerror(errno));
    joined[static_cast<size_t>(rank)] = true;
    --waiting;
  }
  return {blob.begin(), blob.end()};
}

std::vector<uint8_t> fetch(const LaunchInfo& launch, double timeout_s, Clock::time_point deadline) {
  const std::string host = launch.master_addr.empty() ? "127.0.0.1" : launch.master_addr;
  const std::string where = fmt::format("{}:{} (MASTER_ADDR{}:MASTER_PORT)", host, launch.master_port,
                                        launch.master_addr.empty() ? " unset, so this host" : "");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(launch.master_port);
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    fail("rank {}: cannot resolve {}: {}", launch.rank, where, ::gai_strerror(rc));
  std::string last_error = "no address";
  for (;;) {  // rank 0 may not be listening yet: retry until the deadline
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      Fd sock(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
      if (sock.fd < 0) continue;
      if (::connect(sock.fd, a->ai_addr, a->ai_addrlen) != 0) {
        last_error = std::strerror(errno);
        continue;
      }
      ::freeaddrinfo(found);
      const int32_t hello[3] = {static_cast<int32_t>(kMagic), launch.rank, launch.world_size};
      uint32_t header[2] = {0, 0};
      if (!transfer(sock.fd, const_cast<int32_t*>(hello), sizeof hello, true, deadline) ||
          !transfer(sock.fd, header, sizeof header, false, deadline) || header[0] != kMagic ||
          header[1] > kMaxBlob)
        fail("rank {}: connected to {} but got no id from rank 0 within {}", launch.rank, where,
             seconds(timeout_s));
      std::vector<uint8_t> blob(header[1]);
      if (!transfer(sock.fd, blob.data(), blob.size(), false, deadline))
        fail("rank {}: the id from rank 0 at {} was cut short", launch.rank, where);
      return blob;
    }
    if (Clock::now() >= deadline) {
      ::freeaddrinfo(found);
      fail(
          "rank {}: could not connect to rank 0 at {} within {} ({}); start rank 0 and check MASTER_ADDR and "
          "MASTER_PORT",
          launch.rank, where, seconds(timeout_s), last_error);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

std::vector<uint8_t> tcp_broadcast_blob(const LaunchInfo& launch, std::span<const uint8_t> blob,
                                        double timeout_s) {
  if (launch.world_size == 1) return {blob.begin(), blob.end()};
  if (blob.size() > kMaxBlob)
    fail("tcp_broadcast_blob: {} bytes is over the limit of {}", blob.size(), kMaxBlob);
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  return launch.rank == 0 ? serve(launch, blob, timeout_s, deadline) : fetch(launch, timeout_s, deadline);
}

}  // namespace pt::dist
