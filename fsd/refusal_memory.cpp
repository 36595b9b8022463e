#include "fsd/refusal_memory.hpp"

#include "fsd/errno_map.hpp"

namespace fsd {

RefusalMemory::Shown RefusalMemory::add(ErrorLog& errors, std::string_view path, int err, std::string_view reason,
                                        std::string_view request, const std::string& id, std::string_view bytes) {
  std::lock_guard g(mu_);
  if (any_ && err == err_ && bytes == bytes_ && reason == reason_) return {shown_, true};
  shown_ = errors.add(path, err, reason, request, id);
  any_ = true;
  err_ = err;
  bytes_ = bytes;
  reason_ = reason;
  return {shown_, false};
}

RefusalMemory::Shown RefusalMemory::add(ErrorLog& errors, std::string_view path, sup::Errc code,
                                        std::string_view reason, std::string_view request, const std::string& id,
                                        std::string_view bytes) {
  return add(errors, path, to_errno(code), reason, request, id, bytes);
}

void RefusalMemory::forget() {
  std::lock_guard g(mu_);
  if (!any_) return;
  any_ = false;
  bytes_.clear();
  bytes_.shrink_to_fit();
  reason_.clear();
  shown_.clear();
}

}  // namespace fsd
