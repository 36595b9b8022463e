// procs/: one folder per command, in the order the records were made
// (tree.cpp: a listing's offsets). `mkdir procs/NAME` makes an empty named slot; `rmdir procs/ID`
// forgets an ended command, its record and its logs (EBUSY while running).
#include <cerrno>
#include <sys/stat.h>

#include "fsd/files.hpp"

namespace fsd {

std::vector<DirEntry> list_procs(Filesystem& fs, const Requester& who, std::uint64_t* generation) {
  // Ids, serials and owners only: a listing of thousands of records copies
  // no status and reads nothing in /proc. The inodes need not be
  // remembered here: the kernel looks each name up before using it.
  std::vector<DirEntry> out;
  for (sup::RecordEntry& e : fs.sup().entries(generation)) {
    if (!fs.visible(e.owner_uid, who)) continue;
    const fuse_ino_t ino = record_ino(e.serial, Kind::record_dir);
    out.push_back(DirEntry{std::move(e.bg_id), ino, mode_of(Kind::record_dir), record_place(e.serial)});
  }
  return out;
}

sup::Result<Node> make_slot(Filesystem& fs, const std::string& name, const Requester& who) {
  const std::string path = "procs/" + name + " (mkdir)";
  if (const sup::Status ok = sup::validate_name(name); !ok) {
    fs.errors().add(path, ok.error().code, ok.error().message, name);
    return ok.error();
  }
  sup::Result<sup::CommandStatus> st = fs.sup().create_slot(name, who.uid, who.sid);
  if (!st) {
    fs.errors().add(path, st.error().code, st.error().message, name);
    return st.error();
  }
  fs.note_action("mkdir", "made the empty slot procs/" + name, name, &*st);
  return fs.node_of(*st, Kind::record_dir);
}

sup::Status remove_record(Filesystem& fs, const std::string& name, const Requester& who) {
  const std::string path = "procs/" + name + " (rmdir)";
  const std::optional<sup::CommandStatus> rec = fs.find(name, who);
  if (!rec) return sup::Error{sup::Errc::not_found, "no such command"};
  const sup::Status st = fs.sup().remove(name);
  if (!st) {
    fs.errors().add(path, st.error().code, st.error().message, name, name);
    return st;
  }
  // A queued command removed never ran: its start step is closed here, not
  // at an end that never comes (nor at the removal's event: a record made
  // again under the name meanwhile would take it for its own).
  if (rec->state == "queued")
    fs.box_steps().fail_open(name, {"ECANCELED", "its record was removed before the command ran"});
  fs.note_action("rmdir", "removed procs/" + name + (rec->cmd_full.empty() ? "" : ": " + rec->cmd_full), name, &*rec);
  // Its scratch files go with it: a folder made again under the name is empty.
  fs.scratch().remove_dir(fs.node_of(*rec, Kind::record_dir).ino);
  return st;
}

}  // namespace fsd
