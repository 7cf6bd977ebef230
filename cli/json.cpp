// The JSON helpers of json.hpp that need no CLI11: shared by the commands and by the
// measurement engine, which the Python package links without the rest of the CLI.
#include "json.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>

#include "tandem/errors.hpp"

namespace tandem::cli {

void write_text(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    return;
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw IoError(path + ": cannot write (" + std::strerror(errno) + ")");
  f << text;
  f.close();
  if (!f) throw IoError(path + ": writing failed (disk full?)");
}

Json number(double x) { return std::isfinite(x) ? Json(x) : Json(nullptr); }

namespace {
// The length of the well-formed UTF-8 character at s[i] (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF), or 0.
std::size_t utf8_char(const std::string& s, std::size_t i) {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = at(i);
  if (c < 0x80) return 1;
  std::size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((at(i + k) & 0xC0) != 0x80) return 0;
  }
  const unsigned char d = at(i + 1);
  if ((c == 0xE0 && d < 0xA0) || (c == 0xED && d > 0x9F) || (c == 0xF0 && d < 0x90) || (c == 0xF4 && d > 0x8F)) {
    return 0;
  }
  return n;
}
bool is_utf8(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_char(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}
void make_utf8(Json& j) {
  if (j.is_string()) {
    j = utf8_or_escaped(j.get_ref<const std::string&>());
  } else if (j.is_array()) {
    for (Json& v : j) make_utf8(v);
  } else if (j.is_object()) {
    Json out = Json::object();
    for (auto& [k, v] : j.items()) {
      make_utf8(v);
      out[utf8_or_escaped(k)] = std::move(v);
    }
    j = std::move(out);
  }
}
}  // namespace

std::string utf8_or_escaped(const std::string& s) {
  if (is_utf8(s)) return s;
  std::string out;
  char hex[5];
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_char(s, i);
    if (n == 0) {
      std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned char>(s[i]));
      out += hex;
      ++i;
    } else {
      if (s[i] == '\\') out += '\\';
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

std::string json_text(const Json& doc) {
  Json copy = doc;
  make_utf8(copy);
  return copy.dump(2) + "\n";
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::localtime(&now));
  return date;
}

}  // namespace tandem::cli
