#include "kube/quantity.h"

#include <cctype>

#include "absl/strings/str_cat.h"

namespace tessera::kube {
namespace {

using Int128 = __int128;
constexpr Int128 kMaxMilli = INT64_MAX;

absl::Status Invalid(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("quantity \"", text, "\": ", why));
}

// Multiplies `v` by `f` unless that passes 2^100 (far beyond what an int64 milli-value can
// hold, and far below where Int128 overflows).
bool MulCapped(Int128& v, Int128 f) {
  static const Int128 kCap = Int128(1) << 100;
  if (v != 0 && f > kCap / v) return false;
  v *= f;
  return true;
}

}  // namespace

absl::StatusOr<Quantity> ParseQuantity(absl::string_view text) {
  size_t i = 0;
  const size_t n = text.size();
  if (n == 0) return Invalid(text, "empty");
  bool negative = false;
  if (text[i] == '+' || text[i] == '-') negative = text[i++] == '-';
  // Mantissa digits as an integer with `frac` digits after the point. Leading zeros and digits
  // beyond what matters are still exact: the cap below only trips on absurd inputs.
  Int128 mantissa = 0;
  int frac = 0, digits = 0;
  bool point = false;
  for (; i < n && (isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'); ++i) {
    if (text[i] == '.') {
      if (point) return Invalid(text, "more than one decimal point");
      point = true;
      continue;
    }
    if (++digits > 30) return Invalid(text, "too many digits");
    mantissa = mantissa * 10 + (text[i] - '0');
    if (point) ++frac;
  }
  if (digits == 0) return Invalid(text, "no digits");
  const absl::string_view suffix = text.substr(i);
  int exp10 = 0;  // power of ten the suffix multiplies by
  int bin = 0;    // power of 1024
  if (suffix.empty()) {
  } else if (suffix.size() == 2 && suffix[1] == 'i') {
    static constexpr absl::string_view kBin = "KMGTPE";
    const size_t k = kBin.find(suffix[0]);
    if (k == absl::string_view::npos) return Invalid(text, "unknown suffix");
    bin = static_cast<int>(k) + 1;
  } else if (suffix[0] == 'e' || suffix[0] == 'E') {
    size_t j = 1;
    bool neg_exp = false;
    if (j < suffix.size() && (suffix[j] == '+' || suffix[j] == '-')) neg_exp = suffix[j++] == '-';
    if (j == suffix.size()) return Invalid(text, "exponent without digits");
    for (; j < suffix.size(); ++j) {
      if (!isdigit(static_cast<unsigned char>(suffix[j]))) return Invalid(text, "bad exponent");
      exp10 = exp10 * 10 + (suffix[j] - '0');
      if (exp10 > 40)
        return absl::OutOfRangeError(absl::StrCat("quantity \"", text, "\": too large"));
    }
    if (neg_exp) exp10 = -exp10;
  } else if (suffix.size() == 1) {
    switch (suffix[0]) {
      case 'n':
        exp10 = -9;
        break;
      case 'u':
        exp10 = -6;
        break;
      case 'm':
        exp10 = -3;
        break;
      case 'k':
        exp10 = 3;
        break;
      case 'M':
        exp10 = 6;
        break;
      case 'G':
        exp10 = 9;
        break;
      case 'T':
        exp10 = 12;
        break;
      case 'P':
        exp10 = 15;
        break;
      case 'E':
        exp10 = 18;
        break;
      default:
        return Invalid(text, "unknown suffix");
    }
  } else {
    return Invalid(text, "unknown suffix");
  }
  // milli = mantissa * 1024^bin * 10^(exp10 + 3 - frac), rounded up.
  Int128 num = mantissa;
  const auto too_large = [&] {
    return absl::OutOfRangeError(absl::StrCat("quantity \"", text, "\": too large"));
  };
  for (int b = 0; b < bin; ++b) {
    if (!MulCapped(num, 1024)) return too_large();
  }
  int scale = exp10 + 3 - frac;
  Int128 den = 1;
  for (; scale > 0; --scale) {
    if (!MulCapped(num, 10)) return too_large();
  }
  for (; scale < 0; ++scale) {
    if (den > (Int128(1) << 100)) {  // the value is below 1e-30 milli: rounds up to 1 (or 0)
      num = num == 0 ? 0 : 1;
      den = 1;
      break;
    }
    den *= 10;
  }
  Int128 milli = (num + den - 1) / den;
  if (milli > kMaxMilli) return too_large();
  Quantity q;
  q.text = std::string(text);
  q.milli = static_cast<int64_t>(negative ? -milli : milli);
  return q;
}

Quantity UnitsQuantity(int64_t units) { return Quantity{absl::StrCat(units), units * 1000}; }

Quantity MilliQuantity(int64_t milli) {
  if (milli % 1000 == 0) return UnitsQuantity(milli / 1000);
  return Quantity{absl::StrCat(milli, "m"), milli};
}

}  // namespace tessera::kube
