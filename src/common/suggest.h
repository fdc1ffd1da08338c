// "Did you mean": the candidate closest to a misspelt word, for messages about unknown names
// (fields, queues, resource types). Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// Levenshtein distance (insertions, deletions, substitutions; case-sensitive).
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate nearest to `word` when it is near enough to be a typo: at most 2 edits, and
// fewer than half the characters of the longer of the two ("ab" never suggests "xy"); "" when
// none is. `word` itself is never suggested. Ties go to the first candidate.
std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates);

// `ClosestMatch` as a message tail: "; did you mean \"research\"?" or "".
std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace tessera
