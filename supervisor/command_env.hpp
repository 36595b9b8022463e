#pragma once
// The environment a command starts with.
#include <map>
#include <string>

#include "supervisor/spec.hpp"

namespace sup {

/// The command's whole environment: a base, then the request's env and
/// secretEnv over it. The base is the supervisor's own environment (`base`,
/// `environ` by default) for a command of the supervisor's user; a command
/// run as another user (allow_other) gets that user's: HOME, USER, LOGNAME
/// and SHELL from the password database, and of the supervisor's only
/// PATH, TZ and the locale (LANG, LANGUAGE, LC_*). The supervisor's
/// environment is its user's (root's HOME, credentials kept in variables):
/// not another user's to read.
std::map<std::string, std::string> command_env(const StartSpec& spec, char** base = nullptr);

}  // namespace sup
