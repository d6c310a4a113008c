// Text tables for the tool's human-readable output: each column is as wide as its widest cell, so
// every row lines up with the header whatever the cells hold (a resolved spec is 100-130
// characters; fixed widths let it push the later columns out of line).
#pragma once
#include <cstdio>
#include <string>
#include <vector>

namespace flashjit::tool {

class TextTable {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string name;
    Align align = Align::kLeft;
  };

  explicit TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}

  // One row (a cell per column), and notes: lines printed under it as they are (indent them).
  void add_row(std::vector<std::string> cells, std::vector<std::string> notes = {});

  // Header and rows, the columns one space apart, no trailing spaces.
  void print(std::FILE* out) const;

 private:
  struct Row {
    std::vector<std::string> cells;
    std::vector<std::string> notes;
  };
  std::string format(const std::vector<std::string>& cells, const std::vector<size_t>& widths) const;

  std::vector<Column> columns_;
  std::vector<Row> rows_;
};

// printf-style formatting of one cell ("%.0f", "%d"...).
std::string cell(const char* format, double value);
std::string cell(long long value);

}  // namespace flashjit::tool
