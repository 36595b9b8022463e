#pragma once
// Masking of secret values in anything shown to a reader.
#include <string>
#include <string_view>
#include <vector>

namespace sup {

inline constexpr std::string_view kMask = "****";

/// Which bytes of `text` any occurrence of any non-empty secret covers,
/// overlapping ones included; empty when none does.
std::vector<bool> covered_bytes(std::string_view text, const std::vector<std::string>& secrets);

/// Replaces every run of bytes that occurrences of non-empty secrets cover
/// in `text` with "****": one that contains another, or two that overlap,
/// are masked whole.
std::string mask_secrets(std::string_view text, const std::vector<std::string>& secrets);

/// The last `max` bytes of `text` (from a character's first byte on), each
/// run of bytes that secrets found in the whole text cover shown as
/// "****": a secret the cut falls inside shows none of itself.
std::string mask_secrets_end(std::string_view text, const std::vector<std::string>& secrets, std::size_t max);

/// `text` as mask_secrets() shows it, and where it is JSON (a request as
/// written), every string in it that holds a secret written anew with the
/// secret masked, however its escapes spelt it ("h\u00e9llo", "a\/b").
std::string mask_secrets_in_json(std::string_view text, const std::vector<std::string>& secrets);

/// For byte streams whose size and offsets must stay true (logs): every byte
/// covered by any occurrence of any secret (overlapping ones included)
/// becomes '*'. The result for a byte depends only on the bytes within
/// (longest secret - 1) of it, so a reader may mask any window widened by
/// that much on each side and keep the middle.
void mask_secrets_in_place(std::string& bytes, const std::vector<std::string>& secrets);

/// The longest secret's length less one (0 without secrets): how far a
/// window of output is widened on each side to recognise one it cuts.
std::size_t secret_reach(const std::vector<std::string>& secrets);

/// Where output is cut (a live stream's end, a gap that log_max made), the
/// bytes that may be part of a secret are held back or masked. Were that
/// decided by whether they are, a user could learn a secret that only the
/// daemon knows (its --secrets-file) a byte at a time, printing guesses and
/// watching which are held. So for those secrets the bytes at a cut are
/// held or masked whatever they are: `blind` of them (the global secrets'
/// reach, secret_reach()), within the line (no such secret holds a newline,
/// so none reaches across one). A command's own secretEnv, which its user
/// gave, is looked for as it is.
///
/// How many of the last bytes of `bytes` are held: the beginning of a
/// secret (the longest such end, shorter than the secret, that no whole
/// secret covers), and at least the last `blind` bytes of the unfinished
/// line that no whole secret covers: output that may yet become a secret
/// once the command writes on, which a reader of a live log is not given
/// until it does (or ends).
std::size_t secret_start_at_end(std::string_view bytes, const std::vector<std::string>& secrets,
                                std::size_t blind = 0);
/// At a cut: how many of the first bytes of `bytes` may end a secret whose
/// beginning is gone (at_start), or of its last ones may begin one whose
/// end is gone; at least `blind` of them within their line.
std::size_t secret_part_at_cut(std::string_view bytes, const std::vector<std::string>& secrets, std::size_t blind,
                               bool at_start);

/// The values of a request's own secretEnv (every string under it: a key
/// given twice, an array; as far as the text parses as JSON), each also as
/// the request spells it when that differs (a quote, a backslash): a
/// refused request has no command whose secrets are known.
std::vector<std::string> request_secrets(std::string_view request);

}  // namespace sup
