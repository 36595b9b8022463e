#include "supervisor/log_watch_filter.hpp"

#include <re2/filtered_re2.h>
#include <re2/re2.h>

#include <algorithm>
#include <cstring>
#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace sup {

namespace {

// Shorter literals let most lines through: their patterns are searched on
// every line instead (a regex over a whole chunk beats one per line).
constexpr int kMinAtomLen = 3;
constexpr std::size_t kMaxKey = 8;
// Up to this many rare bytes are looked for 16 or 32 bytes at a time; more, byte by byte.
constexpr std::size_t kMaxSimdNeedles = 8;

unsigned char lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? static_cast<unsigned char>(c + 32) : c; }
unsigned char upper(unsigned char c) { return c >= 'a' && c <= 'z' ? static_cast<unsigned char>(c - 32) : c; }

// How often a byte appears in logs, roughly (per 10,000 bytes): English
// letters, digits of times and counters, punctuation of paths and key=value.
int frequency(unsigned char c) {
  static const int letters[26] = {// a..z
                                  490, 90, 170, 260, 760, 140, 120, 370, 420, 10, 50, 240, 150,
                                  410, 450, 120, 6, 360, 380, 550, 170, 60, 140, 10, 120, 5};
  if (c >= 'a' && c <= 'z') return letters[c - 'a'];
  if (c >= 'A' && c <= 'Z') return letters[c - 'A'] / 10 + 5;
  if (c >= '0' && c <= '9') return 150;
  if (c == ' ') return 1500;
  if (c == '\n' || c == '\r') return 300;
  if (std::strchr(".:-/_=,()[]\"'\t", c) && c != 0) return 100;
  return 3;
}

int cost(unsigned char c) { return c == upper(c) ? frequency(c) : frequency(c) + frequency(upper(c)); }

std::uint64_t key_of(const char* p, std::size_t len) {
  std::uint64_t k = 0;
  for (std::size_t i = 0; i < len; ++i) k |= std::uint64_t{lower(static_cast<unsigned char>(p[i]))} << (8 * i);
  return k;
}

}  // namespace

std::optional<std::vector<std::string>> LogWatchFilter::atoms_of(const std::string& pattern) {
  re2::FilteredRE2 f(kMinAtomLen);
  RE2::Options o;
  o.set_log_errors(false);
  int id = 0;
  if (f.Add(pattern, o, &id) != RE2::NoError) return std::nullopt;
  std::vector<std::string> atoms;
  f.Compile(&atoms);
  // A pattern its prefilter passes with no literal found may match without any.
  std::vector<int> unfiltered;
  f.AllPotentials({}, &unfiltered);
  if (!unfiltered.empty() || atoms.empty()) return std::nullopt;
  if (std::any_of(atoms.begin(), atoms.end(), [](const std::string& a) { return a.empty(); })) return std::nullopt;
  return atoms;
}

LogWatchFilter::LogWatchFilter(const std::vector<std::string>& atoms) {
  for (int c = 0x80; c < 256; ++c) is_needle_[c] = true;
  for (const std::string& a : atoms) {
    // One with a byte >= 0x80 is only in lines that pass anyway.
    if (a.empty() || std::any_of(a.begin(), a.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; }))
      continue;
    std::size_t at = 0;
    for (std::size_t i = 1; i < a.size(); ++i)
      if (cost(lower(static_cast<unsigned char>(a[i]))) < cost(lower(static_cast<unsigned char>(a[at])))) at = i;
    const unsigned char rare = lower(static_cast<unsigned char>(a[at]));
    const std::size_t len = std::min(a.size(), kMaxKey);
    auto& list = buckets_[rare];
    auto b = std::find_if(list.begin(), list.end(), [&](const Bucket& x) { return x.offset == at; });
    if (b == list.end()) b = list.insert(list.end(), Bucket{at, len, {}});
    b->len = std::min(b->len, len);
    b->keys.push_back(key_of(a.data(), len));  // trimmed to b->len below
    for (unsigned char n : {rare, upper(rare)})
      if (!is_needle_[n]) {
        is_needle_[n] = true;
        needles_.push_back(n);
      }
  }
  for (auto& list : buckets_)
    for (Bucket& b : list) {
      const std::uint64_t mask = b.len >= 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * b.len)) - 1;
      for (auto& k : b.keys) k &= mask;
      std::sort(b.keys.begin(), b.keys.end());
      b.keys.erase(std::unique(b.keys.begin(), b.keys.end()), b.keys.end());
    }
}

namespace {

#if defined(__x86_64__)
// Which of the 32 bytes at `q` are one of the `count` needles or >= 0x80 (their high bits).
__attribute__((target("avx2"))) inline __m256i hits_avx2(const char* q, const __m256i* n, std::size_t count) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
  __m256i hit = v;
  for (std::size_t i = 0; i < count; ++i) hit = _mm256_or_si256(hit, _mm256_cmpeq_epi8(v, n[i]));
  return hit;
}

// The first byte of [p, end) that is one of `needles` or >= 0x80, 64 bytes
// a step while none is there; when there is none, where fewer than 32 bytes are left.
__attribute__((target("avx2"))) const char* scan_avx2(const char* p, const char* end,
                                                      const std::vector<unsigned char>& needles) {
  __m256i n[kMaxSimdNeedles];
  const std::size_t count = needles.size();
  for (std::size_t i = 0; i < count; ++i) n[i] = _mm256_set1_epi8(static_cast<char>(needles[i]));
  for (; end - p >= 64; p += 64)
    if (_mm256_movemask_epi8(_mm256_or_si256(hits_avx2(p, n, count), hits_avx2(p + 32, n, count)))) break;
  for (; end - p >= 32; p += 32)
    if (const unsigned m = static_cast<unsigned>(_mm256_movemask_epi8(hits_avx2(p, n, count))))
      return p + __builtin_ctz(m);
  return p;
}
#endif

}  // namespace

const char* LogWatchFilter::scan(const char* p, const char* end) const {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2 && needles_.size() <= kMaxSimdNeedles) p = scan_avx2(p, end, needles_);
#endif
#if defined(__SSE2__)
  if (needles_.size() <= kMaxSimdNeedles) {
    __m128i n[kMaxSimdNeedles];
    const std::size_t count = needles_.size();
    for (std::size_t i = 0; i < count; ++i) n[i] = _mm_set1_epi8(static_cast<char>(needles_[i]));
    for (; end - p >= 16; p += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      __m128i hit = v;  // its high bits: the bytes >= 0x80
      for (std::size_t i = 0; i < count; ++i) hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, n[i]));
      if (const int m = _mm_movemask_epi8(hit)) return p + __builtin_ctz(static_cast<unsigned>(m));
    }
  }
#endif
  for (; p < end; ++p)
    if (is_needle_[static_cast<unsigned char>(*p)]) return p;
  return end;
}

bool LogWatchFilter::confirms(const char* begin, const char* end, const char* p) const {
  for (const Bucket& b : buckets_[lower(static_cast<unsigned char>(*p))]) {
    if (static_cast<std::size_t>(p - begin) < b.offset) continue;
    const char* a = p - b.offset;
    if (static_cast<std::size_t>(end - a) < b.len) continue;
    if (std::binary_search(b.keys.begin(), b.keys.end(), key_of(a, b.len))) return true;
  }
  return false;
}

bool LogWatchFilter::next(std::string_view region, std::size_t* from, std::string_view* line) const {
  const char* begin = region.data();
  const char* end = begin + region.size();
  const char* start = begin + std::min(*from, region.size());
  for (const char* p = start; (p = scan(p, end)) != end; ++p) {
    if (static_cast<unsigned char>(*p) < 0x80 && !confirms(begin, end, p)) continue;
    const char* first = start;
    if (const void* nl = p > start ? ::memrchr(start, '\n', static_cast<std::size_t>(p - start)) : nullptr)
      first = static_cast<const char*>(nl) + 1;
    const void* nl = ::memchr(p, '\n', static_cast<std::size_t>(end - p));
    const char* last = nl ? static_cast<const char*>(nl) : end;
    *line = std::string_view(first, static_cast<std::size_t>(last - first));
    *from = static_cast<std::size_t>(last - begin) + 1;
    return true;
  }
  *from = region.size();
  return false;
}

}  // namespace sup
