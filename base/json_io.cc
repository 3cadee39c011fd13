#include "base/json_io.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace tmx {
namespace {

using nlohmann::json;

// The second pass over a text the parser rejected: a SAX handler that builds nothing and remembers where in
// the document the parser was (the open arrays and objects, the current key or index) and what it reported.
// nlohmann's exceptions carry a byte offset only for syntax errors, and none carries the field.
class ErrorLocator : public nlohmann::json_sax<json> {
 public:
  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override { return Open(/*array=*/false); }
  bool key(string_t& key) override {
    frames_.back().key = key;
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(/*array=*/true); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& ex) override {
    failed_ = true;
    position_ = position;
    last_token_ = last_token;
    id_ = ex.id;
    syntax_error_ = dynamic_cast<const json::parse_error*>(&ex) != nullptr;
    what_ = ex.what();
    return false;
  }

  bool failed() const { return failed_; }
  bool syntax_error() const { return syntax_error_; }
  int id() const { return id_; }
  size_t position() const { return position_; }
  const std::string& last_token() const { return last_token_; }
  const std::string& what() const { return what_; }

  // The value being read, as `key.list[2].field` ("" at the top level).
  std::string Field() const {
    std::string field;
    for (const Frame& f : frames_) {
      if (f.array) {
        field += "[" + std::to_string(f.index) + "]";
      } else {
        if (!f.key) break;  // the object's first key was not read yet
        bool plain = !f.key->empty() && std::all_of(f.key->begin(), f.key->end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
        });
        if (!field.empty()) field += ".";
        field += plain ? *f.key : DumpJson(json(*f.key));
      }
    }
    return field;
  }

 private:
  struct Frame {
    bool array = false;
    std::optional<std::string> key;  // objects: the key whose value is being read
    size_t index = 0;                // arrays: the index of the element being read
  };
  bool Open(bool array) {
    frames_.push_back(Frame{array, std::nullopt, 0});
    return true;
  }
  bool Close() {
    frames_.pop_back();
    return Value();
  }
  bool Value() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
    return true;
  }

  std::vector<Frame> frames_;
  bool failed_ = false;
  bool syntax_error_ = false;
  int id_ = 0;
  size_t position_ = 0;
  std::string last_token_;
  std::string what_;
};

// nlohmann's text without its "[json.exception.parse_error.101] parse error at line 1, column 5: " prefix:
// the caller states the position in the file itself.
std::string Detail(const std::string& what) {
  size_t start = what.find("] ");
  start = start == std::string::npos ? 0 : start + 2;
  size_t column = what.find("column ", start);
  if (column != std::string::npos) {
    size_t colon = what.find(": ", column);
    if (colon != std::string::npos) start = colon + 2;
  }
  return what.substr(start);
}

// `text` cut to at most `max_bytes` bytes, at a character boundary, then "...".
std::string Shorten(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  return text.substr(0, cut) + "...";
}

// The longest excerpt of the file a message quotes (a number's digits, the parser's "last read" text).
constexpr size_t kMaxQuoted = 120;

// nlohmann's id of the out_of_range error for a number that overflows a double.
constexpr int kNumberOverflow = 406;

}  // namespace

StatusOr<json> ParseJsonText(const std::string& path, std::string_view text, int64_t first_line) {
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!value.is_discarded()) return value;

  ErrorLocator locator;
  json::sax_parse(text, &locator);
  if (!locator.failed()) {  // cannot happen: both passes run the same parser
    return Status::InvalidArgument(path + ": invalid JSON; fix: correct the file, or regenerate it");
  }
  bool overflow = !locator.syntax_error() && locator.id() == kNumberOverflow;
  // The parser reports the offset just past what it read: the failing character, or the end of the number.
  size_t end = std::min(locator.position(), text.size() + 1);
  size_t offset = overflow ? end - std::min(end, locator.last_token().size()) : (end > 0 ? end - 1 : 0);
  offset = std::min(offset, text.size());  // past the last character: the input ended too early
  int64_t line = first_line + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
  size_t newline = offset == 0 ? std::string_view::npos : text.rfind('\n', offset - 1);
  size_t column = offset - (newline == std::string_view::npos ? 0 : newline + 1) + 1;  // in bytes, from 1

  std::string message = path + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
  std::string field = locator.syntax_error() ? "" : locator.Field();
  if (!field.empty()) message += "in " + field + ": ";
  if (overflow) {
    message += "number " + Shorten(locator.last_token(), kMaxQuoted) +
               " is out of range (a double holds magnitudes up to about 1.8e308); fix: write a number within "
               "that range, or regenerate the file";
  } else {
    message += "invalid JSON (" + Shorten(Detail(locator.what()), 2 * kMaxQuoted) +
               "); fix: correct the JSON there, or regenerate the file";
  }
  return Status::InvalidArgument(message);
}

std::string DumpJson(const json& value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

std::string DumpJson(const nlohmann::ordered_json& value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string JsonForMessage(const json& value, size_t max_bytes) { return Shorten(DumpJson(value), max_bytes); }

json NumberToJson(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  return d;
}

std::optional<double> NumberFromJson(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  return std::nullopt;
}

}  // namespace tmx
