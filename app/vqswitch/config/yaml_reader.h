// SPDX-License-Identifier: BSD-3-Clause
// Strict YAML reading, apart from any schema: values with their key path and position, typed reads
// that fail at the value to blame, mappings that refuse unknown and duplicate keys. The reader
// stops at the first problem by throwing YamlError, which the caller turns into its message.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace vqs::app {

// Where a value starts in the YAML file, 1-based; 0: unknown (a Config built in code).
struct SourcePos {
  int line = 0;
  int column = 0;
};

// The first problem found: where, which key path, what.
struct YamlError {
  SourcePos pos;
  std::string key;
  std::string message;
};

SourcePos pos_of(const YAML::Mark& mark);
// "\"text\"", cut at 48 characters.
std::string in_quotes(const std::string& text);
// What a node is, for "got ..." in type errors.
std::string describe(const YAML::Node& node);
std::string range(int64_t lo, int64_t hi);  // "lo..hi"

// A node, the key path that leads to it ("ports[1].queues") and where to blame it.
struct Value {
  YAML::Node node;
  std::string path;
  SourcePos pos;
};

class YamlReader;

// One mapping's entries in file order. Unknown and duplicate keys are rejected on construction,
// so lookups only ever see the schema's keys.
class MapView {
 public:
  MapView(YamlReader& reader, const Value& map, std::initializer_list<std::string_view> known);

  const Value* find(std::string_view key) const;
  // Absent: an error at the mapping, naming the key.
  const Value& require(std::string_view key) const;
  // Present: an error at the key, `why` saying where it belongs ("only for vhost ports").
  void forbid(std::string_view key, const std::string& why) const;

 private:
  struct Entry {
    std::string key;
    SourcePos key_pos;
    Value value;
  };
  const Entry* entry(std::string_view key) const;

  YamlReader& reader_;
  Value map_;
  std::vector<Entry> entries_;
};

// Typed reads over a tree; every value visited is recorded in `positions` by key path.
class YamlReader {
 public:
  explicit YamlReader(std::map<std::string, SourcePos>* positions) : positions_(*positions) {}

  [[noreturn]] void fail(SourcePos pos, const std::string& key, const std::string& message) const {
    throw YamlError{pos, key, message};
  }
  [[noreturn]] void fail(const Value& v, const std::string& message) const {
    fail(v.pos, v.path, message);
  }
  Value visit(YAML::Node node, std::string path, SourcePos pos) {
    positions_[path] = pos;
    return Value{std::move(node), std::move(path), pos};
  }

  // Wrong types and out-of-range values fail at the value.
  void expect_map(const Value& v) const;
  void expect_sequence(const Value& v) const;
  std::vector<Value> elements(const Value& v);
  int64_t read_integer(const Value& v) const;
  int64_t read_int(const Value& v, int64_t lo, int64_t hi) const;
  bool read_bool(const Value& v) const;
  std::string read_string(const Value& v) const;
  // One of `choices` (the first is index 0), or an error listing them.
  size_t read_choice(const Value& v, std::initializer_list<const char*> choices) const;

 private:
  std::map<std::string, SourcePos>& positions_;
};

}  // namespace vqs::app
