// SPDX-License-Identifier: Apache-2.0
// Extent expressions: a recursive-descent parser to postfix steps, and their evaluation with a
// node's arguments.
#include "flowdsl/extent.hpp"

#include <cctype>
#include <cstring>
#include <limits>

#include "flowdsl/error.hpp"
#include "flowdsl/registry.hpp"

namespace flowdsl {

class ExtentParser {
 public:
  ExtentParser(std::string_view text, const std::vector<KernelParam>& params, std::string_view param, Extent& out)
      : text_(text), params_(params), param_(param), out_(out) {}

  void run() {
    skip_space();
    if (at_end()) fail("it is empty");
    sum();
    if (!at_end())
      fail("unexpected " + quoted_name(std::string(1, text_[pos_])) + " at column " + std::to_string(pos_ + 1));
  }

 private:
  using Code = Extent::Code;

  // sum := product (('+' | '-') product)*
  void sum() {
    product();
    for (;;) {
      if (accept('+')) {
        product();
        emit(Code::add);
      } else if (accept('-')) {
        product();
        emit(Code::sub);
      } else {
        return;
      }
    }
  }
  // product := factor (('*' | '/') factor)*
  void product() {
    factor();
    for (;;) {
      if (accept('*')) {
        factor();
        emit(Code::mul);
      } else if (accept('/')) {
        factor();
        emit(Code::div);
      } else {
        return;
      }
    }
  }
  // factor := integer | '(' sum ')' | (grid|block) '.' (x|y|z) | name | name '[' sum ']'
  void factor() {
    if (++depth_ > 32) fail("it nests too deeply");
    if (accept('(')) {
      sum();
      expect(')');
    } else if (!at_end() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      std::int64_t value = 0;
      while (!at_end() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        if (value > (std::numeric_limits<std::int64_t>::max() - 9) / 10) fail("a number is too large");
        value = value * 10 + (text_[pos_++] - '0');
      }
      skip_space();
      Extent::Step step{Code::constant};
      step.value = value;
      out_.program_.push_back(step);
    } else {
      const std::string_view name = identifier();
      if (name == "grid" || name == "block") {
        expect('.');
        const std::string_view axis = identifier();
        if (axis.size() != 1 || axis[0] < 'x' || axis[0] > 'z') fail("expected " + std::string(name) + ".x, .y or .z");
        Extent::Step step{name == "grid" ? Code::grid : Code::block};
        step.axis = static_cast<std::uint8_t>(axis[0] - 'x');
        out_.program_.push_back(step);
      } else {
        const std::uint32_t index = find(name);
        const ParamType& type = params_[index].type;
        if (accept('[')) {
          if (!type.pointer || !is_integer(type.scalar)) {
            fail(quoted_name(std::string(name) + "[...]") + " indexes a parameter that is not a pointer to integers");
          }
          sum();
          expect(']');
          Extent::Step step{Code::load};
          step.param = index;
          out_.program_.push_back(step);
          out_.data_dependent_ = true;
        } else {
          if (type.pointer || !is_integer(type.scalar)) {
            fail(quoted_name(std::string(name)) + " is not an integer scalar parameter (it is " + to_string(type) +
                 ")");
          }
          Extent::Step step{Code::param};
          step.param = index;
          step.is_signed = is_signed(type.scalar);
          step.size = static_cast<std::uint8_t>(size_of(type.scalar));
          out_.program_.push_back(step);
        }
      }
    }
    --depth_;
  }

  std::string_view identifier() {
    const std::size_t start = pos_;
    while (!at_end() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    if (start == pos_ || std::isdigit(static_cast<unsigned char>(text_[start]))) {
      fail(at_end()
               ? "it ends where a value is expected"
               : "unexpected " + quoted_name(std::string(1, text_[pos_])) + " at column " + std::to_string(pos_ + 1));
    }
    const std::string_view name = text_.substr(start, pos_ - start);
    skip_space();
    return name;
  }
  std::uint32_t find(std::string_view name) const {
    for (std::uint32_t i = 0; i < params_.size(); ++i) {
      if (params_[i].name == name) return i;
    }
    fail(quoted_name(std::string(name)) + " is not a parameter of the kernel");
  }
  static bool is_integer(ScalarType t) {
    return t != ScalarType::f16 && t != ScalarType::bf16 && t != ScalarType::f32 && t != ScalarType::f64;
  }
  static bool is_signed(ScalarType t) {
    return t == ScalarType::i8 || t == ScalarType::i16 || t == ScalarType::i32 || t == ScalarType::i64;
  }

  void emit(Code code) { out_.program_.push_back(Extent::Step{code}); }
  bool at_end() const { return pos_ >= text_.size(); }
  void skip_space() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool accept(char c) {
    if (at_end() || text_[pos_] != c) return false;
    ++pos_;
    skip_space();
    return true;
  }
  void expect(char c) {
    if (!accept(c)) {
      fail("expected " + quoted_name(std::string(1, c)) + " at column " + std::to_string(pos_ + 1));
    }
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw UsageError("flowdsl: the extent " + quoted_name(std::string(text_)) + " of parameter " +
                     quoted_name(std::string(param_)) + " is not valid: " + why);
  }

  std::string_view text_;
  const std::vector<KernelParam>& params_;
  std::string_view param_;
  Extent& out_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

Extent Extent::parse(std::string_view text, const std::vector<KernelParam>& params, std::string_view param) {
  Extent out;
  out.text_ = std::string(text);
  ExtentParser(text, params, param, out).run();
  return out;
}

bool Extent::reads(std::uint32_t param) const noexcept {
  for (const Step& step : program_) {
    if ((step.code == Code::param || step.code == Code::load) && step.param == param) return true;
  }
  return false;
}

Extent::Value Extent::evaluate(const ArgumentPack& args, const LaunchShape& launch) const {
  // A value on the stack: known, or unknown because it comes from device memory.
  struct Item {
    std::int64_t value;
    bool known;
  };
  Item stack[64];
  std::size_t top = 0;
  bool overflow = false;
  for (const Step& s : program_) {
    if (top >= std::size(stack)) return Value{Value::Kind::overflow, 0};  // deeper than any parse allows
    switch (s.code) {
      case Code::constant:
        stack[top++] = {s.value, true};
        break;
      case Code::grid:
      case Code::block: {
        const Dim3& d = s.code == Code::grid ? launch.grid : launch.block;
        stack[top++] = {static_cast<std::int64_t>(s.axis == 0 ? d.x : s.axis == 1 ? d.y : d.z), true};
        break;
      }
      case Code::param: {
        if (s.param >= args.size() || !args.bound(s.param)) return Value{Value::Kind::unbound, 0};
        std::uint64_t raw = 0;
        std::memcpy(&raw, args.data(s.param), s.size);
        std::int64_t value = 0;
        if (s.is_signed) {
          const unsigned shift = 64 - 8u * s.size;
          value = static_cast<std::int64_t>(raw << shift) >> shift;  // sign-extend
        } else if (raw > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
          overflow = true;
        } else {
          value = static_cast<std::int64_t>(raw);
        }
        stack[top++] = {value, true};
        break;
      }
      case Code::load:
        stack[top - 1] = {0, false};
        break;
      case Code::add:
      case Code::sub:
      case Code::mul:
      case Code::div: {
        const Item b = stack[--top];
        Item& a = stack[top - 1];
        a.known = a.known && b.known;
        if (!a.known) break;
        std::int64_t r = 0;
        if (s.code == Code::add) {
          overflow |= __builtin_add_overflow(a.value, b.value, &r);
        } else if (s.code == Code::sub) {
          overflow |= __builtin_sub_overflow(a.value, b.value, &r);
        } else if (s.code == Code::mul) {
          overflow |= __builtin_mul_overflow(a.value, b.value, &r);
        } else if (b.value == 0 || (a.value == std::numeric_limits<std::int64_t>::min() && b.value == -1)) {
          r = 0;  // what the kernel's own arithmetic would not reach: count nothing
        } else {
          r = a.value / b.value;
        }
        a.value = r;
        break;
      }
    }
  }
  if (overflow) return Value{Value::Kind::overflow, 0};
  if (!stack[0].known) return Value{Value::Kind::data_dependent, 0};
  return Value{Value::Kind::known, static_cast<std::uint64_t>(stack[0].value < 0 ? 0 : stack[0].value)};
}

}  // namespace flowdsl
