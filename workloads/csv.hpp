// servesim workloads: small CSV helpers shared by the CSV trace readers (fields never contain
// commas in the traces read here; surrounding quotes and spaces are stripped).
#pragma once
#include "workloads/request.hpp"

#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace servesim {

std::vector<std::string_view> split_csv(std::string_view line);

/// Throws TraceError(file, line, "a NUL byte (U+0000) at column N") (N 1-based, in bytes) when
/// `text` (a row or a header) holds one: text traces have none, and a field holding one printed as
/// cut short at it (review, twenty-third session). Every CSV trace reader calls it on every line.
void refuse_nul(std::string_view text, const std::string& file, long line);

/// Parses a field in [min, max] (a finite number for csv_double); throws
/// TraceError(file, line, "column <name>: ...") on a malformed or out-of-range value.
long long csv_int(std::string_view field, const std::string& file, long line, std::string_view column, long long min,
                  long long max = std::numeric_limits<long long>::max());
double csv_double(std::string_view field, const std::string& file, long line, std::string_view column, double min,
                  double max = std::numeric_limits<double>::max());

/// "YYYY-MM-DD HH:MM:SS[.fraction]" (UTC) → seconds since 1970-01-01. Throws TraceError.
double csv_datetime(std::string_view field, const std::string& file, long line, std::string_view column);

}  // namespace servesim
