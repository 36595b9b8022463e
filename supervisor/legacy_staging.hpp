#pragma once
// Staging folders that older builds left in procs/ (FORMAT.md, "Loading").
#include <string>

namespace sup {

/// Whether `name`, a folder in procs/ that an older build left, is one of
/// its staging folders (`.new-ID`: a start, `.del-ID.N`: a removal) rather
/// than a record a user named so: a record's spec.json names the folder
/// itself as its bgId, and a named slot holds `slot` (kept: never lose a
/// record). Today's builds stage in STATE/staging/, never in procs/.
bool is_legacy_staging(const std::string& procs_dir, const std::string& name);

}  // namespace sup
