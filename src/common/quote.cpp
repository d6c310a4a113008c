#include "common/quote.hpp"

namespace flashjit {

std::string quote_user_text(std::string_view text) {
  if (text.size() <= kQuotedWholeChars) return "'" + std::string(text) + "'";
  return "'" + std::string(text.substr(0, kQuotedPrefixChars)) + "...' (" + std::to_string(text.size()) + " characters)";
}

std::string shorten_user_text(std::string_view text) {
  if (text.size() <= kQuotedWholeChars) return std::string(text);
  return std::string(text.substr(0, kQuotedPrefixChars)) + "...";
}

}  // namespace flashjit
