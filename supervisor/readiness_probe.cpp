#include "supervisor/readiness_probe.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <re2/re2.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sup {

namespace {
constexpr size_t kMaxLine = 16u << 20;  // a longer line is matched in pieces
constexpr auto kAttemptTimeout = std::chrono::seconds(2);
constexpr auto kMaxBackoff = std::chrono::milliseconds(1000);
}  // namespace

std::shared_ptr<ReadinessProbe> ReadinessProbe::start(EventLoop& loop, const ReadyCondition& c,
                                                      std::string log_path, OnReady on_ready) {
  auto p = std::make_shared<ReadinessProbe>(loop, c, std::move(log_path), std::move(on_ready));
  if (c.kind == ReadyCondition::Kind::log) {
    RE2::Options o;
    o.set_log_errors(false);
    p->re_ = std::make_unique<RE2>(c.regex, o);
    p->output();  // lines printed before the condition was set count
  } else {
    p->attempt();
  }
  return p;
}

ReadinessProbe::ReadinessProbe(EventLoop& loop, ReadyCondition c, std::string log_path, OnReady on_ready)
    : loop_(loop), cond_(std::move(c)), log_path_(std::move(log_path)), on_ready_(std::move(on_ready)) {}

ReadinessProbe::~ReadinessProbe() { cancel(); }

void ReadinessProbe::cancel() {
  done_ = true;
  close_socket();
  if (timer_) loop_.cancel_timer(timer_);
  timer_ = 0;
}

void ReadinessProbe::succeed() {
  if (done_) return;
  cancel();
  if (on_ready_) on_ready_();
}

bool ReadinessProbe::match_line(std::string_view line) {
  return RE2::PartialMatch(re2::StringPiece(line.data(), line.size()), *re_);
}

void ReadinessProbe::output() {
  if (done_ || !re_) return;
  UniqueFd fd(::open(log_path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return;
  char buf[65536];
  for (;;) {
    ssize_t n = ::pread(fd.get(), buf, sizeof buf, static_cast<off_t>(offset_));
    if (n <= 0) break;
    offset_ += static_cast<std::uint64_t>(n);
    size_t scan_from = partial_.size();
    partial_.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = partial_.find('\n', scan_from)) != std::string::npos; scan_from = start) {
      if (match_line(std::string_view(partial_).substr(start, nl - start))) return succeed();
      start = nl + 1;
    }
    partial_.erase(0, start);
    if (partial_.size() > kMaxLine) {
      if (match_line(partial_)) return succeed();
      partial_.clear();
    }
  }
}

void ReadinessProbe::finish() {
  if (done_) return;
  output();
  if (!done_ && re_ && !partial_.empty() && match_line(partial_)) return succeed();
  cancel();
}

void ReadinessProbe::close_socket() {
  if (watching_) loop_.unwatch(sock_.get());
  watching_ = false;
  sock_.reset();
  response_.clear();
}

void ReadinessProbe::retry_later() {
  close_socket();
  if (done_) return;
  if (timer_) loop_.cancel_timer(timer_);
  std::weak_ptr<ReadinessProbe> self = weak_from_this();
  timer_ = loop_.add_timer(EventLoop::Clock::now() + backoff_, [self] {
    if (auto p = self.lock()) {
      p->timer_ = 0;
      p->attempt();
    }
  });
  backoff_ = std::min(backoff_ * 2, std::chrono::duration_cast<std::chrono::milliseconds>(kMaxBackoff));
}

void ReadinessProbe::attempt() { connect_to(/*v6=*/false); }

void ReadinessProbe::connect_to(bool v6) {
  if (done_) return;
  v6_ = v6;
  sock_.reset(::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!sock_) return v6 ? retry_later() : connect_to(true);
  int rc;
  if (v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(cond_.port));
    a.sin6_addr = in6addr_loopback;
    rc = ::connect(sock_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(cond_.port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = ::connect(sock_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0 && errno != EINPROGRESS) {
    sock_.reset();
    return v6 ? retry_later() : connect_to(true);  // 127.0.0.1 refused: try ::1
  }
  std::weak_ptr<ReadinessProbe> self = weak_from_this();
  watching_ = true;
  loop_.watch(sock_.get(), [self] { if (auto p = self.lock()) p->on_connected(); }, /*want_write=*/true);
  arm_attempt_deadline();
}

void ReadinessProbe::arm_attempt_deadline() {
  std::weak_ptr<ReadinessProbe> self = weak_from_this();
  timer_ = loop_.add_timer(EventLoop::Clock::now() + kAttemptTimeout, [self] {
    if (auto p = self.lock()) {
      p->timer_ = 0;
      p->retry_later();
    }
  });
}

void ReadinessProbe::on_connected() {
  if (done_ || !sock_) return;
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(sock_.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  loop_.unwatch(sock_.get());
  watching_ = false;
  if (timer_) {
    loop_.cancel_timer(timer_);
    timer_ = 0;
  }
  if (err != 0) {
    sock_.reset();
    return v6_ ? retry_later() : connect_to(true);
  }
  if (cond_.kind == ReadyCondition::Kind::port) return succeed();
  std::string req = "GET " + cond_.path + " HTTP/1.0\r\nHost: localhost:" + std::to_string(cond_.port) +
                    "\r\nUser-Agent: sbxfs\r\nConnection: close\r\n\r\n";
  if (::send(sock_.get(), req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size()))
    return retry_later();
  std::weak_ptr<ReadinessProbe> self = weak_from_this();
  watching_ = true;
  loop_.watch(sock_.get(), [self] { if (auto p = self.lock()) p->on_http_readable(); });
  arm_attempt_deadline();
}

void ReadinessProbe::on_http_readable() {
  if (done_ || !sock_) return;
  char buf[1024];
  ssize_t n = ::recv(sock_.get(), buf, sizeof buf, 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n > 0) response_.append(buf, static_cast<size_t>(n));
  auto eol = response_.find("\r\n");
  if (eol == std::string::npos && n > 0 && response_.size() < 4096) return;
  // "HTTP/1.x NNN reason"
  int code = 0;
  if (response_.rfind("HTTP/", 0) == 0) {
    auto sp = response_.find(' ');
    if (sp != std::string::npos) code = std::atoi(response_.c_str() + sp + 1);
  }
  if (timer_) {
    loop_.cancel_timer(timer_);
    timer_ = 0;
  }
  if (code >= 200 && code <= 399) return succeed();
  retry_later();
}

}  // namespace sup
