#include "supervisor/readiness_probe.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "supervisor/files.hpp"
#include "supervisor/notify_record.hpp"

namespace sup {

namespace {
constexpr auto kAttemptTimeout = std::chrono::seconds(2);
constexpr auto kMaxBackoff = std::chrono::milliseconds(1000);

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

std::shared_ptr<ReadinessProbe> ReadinessProbe::start(EventLoop& loop, const ReadyCondition& c, std::string dir,
                                                      std::shared_ptr<LogWatch> log, OnReady on_ready) {
  auto p = std::make_shared<ReadinessProbe>(loop, c, std::move(dir), std::move(on_ready));
  switch (c.kind) {
    case ReadyCondition::Kind::log: {
      // Lines printed before the condition was set count: the watch reads the log from its start for it.
      std::weak_ptr<ReadinessProbe> self = p;
      p->log_ = std::move(log);
      p->log_token_ = p->log_->add(c, [self](const ReadyMatch& m) {
        if (auto q = self.lock()) q->succeed(m);
      });
      // Soon rather than now: conditions added meanwhile share one search of the log so far.
      loop.post([self] {
        if (auto q = self.lock(); q && q->log_) q->log_->output();
      });
      break;
    }
    case ReadyCondition::Kind::notify: p->check_notified(); break;
    case ReadyCondition::Kind::port:
    case ReadyCondition::Kind::http:
      if (c.interval_ms > 0) p->backoff_ = std::chrono::milliseconds(c.interval_ms);
      p->attempt();
      break;
  }
  return p;
}

ReadinessProbe::ReadinessProbe(EventLoop& loop, ReadyCondition c, std::string dir, OnReady on_ready)
    : loop_(loop), cond_(std::move(c)), dir_(std::move(dir)), on_ready_(std::move(on_ready)) {}

ReadinessProbe::~ReadinessProbe() { cancel(); }

void ReadinessProbe::cancel() {
  done_ = true;
  close_socket();
  if (timer_) loop_.cancel_timer(timer_);
  timer_ = 0;
  if (log_) log_->remove(log_token_);
  log_.reset();
}

void ReadinessProbe::succeed(const ReadyMatch& m) {
  if (done_) return;
  cancel();
  if (on_ready_) on_ready_(m);
}

void ReadinessProbe::check_notified() {
  if (done_ || cond_.kind != ReadyCondition::Kind::notify) return;
  auto text = read_file(dir_ + "/" + kNotifiedFile);
  if (!text.ok() || !text.value()) return;
  const std::optional<std::int64_t> at = parse_notified(*text.value());
  if (!at) return;
  ReadyMatch m;
  m.kind = ReadyCondition::Kind::notify;
  m.time_us = *at;
  succeed(m);
}

void ReadinessProbe::output() { check_notified(); }

void ReadinessProbe::finish() {
  if (done_) return;
  check_notified();  // written just before the end
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
  if (cond_.interval_ms == 0)
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
  if (cond_.kind == ReadyCondition::Kind::port) {
    ReadyMatch m;
    m.kind = ReadyCondition::Kind::port;
    m.port = cond_.port;
    m.time_us = now_us();
    return succeed(m);
  }
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
  if (code >= cond_.status_min && code <= cond_.status_max) {
    ReadyMatch m;
    m.kind = ReadyCondition::Kind::http;
    m.port = cond_.port;
    m.path = cond_.path;
    m.status = code;
    m.time_us = now_us();
    return succeed(m);
  }
  retry_later();
}

}  // namespace sup
