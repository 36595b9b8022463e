// Removing records: by rmdir and by the retention limits, with the id counter kept past them.
#include "supervisor/supervisor_impl.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "supervisor/auto_id.hpp"
#include "supervisor/files.hpp"

namespace sup {

void Supervisor::Impl::note_ended(const Record& r) {
  std::optional<EndedRecords::Millis> at = iso_to_ms(r.exit.finished_at);
  if (!at) {
    // A torn or missing exit record: its folder's last change is the best
    // guess (never "long ago", which the age limit would remove at once).
    struct stat st{};
    at = ::stat(dir_of(r.id).c_str(), &st) == 0
             ? static_cast<EndedRecords::Millis>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000
             : now_ms();
  }
  ended_index.add(r.id, *at, r.owner_uid);
}

void Supervisor::Impl::save_counter_for(const std::string& removed_id) {
  // Ids are never reused: the next one is past the highest folder on load,
  // so only removing a record can lower that; the counter on disk must stay
  // past every removed automatic id (written rarely: the oldest go first).
  auto n = parse_auto_id(removed_id);
  if (!n || counter_on_disk > *n) return;
  if (write_file_atomic(opts.state_dir + "/counter", std::to_string(counter) + "\n")) counter_on_disk = counter;
}

std::string Supervisor::Impl::detach(std::map<std::string, Record>::iterator it, Status* err) {
  const std::string id = it->first;
  if (it->second.spec && !it->second.spec->script_file.empty()) ::unlink(it->second.spec->script_file.c_str());
  save_counter_for(id);
  // Rename first, so a crash mid-delete leaves no half record; a unique
  // name, so no later record of the same name collides with the delete.
  std::string del = deletion_dir();
  if (::rename(dir_of(id).c_str(), del.c_str()) != 0) {
    *err = error_from_errno(errno, "rename " + dir_of(id));
    return {};
  }
  ended_index.erase(id);
  if (it->second.state == CommandState::queued) {
    queue.erase(it->second.queue_seq);  // never to run
    loop->post([this, id] { reader_probes->finish(id); });  // its readers' waiting conditions
  }
  drop_record(it);
  // A record made again under this name is another folder: another serial
  // (its inode number). The kernel marks a removed folder's inode dead, and
  // while a file of it is held open it would answer for the new one.
  serials.erase(id);
  ++listing_gen;
  cpu.forget(id);
  return del;
}

void Supervisor::Impl::prune() {
  std::vector<std::pair<std::string, std::uint64_t>> removed;  // id, serial
  std::vector<std::string> dirs;
  {
    std::lock_guard g(mu);
    for (const std::string& id : ended_index.due(now_ms(), opts.retention)) {
      auto it = records.find(id);
      if (it == records.end() || reserved.count(id)) continue;  // a named start is replacing it
      Status err = Ok{};
      const std::uint64_t serial = it->second.serial;
      std::string del = detach(it, &err);
      if (del.empty()) {
        ended_index.erase(id);  // cannot rename it: keep it, stop trying
        continue;
      }
      removed.emplace_back(id, serial);
      dirs.push_back(std::move(del));
    }
    arm_retention_timer();
  }
  // Unpublished already (renamed): the files go on the worker pool.
  for (std::string& d : dirs) work->post([d = std::move(d)] { remove_tree(d); });
  if (removed.empty()) return;
  changed.notify_all();
  for (const auto& [id, serial] : removed) emit(Event::Kind::removed, id, serial);
}

void Supervisor::Impl::arm_retention_timer() {
  // One one-shot timer at the next record's expiry, never a periodic one:
  // an idle supervisor does not wake up.
  const std::optional<EndedRecords::Millis> due = ended_index.next_expiry(opts.retention);
  if (due == retention_due) return;
  if (retention_timer) loop->cancel_timer(retention_timer);
  retention_timer = 0;
  retention_due = due;
  if (!due) return;
  const auto delay = std::chrono::milliseconds(std::max<EndedRecords::Millis>(0, *due - now_ms()) + 1);
  const std::uint64_t gen = ++retention_gen;
  retention_timer = loop->add_timer(Clock::now() + delay, [this, gen] {
    {
      std::lock_guard g(mu);
      if (gen == retention_gen) {  // else re-armed meanwhile: that timer is the one
        retention_timer = 0;
        retention_due.reset();
      }
    }
    prune();
  });
}

}  // namespace sup
