// README: how to use this tree, in plain words, for people and for agents
// that only have file tools. Built once from the configuration (mount point,
// wait cap) so the examples can be pasted as they are.
#include <algorithm>
#include <string>

#include "fsd/files.hpp"

namespace fsd {

namespace {

/// How long the box's steps are kept, in the README's words (keep_steps_sec).
std::string steps_kept(std::chrono::seconds keep) {
  const long long s = keep.count();
  if (s == 0) return "kept for ever";
  if (s == 604800) return "kept a week";
  if (s % 86400 == 0) return "kept " + std::to_string(s / 86400) + (s == 86400 ? " day" : " days");
  if (s % 3600 == 0) return "kept " + std::to_string(s / 3600) + (s == 3600 ? " hour" : " hours");
  return "kept " + std::to_string(s) + " s";
}

}  // namespace

std::string make_readme(const Config& cfg) {
  const std::string m = cfg.mountpoint;
  const std::string cap = std::to_string(cfg.wait_timeout.count());
  // The examples' own cap, within this mount's range.
  const std::string example_cap = std::to_string(std::min<long long>(60, cfg.wait_timeout.count()));
  return R"(sbxfs - run and control commands through files

This folder is a process supervisor. Writing a file starts a command,
reading a file shows its output or waits for it, writing another stops it.
Anything that can read and write files can use it.

START A COMMAND
  echo 'make test' > )" + m + R"(/cmd
      runs `/bin/sh -c 'make test'` in the writer's working directory
      (a simple command like this one runs as one process, no shell above it).
  exec 3<>)" + m + R"(/cmd; echo 'make test' >&3; read -r id <&3
      the same, and reads back the new command's id (its bgId).
  A text request ends at a write that ends a line, and bash's own echo and
  printf write each line of a longer text apart: give a script of several
  lines in one write (cat script.sh > cmd) or as JSON: {"cmd": "a\nb"}.
  A JSON object instead of text gives more control:
  {"cmd": "npm run dev", "cwd": "/work/app", "note": "dev server",
   "name": "web", "env": {"PORT": "3000"}, "secretEnv": {"TOKEN": "..."},
   "timeoutSec": 600, "stopGraceSec": 5}
  or {"argv": ["/usr/bin/python3", "app.py"]} to run without a shell.
  "limits": {"memoryMax": BYTES, "cpuMax": PERCENT, "pidsMax": N} caps it
  through its cgroup (EINVAL, with the reason, where that is not available).
  "restart": "on-failure" (or "always") runs it again when it ends (not after
  a stop), "restartDelaySec": 1 first (doubling after short runs, up to 60),
  "maxRestarts": N at most; the state is "restarting" during the delay, the
  record counts "restarts", wait answers when the policy is over.
  "queue": true: past max_running the request is accepted as "queued"
  (running false) and starts in order when a place is free (else EAGAIN);
  a stop of a queued command ends it before it ever runs.
  A rejected request fails the write with an errno (EINVAL, ENOENT, EEXIST,
  EBUSY, E2BIG...); the reason is readable from the same open file and is
  listed in `errors`. The write returns once the command has started;
  interrupting it (Ctrl-C) calls the start off: EINTR, nothing started.

WATCH IT
  status.json              the supervisor, its running commands, the last
                           actions done here, load, memory and disks
  procs/                   one folder per command, oldest first
  procs/ID/status.json     the command's record: state, pid, exitCode, ...
  procs/ID/log             stdout and stderr as written (tail -f works); past
                           log_max its first half, a marker line, the latest output
  procs/ID/stdout, stderr  each stream alone; logs/ID.log = procs/ID/log
                           (with the same keys: logs/ID.log,follow)
  procs/ID/events          the output as JSON lines: {"type": "stdout"|"stderr",
                           "cursor", "timestamp", "data"} ("dataBase64" when not
                           UTF-8), then {"type": "terminal", "exit": {...}}
  procs/ID/tail            the last 4096 bytes of log
  procs/ID/wait            reading blocks until the command has ended, then
                           gives its record as JSON with "stillRunning": false.
                           After )" + cap + R"( s it answers "stillRunning": true instead.
                           Ctrl-C or `timeout 5 cat wait` only stops the reader.
  procs/ID/output          blocks like wait, then gives stdout, stderr, exitCode,
                           signal and durationMs as one JSON object (each stream
                           its last )" + std::to_string(cfg.output_max) + R"( bytes; bytes that are not UTF-8 as \xHH)
  procs/ID/steps.json      the steps recorded inside the command with
                           `sbx-step NAME -- COMMAND...` (it finds the tree from
                           $SBX_MOUNT and $SBX_BGID, set in every command), or
                           by writing `start NAME` / `end [EXITCODE [NAME]]` lines
                           to procs/ID/steps while it runs (ESRCH once it ended)
  procs/ID/ready           write `port 3000`, `log REGEX` or `http 3000 /health`;
                           reading blocks until the command is ready (or ended)
                           and says what matched ("matched", "readyAt").
                           Written and read back on one open file, the
                           condition is this reader's alone:
                             exec 3<>ready; echo 'log ^Listening' >&3; cat <&3
                           written and closed, it is the command's (readyWhen);
                           once ready, a command stays ready. JSON keys:
                           readyLogStream, readyHttpStatus, readyIntervalMs;
                           readyFd: N in the request: ready when the command
                           writes a newline to its fd N (`echo >&3`)

PARAMETERS IN THE NAME
  A read's parameters go in the file name: FILE,KEY=VALUE,KEY (no spaces).
  Such names open like the file itself but are not listed by ls.
  procs/ID/wait,timeoutSec=N,tailBytes=N
                           wait at most N s for this read alone (1..)" + cap + R"(),
                           then "stillRunning": true; logTail holds the last
                           tailBytes bytes of log (1..16384, default 4096)
  procs/ID/ready,timeoutSec=N,tailBytes=N,readyPort=N,readyLog=RE
                           as for wait (tailBytes adds logTail to proc);
                           readyPort=N or readyLog=RE (no comma or slash;
                           readyLogStream=stdout|stderr, readyIntervalMs=N)
                           wait for this read alone (the command's own
                           condition is not needed, used or replaced)
  procs/ID/output,timeoutSec=N,maxBytes=N
                           as for wait; each stream its last N bytes
                           (0: no cap, up to log_max)
  procs/ID/tail,tailBytes=N       the last N bytes of log (1..16384)
  procs/ID/log,follow      (also stdout,follow, stderr,follow) like tail -f,
                           but ends by itself once the command has ended
  procs/ID/log,timestamps  (also stdout,timestamps, stderr,timestamps) each
                           line prefixed by when its first byte was written
  procs/ID/events,since=CURSOR,follow
                           the events after CURSOR (EINVAL for a cursor of an
                           earlier run); follow: wait for more, end after the
                           terminal event
  procs/ID/status.json,tailBytes=N the record, with logTail
  status.json,all          ended commands too, oldest first, with exitCode,
                           signal, endReason and finishedAt
  status.json,tailBytes=N  each listed command with logTail (with all too:
                           status.json,all,tailBytes=200)
  status.json,fields=steps+disk   only those parts of the report (and
                           supervisor); unknown names come back in unknownFields
  An unknown key, a bad value, a value out of range or a key given twice
  fails the open with EINVAL and a line in errors saying which key and why.
  Example: cat )" + m + R"(/procs/ID/wait,timeoutSec=)" + example_cap + R"(,tailBytes=2000

CONTROL IT
  echo > procs/ID/stop     stops the whole process tree (TERM, KILL after the
                           grace); returns once nothing of it is left
  echo TERM > procs/ID/signal   sends a signal to the whole tree (15, TERM, SIGTERM)
  echo STOP > procs/ID/signal   pauses it all (state "paused"); CONT resumes it
  mkdir procs/NAME         an empty named slot (a name not beginning with .);
                           then start a command in it:
  echo 'make' > procs/NAME/cmd  (again once it has ended, replacing the old run)
  {"cmd": "make", "name": "NAME"} > cmd   the same without mkdir: the record is
                           procs/NAME (EEXIST once the name is taken)
  rmdir procs/ID           forgets an ended command and its logs
  touch procs/ID/stop      an empty write stops too (`: > stop`, truncate -s 0)
  stop, signal and stdin are write-only (mode 0222): write them without
  reading them first.

GIVE IT INPUT
  {"cmd": "python3 -i -q", "stdin": "pipe"} gives the command a pipe as its
  standard input (without "stdin": "pipe" it reads /dev/null); then
  echo 'print(6*7)' > procs/ID/stdin   feeds it (the answer shows in log);
                           a write waits while the pipe is full (opened with
                           O_NONBLOCK: it takes what fits, or fails EAGAIN),
                           and fails with EPIPE once the command has ended or
                           closed it
  : > procs/ID/stdin,eof   closes the input: the command reads EOF
                           (printf 'last\n' > procs/ID/stdin,eof writes, then
                           closes); closing stdin itself never does

WRITING THROUGH A TEMPORARY FILE
  Tools that write a temporary file and rename it over the target work:
    printf 'make test\n' > )" + m + R"(/.cmd.tmp && mv )" + m + R"(/.cmd.tmp )" + m + R"(/cmd
  Any name the tree does not use can be created here and in procs/ID/: a
  scratch file, yours alone. Renaming it over cmd, procs/ID/cmd, stop,
  signal, ready, steps or stdin writes its content there and removes it; a refused
  request fails the rename with the write's errno (reason in `errors`).
  Renamed while still open for writing, it is written there at its close
  (a refusal then goes to `errors` only).
  One never renamed is removed 60 s after its last close (listed in errors).
  install(1) cannot write here: it removes its target first, and the files
  of the tree cannot be removed (EPERM); use cp, cat > or a rename.

WHOSE WORK IS IT
  Every record says "mine": true for the reader's own commands. Several
  agents on one box: give each conversation a name in the environment
  variable SBX_CLIENT of the processes that write requests and read
  listings (the harness sets it when it starts its tools, e.g.
  `SBX_CLIENT=conv-42 sh -c 'echo make > )" + m + R"(/cmd'`); the record keeps it
  as "client", and "mine" is then true for the same client. Without one,
  "mine" means the same terminal session. It is a label, not a permission.
  steps.json               what was done here (starts, stops, signals...),
                           )" + steps_kept(cfg.keep_steps) + R"(: at, kind, summary, bgId, client, ms,
                           ok, exitCode; status.json shows the last 30

Secrets (secretEnv values, the daemon's secrets file) are shown as **** in
cmd, status.json, tail, wait and errors, and each of their bytes as * in the
log files, events and a ready answer's "matched". While a command runs,
the end of an unfinished line that may begin one waits for more output
(with a secrets file: always, so that what waits tells nothing).
Commands keep running when the daemon stops; a restarted daemon finds them.
Errors of rejected requests: cat errors (one JSON object per line, the
latest 100; kept across restarts of the daemon).
)";
}

std::unique_ptr<Handle> open_readme(Filesystem& fs, const Node&, const OpenRequest&) { return std::make_unique<SnapshotHandle>(fs.readme()); }

}  // namespace fsd
