// SPDX-License-Identifier: Apache-2.0
// Where a process stands in its job (the launcher's variables) and how rank 0's NCCL unique id
// reaches the other ranks: a file every rank sees, or a TCP socket rank 0 listens on. Plain POSIX:
// no MPI is linked, so the same program runs under mpirun, srun, torchrun or a script.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "flowdsl/nccl.hpp"

namespace flowdsl::nccl {
namespace {

using Clock = std::chrono::steady_clock;

// A variable's value as an integer from `least` to `limit` - 1.
int read_int(const Environment& env, const char* name, long limit, long least = 0) {
  const char* text = env(name);
  long value = -1;
  const char* end = text + std::strlen(text);
  const auto [at, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || at != end || value < least || value >= limit) {
    throw UsageError(std::string("flowdsl: the environment variable ") + name + " is " + quoted_name(text) +
                     ": expected an integer from " + std::to_string(least) + " to " + std::to_string(limit - 1));
  }
  return static_cast<int>(value);
}

bool set(const Environment& env, const char* name) {
  const char* v = env(name);
  return v != nullptr && *v != '\0';
}

struct Launcher {
  const char* rank;
  const char* size;
  const char* local_rank;  // may be null: none
};

constexpr Launcher launchers[] = {
    {"FLOWDSL_RANK", "FLOWDSL_WORLD_SIZE", "FLOWDSL_LOCAL_RANK"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
};

// A name for the job that all its processes share, for the default id file.
std::string job_name(const Environment& env) {
  for (const char* name : {"FLOWDSL_JOB", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "PMI_JOBID", "SLURM_JOB_ID"}) {
    if (!set(env, name)) continue;
    std::string job = env(name);
    if (std::string(name) == "SLURM_JOB_ID" && set(env, "SLURM_STEP_ID")) job += std::string(".") + env("SLURM_STEP_ID");
    for (char& c : job) {
      const bool plain = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '-';
      if (!plain) c = '_';
    }
    return job;
  }
  return {};
}

std::string system_error(const std::string& what) { return what + ": " + std::strerror(errno); }

// ---------------------------------------------------------------- file --------------------

// Rank 0 writes the id to a temporary name and renames it, so that a reader never sees part of
// it; a file already there is refused (it may be another job's id).
void write_id_file(const Bootstrap& b, const UniqueId& id) {
  const std::string temporary = b.id_file + ".partial." + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(system_error("flowdsl: rank 0 cannot create the NCCL id file " + temporary));
  const ssize_t written = ::write(fd, id.data(), id.size());
  const bool ok = written == static_cast<ssize_t>(id.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) {
    ::unlink(temporary.c_str());
    throw Error("flowdsl: rank 0 cannot write the NCCL id file " + temporary);
  }
  if (::link(temporary.c_str(), b.id_file.c_str()) != 0) {
    const int why = errno;
    ::unlink(temporary.c_str());
    errno = why;
    if (why == EEXIST) {
      throw Error("flowdsl: the NCCL id file " + b.id_file +
                  " already exists (left by an earlier job?): remove it, or name another with FLOWDSL_NCCL_ID_FILE");
    }
    throw Error(system_error("flowdsl: rank 0 cannot create the NCCL id file " + b.id_file));
  }
  ::unlink(temporary.c_str());
}

UniqueId read_id_file(const Bootstrap& b) {
  const Clock::time_point deadline = Clock::now() + b.timeout;
  std::chrono::milliseconds pause(1);
  for (;;) {
    const int fd = ::open(b.id_file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      UniqueId id{};
      const ssize_t got = ::read(fd, id.data(), id.size());
      ::close(fd);
      if (got == static_cast<ssize_t>(id.size())) return id;
      throw Error("flowdsl: rank " + std::to_string(b.rank) + ": the NCCL id file " + b.id_file + " holds " +
                  std::to_string(got < 0 ? 0 : got) + " bytes, not " + std::to_string(id.size()));
    }
    if (errno != ENOENT) throw Error(system_error("flowdsl: rank " + std::to_string(b.rank) + " cannot open " + b.id_file));
    if (Clock::now() >= deadline) {
      throw Error("flowdsl: rank " + std::to_string(b.rank) + " waited " + std::to_string(b.timeout.count()) +
                  " ms for rank 0 to write the NCCL id file " + b.id_file + "; is rank 0 running, and does it see the same folder?");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

// ---------------------------------------------------------------- TCP ---------------------

struct Socket {
  int fd = -1;
  Socket() = default;
  explicit Socket(int f) : fd(f) {}
  Socket(Socket&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Socket& operator=(Socket&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

void split_address(const std::string& address, std::string& host, std::string& port) {
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    throw UsageError("flowdsl: the NCCL id address '" + address + "' is not host:port");
  }
  host = address.substr(0, colon);
  port = address.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
}

struct AddressList {
  addrinfo* list = nullptr;
  ~AddressList() {
    if (list != nullptr) ::freeaddrinfo(list);
  }
};

void resolve_address(const std::string& address, bool passive, AddressList& out) {
  std::string host, port;
  split_address(address, host, port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  const int rc = ::getaddrinfo(passive && (host == "*" || host == "0.0.0.0") ? nullptr : host.c_str(), port.c_str(), &hints,
                               &out.list);
  if (rc != 0) throw Error("flowdsl: cannot resolve the NCCL id address " + address + ": " + ::gai_strerror(rc));
}

// Waits until `fd` is ready for `events` or the deadline passes.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return false;
  }
}

void serve_id(const Bootstrap& b, const UniqueId& id) {
  AddressList addresses;
  resolve_address(b.address, /*passive=*/true, addresses);
  Socket listener;
  std::string why;
  for (addrinfo* a = addresses.list; a != nullptr && listener.fd < 0; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (s.fd < 0) continue;
    const int yes = 1;
    (void)::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(s.fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(s.fd, 128) == 0) {
      listener = std::move(s);
    } else {
      why = std::strerror(errno);
    }
  }
  if (listener.fd < 0) throw Error("flowdsl: rank 0 cannot listen on " + b.address + " for the NCCL id: " + why);
  const Clock::time_point deadline = Clock::now() + b.timeout;
  for (int served = 1; served < b.world; ++served) {
    if (!wait_for(listener.fd, POLLIN, deadline)) {
      throw Error("flowdsl: rank 0 handed the NCCL id to " + std::to_string(served - 1) + " of " +
                  std::to_string(b.world - 1) + " ranks on " + b.address + " within " +
                  std::to_string(b.timeout.count()) + " ms; are the others running with the same address?");
    }
    Socket peer(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (peer.fd < 0) {
      --served;  // a connection that went away before it was taken: wait for the next
      continue;
    }
    std::size_t sent = 0;
    while (sent < id.size()) {
      const ssize_t n = ::send(peer.fd, id.data() + sent, id.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<std::size_t>(n);
    }
    if (sent != id.size()) --served;  // that rank will connect again
  }
}

UniqueId fetch_id(const Bootstrap& b) {
  const Clock::time_point deadline = Clock::now() + b.timeout;
  std::chrono::milliseconds pause(1);
  std::string last = "no answer";
  for (;;) {
    AddressList addresses;
    resolve_address(b.address, /*passive=*/false, addresses);
    for (addrinfo* a = addresses.list; a != nullptr; a = a->ai_next) {
      Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
      if (s.fd < 0) continue;
      if (::connect(s.fd, a->ai_addr, a->ai_addrlen) != 0) {
        last = std::strerror(errno);
        continue;
      }
      UniqueId id{};
      std::size_t got = 0;
      while (got < id.size() && wait_for(s.fd, POLLIN, deadline)) {
        const ssize_t n = ::recv(s.fd, id.data() + got, id.size() - got, 0);
        if (n <= 0) break;
        got += static_cast<std::size_t>(n);
      }
      if (got == id.size()) return id;
      last = "the connection closed after " + std::to_string(got) + " bytes";
    }
    if (Clock::now() >= deadline) {
      throw Error("flowdsl: rank " + std::to_string(b.rank) + " could not get the NCCL id from rank 0 at " + b.address +
                  " within " + std::to_string(b.timeout.count()) + " ms (" + last + ")");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

}  // namespace

Bootstrap bootstrap_from(const Environment& env) {
  Bootstrap b;
  constexpr long max_ranks = 1 << 20;
  for (const Launcher& l : launchers) {
    if (!set(env, l.rank) || !set(env, l.size)) continue;
    b.world = read_int(env, l.size, max_ranks + 1, 1);
    b.rank = read_int(env, l.rank, b.world);
    b.local_rank = l.local_rank != nullptr && set(env, l.local_rank) ? read_int(env, l.local_rank, b.world) : b.rank;
    b.source = std::string(l.rank) + ", " + l.size;
    break;
  }
  if (set(env, "FLOWDSL_NCCL_TIMEOUT_S")) {
    b.timeout = std::chrono::seconds(read_int(env, "FLOWDSL_NCCL_TIMEOUT_S", 7 * 24 * 3600));
  }
  if (set(env, "FLOWDSL_NCCL_ID_FILE")) {
    b.id_file = env("FLOWDSL_NCCL_ID_FILE");
  } else if (set(env, "FLOWDSL_NCCL_ADDRESS")) {
    b.address = env("FLOWDSL_NCCL_ADDRESS");
  } else if (set(env, "MASTER_ADDR") && set(env, "MASTER_PORT")) {
    // torchrun's own store listens on MASTER_PORT: flowdsl's id is served one port above.
    const int port = read_int(env, "MASTER_PORT", 65535);
    b.address = std::string(env("MASTER_ADDR")) + ":" + std::to_string(port + 1);
  } else if (b.world > 1) {
    const std::string job = job_name(env);
    if (job.empty()) {
      throw UsageError("flowdsl: " + std::to_string(b.world) + " ranks (" + b.source +
                       ") but no way to share NCCL's id: set FLOWDSL_NCCL_ID_FILE to a path every rank sees, or "
                       "FLOWDSL_NCCL_ADDRESS to host:port of rank 0");
    }
    std::error_code ignored;
    std::filesystem::path folder = std::filesystem::temp_directory_path(ignored);
    if (folder.empty()) folder = "/tmp";
    b.id_file = (folder / ("flowdsl-nccl-" + job + ".id")).string();
  }
  if (!b.address.empty()) {
    std::string host, port;
    split_address(b.address, host, port);  // a malformed address is named now, not at the first use
  }
  return b;
}

Bootstrap bootstrap_from_environment() {
  return bootstrap_from([](const char* name) -> const char* { return std::getenv(name); });
}

UniqueId share_unique_id(const Bootstrap& b, const UniqueId& id) {
  if (b.world <= 1) return id;
  if (b.rank < 0 || b.rank >= b.world) {
    throw UsageError("flowdsl: rank " + std::to_string(b.rank) + " is outside a world of " + std::to_string(b.world));
  }
  if (!b.id_file.empty()) {
    if (b.rank == 0) {
      write_id_file(b, id);
      return id;
    }
    return read_id_file(b);
  }
  if (b.address.empty()) {
    throw UsageError("flowdsl: " + std::to_string(b.world) + " ranks but neither an id file nor an address to share NCCL's id");
  }
  if (b.rank == 0) {
    serve_id(b, id);
    return id;
  }
  return fetch_id(b);
}

}  // namespace flowdsl::nccl
