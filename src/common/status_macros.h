// Status propagation helpers used across module boundaries.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TESSERA_CONCAT_INNER(a, b) a##b
#define TESSERA_CONCAT(a, b) TESSERA_CONCAT_INNER(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::absl::Status _tessera_st = (expr);       \
    if (!_tessera_st.ok()) return _tessera_st; \
  } while (0)

// `tmp` is an identifier and `lhs` may be a declaration ("auto x"), so
// neither can be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(*tmp)
// NOLINTEND(bugprone-macro-parentheses)

// `ASSIGN_OR_RETURN(auto x, F())` binds x to the value of an absl::StatusOr or
// returns its error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(TESSERA_CONCAT(_tessera_sor_, __LINE__), lhs, expr)
