// libFuzzer target over every parser of user input: requests (plain text and
// JSON), ready conditions, signal names, bgIds, parameters in file names. Each must answer a value or
// an invalid_argument with a message: never crash, hang or leak.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fsd/file_params.hpp"
#include "supervisor/ready_condition.hpp"
#include "supervisor/signal_names.hpp"
#include "supervisor/spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (auto r = sup::parse_request(in, "/"); !r) {
    if (r.error().message.empty()) std::abort();
  } else if (r->argv.empty() && !r->shell) {
    std::abort();  // a request that parses names something to run
  }
  if (auto c = sup::parse_ready_condition(in); !c && c.error().message.empty()) std::abort();
  if (auto sig = sup::parse_signal(in); sig && (*sig < 1 || *sig > 64)) std::abort();
  (void)sup::validate_name(std::string(in));
  for (const std::span<const fsd::ParamKey> keys : fsd::param_keys::all) {
    const fsd::ParamFile f{fsd::ParamDir::record, "file", keys};
    auto p = fsd::parse_file_params(f.name, &f, in, fsd::ParamLimits{});
    if (!p && p.error().message.empty()) std::abort();
    if (p && p->canonical().size() > in.size()) std::abort();  // the canonical form never grows a name
  }
  return 0;
}
