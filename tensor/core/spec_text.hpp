#pragma once
// Settings written as words followed by key=value pairs, the one parser
// behind both kinds the config file has: a layer of a custom model
// ("conv2d filters=32 kernel=5", tensor/nn/layer_spec.cpp) and a partitioner
// rule ("fc1/* fixed_size shards=2", tensor/plan/placement.cpp). Every error
// is a troupe_error that starts with where the text stands and what it says,
// e.g. `model.layers[1] "dense unit=10": unknown parameter 'unit' ...`.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace troupe {

class spec_text {
public:
  /// Splits `text` into up to `leading` words and key=value pairs; refuses a
  /// word that is not key=value after them and a key given twice.
  /// `where` names the setting ("model.layers[1]"); `usage`, if any, is
  /// appended to every error (how to write the text).
  spec_text(const std::string& where, const std::string& text, size_t leading,
            std::string usage = {});

  /// Leading word i ("conv2d", or a rule's pattern and partitioner), and
  /// how many there are (callers check they got all they need).
  const std::string& word(size_t i) const { return words_.at(i); }
  size_t word_count() const noexcept { return words_.size(); }

  /// Refuses any key outside `allowed`, naming what `owner` takes.
  void allow_only(const std::set<std::string>& allowed, const std::string& owner) const;

  bool has(const std::string& key) const { return pairs_.count(key) > 0; }

  /// The value of `key` as written, or `fallback`.
  std::string text(const std::string& key, const std::string& fallback) const;

  /// An integer of at least `min`; without `fallback` the key is required.
  int64_t integer(const std::string& key, std::optional<int64_t> fallback = std::nullopt,
                  int64_t min = INT64_MIN) const;

  /// A number (any real), or `fallback`.
  double real(const std::string& key, double fallback) const;

  /// Throws a troupe_error naming the text, `what` and the usage.
  [[noreturn]] void fail(const std::string& what) const;

private:
  std::string prefix_; // `where "text"`
  std::string usage_;
  std::vector<std::string> words_;
  std::map<std::string, std::string> pairs_;
};

} // namespace troupe
