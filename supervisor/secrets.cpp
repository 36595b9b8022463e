#include "supervisor/secrets.hpp"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "supervisor/utf8.hpp"

namespace sup {

std::vector<bool> covered_bytes(std::string_view text, const std::vector<std::string>& secrets) {
  std::vector<bool> covered;
  const auto cover = [&](std::size_t at, std::size_t n) {
    if (covered.empty()) covered.assign(text.size(), false);
    std::fill(covered.begin() + static_cast<long>(at), covered.begin() + static_cast<long>(at + n), true);
  };
  // A search of the text for each secret costs secrets x text: a request
  // may bring tens of thousands (secretEnv), and every read of its output
  // is masked. Past a few secrets and a few KiB, the text is read once: a
  // rolling hash of a window of bytes (the shortest secret's length, at
  // most 32) names the secrets that end with those bytes, which are then
  // compared whole. Their ends, not their starts: secrets of one kind
  // share a start (a JWT's header, `ghp_`), which would name them all at
  // once. (The table costs a pass over the secrets: a short text is
  // searched for each.)
  constexpr std::size_t kFew = 8, kMinWindow = 4, kMaxWindow = 32, kLongText = 4096;
  std::vector<const std::string*> each, hashed;
  std::size_t window = kMaxWindow;
  for (const std::string& s : secrets) {
    if (s.empty()) continue;
    if (s.size() < kMinWindow) {
      each.push_back(&s);
    } else {
      hashed.push_back(&s);
      window = std::min(window, s.size());
    }
  }
  if (hashed.size() <= kFew || text.size() < kLongText) {
    each.insert(each.end(), hashed.begin(), hashed.end());
    hashed.clear();
  }
  for (const std::string* s : each)
    for (std::size_t at = text.find(*s); at != std::string_view::npos; at = text.find(*s, at + 1)) cover(at, s->size());
  if (hashed.empty()) return covered;  // (else the text is longer than any window)

  constexpr std::uint64_t kBase = 1099511628211ull;  // arithmetic modulo 2^64
  const auto byte = [](char c) { return static_cast<std::uint64_t>(static_cast<unsigned char>(c)); };
  const auto hash_of = [&](std::string_view w) {
    std::uint64_t h = 0;
    for (const char c : w) h = h * kBase + byte(c);
    return h;
  };
  std::unordered_map<std::uint64_t, std::vector<const std::string*>> by_end;
  for (const std::string* s : hashed) by_end[hash_of(std::string_view(*s).substr(s->size() - window))].push_back(s);
  std::uint64_t top = 1;  // kBase^(window-1): the weight of the byte that leaves the window
  for (std::size_t k = 1; k < window; ++k) top *= kBase;
  std::uint64_t h = hash_of(text.substr(0, window));
  for (std::size_t at = 0;; ++at) {
    if (const auto it = by_end.find(h); it != by_end.end())
      for (const std::string* s : it->second) {
        if (at + window < s->size()) continue;  // it would begin before the text
        const std::size_t from = at + window - s->size();
        if (text.compare(from, s->size(), *s) == 0) cover(from, s->size());
      }
    if (at + window >= text.size()) break;
    h = (h - byte(text[at]) * top) * kBase + byte(text[at + window]);
  }
  return covered;
}

namespace {

/// text[from, to) with each run of covered bytes shown as one kMask,
/// whatever secrets made it (`covered`: of the whole text, or empty).
std::string masked_runs(std::string_view text, const std::vector<bool>& covered, std::size_t from, std::size_t to) {
  if (covered.empty()) return std::string(text.substr(from, to - from));
  std::string out;
  out.reserve(to - from);
  for (std::size_t i = from; i < to;) {
    if (!covered[i]) {
      out += text[i++];
      continue;
    }
    out += kMask;
    while (i < to && covered[i]) ++i;
  }
  return out;
}

}  // namespace

std::string mask_secrets(std::string_view text, const std::vector<std::string>& secrets) {
  return mask_secrets_end(text, secrets, text.size());
}

std::string mask_secrets_end(std::string_view text, const std::vector<std::string>& secrets, std::size_t max) {
  const std::size_t from = text.size() - utf8_tail(text, max).size();  // not inside a character
  return masked_runs(text, covered_bytes(text, secrets), from, text.size());
}

std::string mask_secrets_in_json(std::string_view text, const std::vector<std::string>& secrets) {
  using nlohmann::json;
  if (std::all_of(secrets.begin(), secrets.end(), [](const std::string& s) { return s.empty(); }))
    return std::string(text);
  if (json::parse(text, nullptr, false).is_discarded()) return mask_secrets(text, secrets);
  // Valid JSON: a quote is a string's first or last byte, nothing else.
  // Every string is decoded, and all of them searched at once (joined by
  // NUL bytes: a secret that holds one may then match across two strings,
  // which masks more, never less): a request of many strings and many
  // secrets is read once, not once a string.
  struct Token {
    std::size_t open, close;  // its quotes in `text`
    std::size_t from, to;     // its decoded bytes in `joined`
  };
  std::vector<Token> tokens;
  std::string joined;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t open = text.find('"', i);
    if (open == std::string_view::npos) break;
    std::size_t close = open + 1;
    while (close < text.size() && text[close] != '"') close += text[close] == '\\' ? 2 : 1;
    if (close >= text.size()) break;
    const json value = json::parse(text.substr(open, close + 1 - open), nullptr, false);
    if (value.is_string()) {
      const std::size_t from = joined.size();
      joined += value.get_ref<const std::string&>();
      tokens.push_back({open, close, from, joined.size()});
      joined += '\0';
    }
    i = close + 1;
  }
  const std::vector<bool> covered = covered_bytes(joined, secrets);
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  for (const Token& t : tokens) {
    if (covered.empty() || std::none_of(covered.begin() + static_cast<long>(t.from),
                                        covered.begin() + static_cast<long>(t.to), [](bool b) { return b; }))
      continue;
    out.append(text.substr(i, t.open - i));
    out += json(masked_runs(joined, covered, t.from, t.to)).dump(-1, ' ', false, json::error_handler_t::replace);
    i = t.close + 1;
  }
  out.append(text.substr(std::min(i, text.size())));
  return mask_secrets(out, secrets);
}

void mask_secrets_in_place(std::string& bytes, const std::vector<std::string>& secrets) {
  const std::vector<bool> covered = covered_bytes(bytes, secrets);
  for (size_t i = 0; i < covered.size(); ++i)
    if (covered[i]) bytes[i] = '*';
}

std::size_t secret_reach(const std::vector<std::string>& secrets) {
  std::size_t longest = 0;
  for (const std::string& s : secrets) longest = std::max(longest, s.size());
  return longest > 0 ? longest - 1 : 0;
}

std::size_t secret_start_at_end(std::string_view bytes, const std::vector<std::string>& secrets, std::size_t blind) {
  // Bytes a whole secret covers are masked, whatever follows: never held
  // (cut off, a secret whose end repeats its beginning would show unmasked).
  const std::vector<bool> covered = covered_bytes(bytes, secrets);
  std::size_t open = 0;  // the bytes at the end that no secret covers
  while (open < bytes.size() && (covered.empty() || !covered[bytes.size() - 1 - open])) ++open;
  const std::size_t line = bytes.size() - (bytes.rfind('\n') == std::string_view::npos ? 0 : bytes.rfind('\n') + 1);
  std::size_t held = std::min({blind, open, line});
  for (const std::string& s : secrets)
    for (std::size_t k = std::min(s.size() - (s.empty() ? 0 : 1), open); k > held; --k)
      if (bytes.compare(bytes.size() - k, k, s, 0, k) == 0) {
        held = k;
        break;
      }
  return held;
}

std::size_t secret_part_at_cut(std::string_view bytes, const std::vector<std::string>& secrets, std::size_t blind,
                               bool at_start) {
  const std::size_t nl = at_start ? bytes.find('\n') : bytes.rfind('\n');
  const std::size_t line = nl == std::string_view::npos ? bytes.size() : at_start ? nl : bytes.size() - 1 - nl;
  std::size_t part = std::min(blind, line);
  for (const std::string& s : secrets)
    for (std::size_t k = std::min(s.empty() ? 0 : s.size() - 1, bytes.size()); k > part; --k)
      if (at_start ? bytes.compare(0, k, s, s.size() - k, k) == 0 : bytes.compare(bytes.size() - k, k, s, 0, k) == 0) {
        part = k;
        break;
      }
  return part;
}

namespace {

std::vector<std::string> secret_env_values(std::string_view request) {
  using nlohmann::json;
  // Every string under a top-level "secretEnv", as the parser meets it: a
  // key given twice keeps only its last value in the parsed object, and a
  // request that stops parsing part way has said its secrets before that.
  std::vector<std::string> out;
  auto keep = [&out](const json& value) {
    if (!value.is_string() || value.get_ref<const std::string&>().empty()) return;
    out.push_back(value.get<std::string>());
    // As it stands in the request text when it holds a quote, a backslash...
    const std::string quoted = value.dump(-1, ' ', false, json::error_handler_t::replace);
    if (quoted.substr(1, quoted.size() - 2) != out.back()) out.push_back(quoted.substr(1, quoted.size() - 2));
  };
  bool named = false;  // the last top-level key was "secretEnv"
  bool inside = false;  // within its object (or array)
  [[maybe_unused]] const json whole = json::parse(  // read for its callback
      request,
      [&](int depth, json::parse_event_t ev, json& parsed) {
        if (depth == 1 && ev == json::parse_event_t::key) {
          named = parsed.is_string() && parsed.get_ref<const std::string&>() == "secretEnv";
        } else if (depth == 1 && named && (ev == json::parse_event_t::object_start || ev == json::parse_event_t::array_start)) {
          inside = true;
          named = false;
        } else if (depth == 1 && (ev == json::parse_event_t::object_end || ev == json::parse_event_t::array_end)) {
          inside = false;
        } else if (ev == json::parse_event_t::value && (inside || (depth == 1 && named))) {
          keep(parsed);
          if (depth == 1) named = false;
        }
        return true;
      },
      false);
  return out;
}

}  // namespace

std::vector<std::string> request_secrets(std::string_view request) {
  if (request.find('\0') == std::string_view::npos) return secret_env_values(request);
  // The parser takes a NUL byte for the end of its input (such a request is
  // refused, and echoed in `errors`): what follows one is read too, with
  // each NUL as a blank (one inside a string) and as the start of a text
  // of its own (one between two objects).
  std::string blanked(request);
  std::replace(blanked.begin(), blanked.end(), '\0', ' ');
  std::vector<std::string> out = secret_env_values(blanked);
  for (std::size_t from = 0; from <= request.size();) {
    const std::size_t nul = std::min(request.find('\0', from), request.size());
    for (std::string& s : secret_env_values(request.substr(from, nul - from))) out.push_back(std::move(s));
    from = nul + 1;
  }
  return out;
}

}  // namespace sup
