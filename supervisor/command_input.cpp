// A command's standard input (stdin: "pipe"), the daemon's side: writes go
// into the record's `stdin` FIFO without blocking; a write that finds the
// pipe full arms one writability watch on the event loop, whose firing is
// the stdin_writable event (the FUSE side retries its parked write then).
// Nothing is watched while no write waits: an idle pipe costs no wake-up.
#include "supervisor/ctl_request.hpp"
#include "supervisor/monitor_ctl.hpp"
#include "supervisor/supervisor_impl.hpp"

namespace sup {

namespace {

/// Whether `r` has an input one may write to or close now.
Status check_input(const std::string& id, const Record& r) {
  if (r.state == CommandState::empty) return Error{Errc::broken_pipe, "'" + id + "' has not been started"};
  // No pipe yet, and none to keep an end for: as signal and ready, refused
  // (an eof taken now would be lost, the command never given its end of input).
  if (r.state == CommandState::queued) return check_started(id, r);
  if (!r.spec || !r.spec->stdin_pipe)
    return Error{Errc::broken_pipe, "'" + id + "' was started without \"stdin\": \"pipe\": its stdin is /dev/null"};
  return Ok{};
}

}  // namespace

Result<std::shared_ptr<StdinPipe>> Supervisor::Impl::input_of(const std::string& id) {
  std::lock_guard g(mu);
  auto it = records.find(id);
  if (it == records.end()) return Error{Errc::not_found, "no command '" + id + "'"};
  Record& r = it->second;
  if (Status st = check_input(id, r); !st) return st.error();
  if (has_ended(r.state)) return Error{Errc::broken_pipe, "'" + id + "' has ended: no one reads its input"};
  if (r.stdin_closed) return Error{Errc::broken_pipe, "the input of '" + id + "' was closed (stdin,eof)"};
  if (!r.stdin_pipe) {
    auto opened = StdinPipe::open(dir_of(id), id);
    if (!opened) return opened.error();
    r.stdin_pipe = std::move(opened.value());
  }
  return r.stdin_pipe;
}

Result<std::size_t> Supervisor::write_stdin(const std::string& id, std::string_view data) {
  Impl& I = *impl_;
  Result<std::shared_ptr<StdinPipe>> pipe = I.input_of(id);
  if (!pipe) return pipe.error();
  // Outside the lock: up to a FUSE write's megabyte is copied here.
  Result<std::size_t> n = pipe.value()->write(data);
  if (n && *n == 0 && !data.empty())
    I.loop->post([&I, id, p = pipe.value()] { I.wait_for_stdin_room(id, p); });
  return n;
}

Result<std::size_t> Supervisor::write_stdin_whole(const std::string& id, std::string_view data) {
  Result<std::shared_ptr<StdinPipe>> pipe = impl_->input_of(id);
  if (!pipe) return pipe.error();
  return pipe.value()->write_whole(data);
}

Status Supervisor::close_stdin(const std::string& id) {
  Impl& I = *impl_;
  std::lock_guard g(I.mu);
  auto it = I.records.find(id);
  if (it == I.records.end()) return Error{Errc::not_found, "no command '" + id + "'"};
  Record& r = it->second;
  if (Status st = check_input(id, r); !st) return st;
  if (has_ended(r.state) || r.stdin_closed) return Ok{};
  r.stdin_closed = true;
  I.drop_stdin(r);
  // Writes waiting for room learn at once that there is no input any more.
  I.emit(Event::Kind::stdin_writable, id);
  return write_ctl(I.dir_of(id), std::string(kCtlEof) + "\n");
}

void Supervisor::Impl::wait_for_stdin_room(const std::string& id, std::shared_ptr<StdinPipe> pipe) {
  if (pipe->watching) return;
  bool current = false;
  {
    std::lock_guard g(mu);
    auto it = records.find(id);
    current = it != records.end() && it->second.stdin_pipe == pipe;
  }
  // Let go of meanwhile (ended, closed): the retry learns why at once.
  if (!current) return dispatch(Event{Event::Kind::stdin_writable, id});
  pipe->watching = true;
  // The watch holds the pipe, so its descriptor stays this watch's until unwatched.
  loop->watch(
      pipe->fd(),
      [this, id, pipe] {
        if (!pipe->watching) return;  // ended by drop_stdin in this round already
        loop->unwatch(pipe->fd());
        pipe->watching = false;
        dispatch(Event{Event::Kind::stdin_writable, id});
      },
      /*want_write=*/true);
}

void Supervisor::Impl::drop_stdin(Record& r) {
  if (!r.stdin_pipe) return;
  // On the loop thread, which alone arms and ends watches: then no watch
  // can be armed on a descriptor that is closed and reused meanwhile.
  loop->post([this, pipe = std::move(r.stdin_pipe)] {
    if (!pipe->watching) return;
    loop->unwatch(pipe->fd());
    pipe->watching = false;
  });
}

}  // namespace sup
