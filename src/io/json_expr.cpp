// SPDX-License-Identifier: Apache-2.0
// A recursive-descent evaluator for the integer expressions a graph file may write where it takes
// a size, count or offset; signed 128-bit intermediates, so that `rank - 1` is an error, not a wrap.
#include "json_expr.hpp"

namespace flowdsl::json_detail {
namespace {

constexpr int max_nesting = 32;
__extension__ typedef __int128 Wide;  // GCC and Clang; __extension__ keeps -Wpedantic quiet

class Evaluator {
 public:
  Evaluator(std::string_view text, std::uint64_t rank, std::uint64_t world) : text_(text), rank_(rank), world_(world) {}

  bool run(std::uint64_t& value, std::string& problem) {
    Wide v = 0;
    if (!sum(v, 0)) {
      problem = problem_;
      return false;
    }
    skip();
    if (at_ != text_.size()) {
      problem = "unexpected '" + std::string(1, text_[at_]) + "' at column " + std::to_string(at_ + 1);
      return false;
    }
    if (v < 0) {
      problem = "the value is negative";
      return false;
    }
    value = static_cast<std::uint64_t>(v);
    return true;
  }

 private:
  static constexpr Wide limit = static_cast<Wide>(UINT64_MAX);

  void skip() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t')) ++at_;
  }
  bool fail(std::string what) {
    if (problem_.empty()) problem_ = std::move(what);
    return false;
  }
  bool in_range(Wide v) { return (v <= limit && v >= -limit) || fail("the value overflows 64 bits"); }

  bool sum(Wide& v, int depth) {
    if (!product(v, depth)) return false;
    for (;;) {
      skip();
      if (at_ >= text_.size() || (text_[at_] != '+' && text_[at_] != '-')) return true;
      const char op = text_[at_++];
      Wide rhs = 0;
      if (!product(rhs, depth)) return false;
      v = op == '+' ? v + rhs : v - rhs;
      if (!in_range(v)) return false;
    }
  }

  bool product(Wide& v, int depth) {
    if (!factor(v, depth)) return false;
    for (;;) {
      skip();
      if (at_ >= text_.size() || (text_[at_] != '*' && text_[at_] != '/' && text_[at_] != '%')) return true;
      const char op = text_[at_++];
      Wide rhs = 0;
      if (!factor(rhs, depth)) return false;
      if (op == '*') {
        if (rhs != 0 && (v > limit / (rhs < 0 ? -rhs : rhs) || v < -limit / (rhs < 0 ? -rhs : rhs))) {
          return fail("the value overflows 64 bits");
        }
        v *= rhs;
      } else {
        if (rhs == 0) return fail(op == '/' ? "division by zero" : "remainder by zero");
        v = op == '/' ? v / rhs : v % rhs;
      }
    }
  }

  bool factor(Wide& v, int depth) {
    skip();
    if (at_ >= text_.size()) return fail(text_.empty() ? "the expression is empty" : "the expression ends early");
    const char c = text_[at_];
    if (c == '(') {
      if (depth >= max_nesting) return fail("parentheses nest deeper than " + std::to_string(max_nesting));
      ++at_;
      if (!sum(v, depth + 1)) return false;
      skip();
      if (at_ >= text_.size() || text_[at_] != ')') return fail("a '(' is not closed");
      ++at_;
      return true;
    }
    if (c >= '0' && c <= '9') {
      v = 0;
      while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') {
        v = v * 10 + (text_[at_++] - '0');
        if (v > limit) return fail("a number overflows 64 bits");
      }
      return true;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
      const std::size_t start = at_;
      while (at_ < text_.size() && ((text_[at_] >= 'a' && text_[at_] <= 'z') || (text_[at_] >= 'A' && text_[at_] <= 'Z') ||
                                    (text_[at_] >= '0' && text_[at_] <= '9') || text_[at_] == '_')) {
        ++at_;
      }
      const std::string_view name = text_.substr(start, at_ - start);
      if (name == "rank") {
        v = rank_;
      } else if (name == "world") {
        v = world_;
      } else {
        return fail("unknown name '" + std::string(name) + "' (an expression may use rank and world)");
      }
      return true;
    }
    return fail("unexpected '" + std::string(1, c) + "' at column " + std::to_string(at_ + 1));
  }

  std::string_view text_;
  std::uint64_t rank_, world_;
  std::size_t at_ = 0;
  std::string problem_;
};

}  // namespace

bool evaluate_expression(std::string_view text, std::uint64_t rank, std::uint64_t world, std::uint64_t& value,
                         std::string& problem) {
  return Evaluator(text, rank, world).run(value, problem);
}

}  // namespace flowdsl::json_detail
