// CSV as RFC 4180 has it: quoted fields with delimiters, line breaks and doubled quotes inside,
// CRLF; the delimiter, a header and the label column detected or given (tandem/data.hpp).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loader_memory.hpp"
#include "tandem/data.hpp"
#include "tandem/errors.hpp"

namespace tandem::data {
namespace {

[[noreturn]] void fail(const std::string& source, const std::string& what) { throw DataError(source + ": " + what); }

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}
void trim_in_place(std::string& s) {
  std::size_t end = s.size();
  while (end > 0 && is_blank(s[end - 1])) --end;
  s.erase(end);
  std::size_t begin = 0;
  while (begin < s.size() && is_blank(s[begin])) ++begin;
  s.erase(0, begin);
}

// CSV records as RFC 4180 writes them: fields separated by the delimiter; a field in double quotes
// may hold the delimiter, line breaks and quotes written twice (""); a record ends at LF or CRLF.
// Blanks around a field outside quotes are trimmed. ' ' as the delimiter means runs of blanks (no
// quoting: whitespace-separated tables). Lines are counted as the file has them, so that a quoted
// line break moves the count too.
class RecordReader {
 public:
  RecordReader(std::string_view text, char delimiter, const std::string& source, std::size_t max_fields)
      : text_(text), delimiter_(delimiter), source_(source), max_fields_(max_fields) {}

  // The next record into fields (false at the end of the text); line() is where it began. The
  // strings of `fields` are reused from record to record (no allocation per field once warm).
  bool next(std::vector<std::string>& fields) {
    if (pos_ > text_.size()) {
      fields.clear();
      return false;
    }
    line_ = next_line_;
    std::size_t n = 0;
    auto open_field = [&]() -> std::string& {
      if (n == max_fields_) {
        fail(source_, "line " + std::to_string(next_line_) + ": more than " + std::to_string(max_fields_) +
                          " fields (the max_columns cap); is the delimiter '" + std::string(1, delimiter_) +
                          "' right?");
      }
      if (n == fields.size()) fields.emplace_back();
      std::string& f = fields[n++];
      f.clear();
      return f;
    };
    if (delimiter_ == ' ') {
      std::size_t end = text_.find('\n', pos_);
      if (end == std::string_view::npos) end = text_.size();
      const std::string_view l = text_.substr(pos_, end - pos_);
      pos_ = end + 1;
      ++next_line_;
      for (std::size_t i = 0; i < l.size();) {
        while (i < l.size() && is_blank(l[i])) ++i;
        std::size_t j = i;
        while (j < l.size() && !is_blank(l[j])) ++j;
        if (j > i) open_field().assign(l.substr(i, j - i));
        i = j;
      }
      fields.resize(n);
      return true;
    }
    std::string* field = &open_field();
    bool quoted = false;  // this field began with a quote
    auto close_field = [&] {
      if (!quoted) trim_in_place(*field);
    };
    for (;;) {
      // A run of plain characters, up to the next delimiter, line end or quote.
      std::size_t j = pos_;
      while (j < text_.size() && text_[j] != delimiter_ && text_[j] != '\n' && text_[j] != '"') ++j;
      const std::string_view run = text_.substr(pos_, j - pos_);
      if (quoted && !trim(run).empty()) {
        fail(source_, "line " + std::to_string(next_line_) + ": text after the closing quote of a field");
      }
      if (!quoted) field->append(run);
      pos_ = j;
      if (pos_ >= text_.size() || text_[pos_] == '\n') {  // the record ends
        close_field();
        fields.resize(n);
        pos_ = pos_ >= text_.size() ? text_.size() + 1 : pos_ + 1;
        ++next_line_;
        return true;
      }
      if (text_[pos_++] == delimiter_) {
        close_field();
        field = &open_field();
        quoted = false;
      } else if (!quoted && trim(*field).empty()) {  // an opening quote
        quoted = true;
        field->clear();
        read_quoted(*field);
      } else if (quoted) {
        fail(source_, "line " + std::to_string(next_line_) + ": text after the closing quote of a field");
      } else {
        *field += '"';  // a quote inside an unquoted field is kept as it is
      }
    }
  }
  std::size_t line() const { return line_; }

 private:
  // From just after an opening quote to just after its closing one.
  void read_quoted(std::string& field) {
    const std::size_t opened = next_line_;
    for (;;) {
      if (pos_ >= text_.size()) {
        fail(source_, "line " + std::to_string(opened) + ": a quoted field is never closed (a '\"' is missing)");
      }
      const char c = text_[pos_++];
      if (c == '"') {
        if (pos_ < text_.size() && text_[pos_] == '"') {
          field += '"';
          ++pos_;
          continue;
        }
        return;
      }
      if (c == '\n') ++next_line_;
      if (c == '\r' && pos_ < text_.size() && text_[pos_] == '\n') continue;  // CRLF inside: LF
      field += c;
    }
  }

  std::string_view text_;
  char delimiter_;
  const std::string& source_;
  std::size_t max_fields_;
  std::size_t pos_ = 0, line_ = 1, next_line_ = 1;
};

// The delimiter of a file: the first ',', ';' or tab of its first line with content, outside
// quotes; else blanks.
char detect_delimiter(std::string_view text) {
  bool in_quotes = false, content = false;
  for (char c : text) {
    if (c == '"') in_quotes = !in_quotes;
    if (in_quotes) continue;
    if (c == '\n') {
      if (content) break;
      continue;
    }
    if (c == ',' || c == ';' || c == '\t') return c;
    content = content || !is_blank(c);
  }
  return ' ';
}

// A finite decimal number ("1", "-2.5e3", "+.5"); not nan, inf or "+-1". One too small for a
// double ("1e-400") reads as a zero of its sign, as NumPy and strtod read it; one too large is
// refused, as an infinity is.
bool parse_number(std::string_view field, double& value) {
  if (field.size() > 1 && field.front() == '+' && field[1] != '-' && field[1] != '+') field.remove_prefix(1);
  if (field.empty()) return false;
  const char* end = field.data() + field.size();
  const auto [ptr, ec] = std::from_chars(field.data(), end, value);
  if (ptr != end) return false;
  if (ec == std::errc::result_out_of_range) {
    // Out of a double's range: below it (underflow) or above it. A long double's wider exponent
    // tells which; past even its range, the exponent's sign does.
    long double wide = 0;
    if (std::from_chars(field.data(), end, wide).ec == std::errc()) {
      value = static_cast<double>(wide);
    } else {
      const std::size_t e = field.find_first_of("eE");
      const bool tiny = e != std::string_view::npos && e + 1 < field.size() && field[e + 1] == '-';
      value = tiny ? (field.front() == '-' ? -0.0 : 0.0) : HUGE_VAL;
    }
    return std::isfinite(value);
  }
  return ec == std::errc() && std::isfinite(value);
}

std::string show(std::string_view field) {
  std::string s(field.substr(0, 40));
  if (field.size() > 40) s += "...";
  return "'" + s + "'";
}

}  // namespace

// ---- CSV ----

std::optional<long> parse_label_column(const std::string& spec) {
  if (spec == "last") return -1;
  if (spec == "first") return 0;
  if (spec == "none") return std::nullopt;
  long value = 0;
  const auto [ptr, ec] = std::from_chars(spec.data(), spec.data() + spec.size(), value);
  if (ec != std::errc() || ptr != spec.data() + spec.size()) {
    throw InvalidArgument("label column '" + spec + "' is not 'last', 'first', 'none' or a column index");
  }
  return value;
}

Dataset parse_csv(std::string_view text, const std::string& source, const CsvOptions& options) try {
  Dataset d;
  d.source = source;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // a UTF-8 byte order mark
  // Records one at a time, never all of them at once. The first with content fixes the field count.
  const char delimiter = options.delimiter != '\0' ? options.delimiter : detect_delimiter(text);
  RecordReader records(text, delimiter, source, std::max<std::size_t>(options.max_columns, 1));
  std::vector<std::string> fields;
  auto blank = [&] { return fields.empty() || (fields.size() == 1 && fields[0].empty()); };
  bool found = false;
  while (!found && records.next(fields)) found = !blank();
  if (!found) fail(source, "the file has no data (it is empty or blank)");
  const std::size_t first = records.line();
  const std::size_t field_count = fields.size();

  bool header = options.header == CsvOptions::Header::yes;
  if (options.header == CsvOptions::Header::detect) {
    // A header has text in every column, a data row a number in every one. A first row with
    // both is neither: taken for a header, a data row with one typo, an overflow (1e309) or a nan
    // would be dropped without a word.
    std::vector<std::size_t> text_fields;
    double v;
    for (std::size_t c = 0; c < field_count; ++c) {
      if (!parse_number(fields[c], v)) text_fields.push_back(c);
    }
    if (!text_fields.empty() && text_fields.size() < field_count) {
      fail(source, "line " + std::to_string(first) + ", column " + std::to_string(text_fields.front() + 1) + ": " +
                       show(fields[text_fields.front()]) + " is not a (finite) number, but " +
                       std::to_string(field_count - text_fields.size()) +
                       " other field(s) of the line are: neither a " +
                       "header (text in every column) nor data; fix the value, or give the header option (yes or no)");
    }
    header = !text_fields.empty();
  }

  std::optional<std::size_t> label;
  if (options.label_column) {
    const long c = *options.label_column;
    const long n = static_cast<long>(field_count);
    if (c >= n || c < -n) {
      fail(source, "label column " + std::to_string(c) + " does not exist: line " + std::to_string(first) + " has " +
                       std::to_string(field_count) + " fields");
    }
    label = static_cast<std::size_t>(c < 0 ? n + c : c);
  }
  d.cols = field_count - (label ? 1 : 0);
  if (d.cols == 0) fail(source, "no feature columns are left besides the label column");

  for (bool have = !header || records.next(fields); have; have = records.next(fields)) {
    if (blank()) continue;
    const std::string where = "line " + std::to_string(records.line());
    if (fields.size() != field_count) {
      fail(source, where + ": " + std::to_string(fields.size()) + " fields where line " + std::to_string(first) +
                       " has " + std::to_string(field_count));
    }
    if (d.features.size() + d.targets.size() > options.max_values - std::min(options.max_values, field_count)) {
      fail(source, where + ": more than " + std::to_string(options.max_values) +
                       " values (8 bytes each), the max_values cap; read a part of the file, or raise the cap");
    }
    for (std::size_t c = 0; c < field_count; ++c) {
      double v;
      if (!parse_number(fields[c], v)) {
        fail(source,
             where + ", column " + std::to_string(c + 1) + ": " + show(fields[c]) + " is not a (finite) number");
      }
      if (label && c == *label) {
        d.targets.push_back(v);
      } else {
        d.features.push_back(v);
      }
    }
    ++d.rows;
  }
  if (d.rows == 0) fail(source, "the file has a header but no data lines");
  return d;
} catch (const std::bad_alloc&) {
  loaders::out_of_memory(source, text.size());
}

Dataset read_csv(const std::string& path, const CsvOptions& options) {
  const std::vector<unsigned char> bytes = read_file(path);
  if (std::find(bytes.begin(), bytes.end(), '\0') != bytes.end()) {
    const auto at = std::find(bytes.begin(), bytes.end(), '\0') - bytes.begin();
    fail(path, "byte offset " + std::to_string(at) + ": a NUL byte; this is not a text (CSV) file");
  }
  return parse_csv(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path, options);
}

void attach_targets(Dataset& d, const Dataset& t) {
  d.check("attach_targets");
  t.check("attach_targets");
  if (t.cols != 1 || !t.targets.empty()) {
    fail(t.source,
         "a target file has one column; this one has " + std::to_string(t.cols + (t.targets.empty() ? 0 : 1)));
  }
  if (t.rows != d.rows) {
    fail(t.source, std::to_string(t.rows) + " targets for " + std::to_string(d.rows) + " samples in " + d.source);
  }
  d.targets = t.features;
}

}  // namespace tandem::data
