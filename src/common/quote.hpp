// Quoting what a user wrote in a message: whole when it is short, else a prefix and its length, so
// that a huge value cannot make a huge message (a 100,000-character value gave a 100,040-byte one).
#pragma once
#include <string>
#include <string_view>

namespace flashjit {

// Text of at most this many characters is quoted whole; longer text is cut to kQuotedPrefixChars.
inline constexpr std::size_t kQuotedWholeChars = 48;
inline constexpr std::size_t kQuotedPrefixChars = 40;

// 'text', or 'its first 40 characters...' (N characters).
std::string quote_user_text(std::string_view text);

// The text itself, or its first 40 characters and "...": for a field name (Error::field).
std::string shorten_user_text(std::string_view text);

}  // namespace flashjit
