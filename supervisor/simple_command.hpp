#pragma once
// Shell text that is one simple command of plain words (`sleep 30`,
// `npm run dev`, `make -j4 CC=gcc`): run as `/bin/sh -c TEXT`, Debian's
// dash forks that command and waits for it, so every start of such a text
// made two processes and two execs where the command needs one (bash -c
// execs a last simple command itself). The monitor executes the words
// directly instead, with the environment dash would have given them, and
// runs `/bin/sh -c TEXT` after all when that exec fails, so that a command
// not found or a file that is not a program fails exactly as it did.
//
// What dash does with such a text, measured with dash 0.5.12 (Debian 12):
// - the words are split at blanks; no other character of the set below
//   means anything to it (no quote, expansion, glob, redirection,
//   separator, comment, tilde or assignment);
// - the first word is looked up as a built-in or reserved word first, then
//   in PATH (a text whose first word is one is left to the shell);
// - the command's environment is dash's: the entries it imported (names
//   that are shell identifiers only: `A-B=1` is dropped), with PWD set to
//   the working directory unless PWD already names it (same device and
//   inode), and IFS, OPTIND and PPID reset (an environment that holds one of
//   these, no PATH, or a PATH with a `%`, which dash reads as its own
//   option of that entry, is left to the shell);
// - a first word that starts with `-` or `+` is an option of dash's own.
// One difference stays, beside the process that is no longer there: the
// command leads its session and process group, as a JSON argv's does (a
// program that calls setsid(2) itself gets EPERM, as under bash -c).
// Pure functions; the monitor calls them before it clones the command.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sup {

/// The words of `text` when it is one simple command of plain words whose
/// first word is no shell built-in or reserved word; else nothing.
std::optional<std::vector<std::string>> simple_command_words(std::string_view text);

/// The environment dash passes to the command it runs, made from `env`
/// ("NAME=VALUE" entries): the entries it keeps, by index (not copies: a
/// monitor's memory is counted per command), and PWD's value when it is an
/// absolute path. dash keeps that PWD where it names the working directory
/// (same device and inode, looked at by the user who runs the command,
/// at each run) and sets PWD to getcwd's path otherwise. Nothing when the
/// environment is one left to the shell (see above).
struct SimpleEnv {
  std::vector<std::size_t> kept;
  std::optional<std::string> pwd;
};
std::optional<SimpleEnv> simple_command_env(const std::vector<std::string_view>& env);

}  // namespace sup
