#include "tools/flashjit/text_table.hpp"

#include <algorithm>

namespace flashjit::tool {

void TextTable::add_row(std::vector<std::string> cells, std::vector<std::string> notes) {
  cells.resize(columns_.size());
  rows_.push_back({std::move(cells), std::move(notes)});
}

std::string TextTable::format(const std::vector<std::string>& cells, const std::vector<size_t>& widths) const {
  std::string line;
  for (size_t c = 0; c < columns_.size(); ++c) {
    if (c) line += ' ';
    const std::string pad(widths[c] - cells[c].size(), ' ');
    line += columns_[c].align == Align::kRight ? pad + cells[c] : cells[c] + pad;
  }
  line.erase(line.find_last_not_of(' ') + 1);
  return line;
}

void TextTable::print(std::FILE* out) const {
  std::vector<size_t> widths;
  std::vector<std::string> header;
  for (const Column& c : columns_) {
    widths.push_back(c.name.size());
    header.push_back(c.name);
  }
  for (const Row& r : rows_) {
    for (size_t c = 0; c < columns_.size(); ++c) widths[c] = std::max(widths[c], r.cells[c].size());
  }
  std::fprintf(out, "%s\n", format(header, widths).c_str());
  for (const Row& r : rows_) {
    std::fprintf(out, "%s\n", format(r.cells, widths).c_str());
    for (const std::string& note : r.notes) std::fprintf(out, "%s\n", note.c_str());
  }
}

std::string cell(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

std::string cell(long long value) { return std::to_string(value); }

}  // namespace flashjit::tool
