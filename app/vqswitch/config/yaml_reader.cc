// SPDX-License-Identifier: BSD-3-Clause
#include "config/yaml_reader.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace vqs::app {
namespace {

bool is_plain(const YAML::Node& node) { return node.Tag() == "?"; }

}  // namespace

SourcePos pos_of(const YAML::Mark& mark) {
  return {std::max(mark.line, 0) + 1, std::max(mark.column, 0) + 1};
}

std::string in_quotes(const std::string& text) {
  constexpr size_t kMax = 48;
  if (text.size() <= kMax) return "\"" + text + "\"";
  return "\"" + text.substr(0, kMax) + "...\"";
}

// "got ..." for type errors.
std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return "nothing";
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar:
      // Tag "!": written in quotes, so a string even if it looks like a number or a boolean.
      return node.Tag() == "!" ? "the quoted string " + in_quotes(node.Scalar())
                               : in_quotes(node.Scalar());
  }
  return "?";
}

std::string range(int64_t lo, int64_t hi) { return std::to_string(lo) + ".." + std::to_string(hi); }

MapView::MapView(YamlReader& reader, const Value& map,
                 std::initializer_list<std::string_view> known)
    : reader_(reader), map_(map) {
  for (auto it = map.node.begin(); it != map.node.end(); ++it) {
    SourcePos key_pos = pos_of(it->first.Mark());
    if (!it->first.IsScalar())
      reader.fail(key_pos, map.path, "keys must be names, got " + describe(it->first));
    std::string key = it->first.Scalar();
    std::string path = map.path.empty() ? key : map.path + "." + key;
    if (std::find(known.begin(), known.end(), key) == known.end())
      reader.fail(key_pos, path, "unknown key");
    if (const Entry* first = entry(key))
      reader.fail(key_pos, path,
                  "duplicate key (first at line " + std::to_string(first->key_pos.line) + ")");
    // An empty value's mark is where the next token starts; blame the key instead.
    SourcePos value_pos = pos_of(it->second.Mark());
    if (it->second.IsNull() && value_pos.line != key_pos.line) value_pos = key_pos;
    entries_.push_back({key, key_pos, reader.visit(it->second, path, value_pos)});
  }
}

const MapView::Entry* MapView::entry(std::string_view key) const {
  for (const Entry& e : entries_)
    if (e.key == key) return &e;
  return nullptr;
}

const Value* MapView::find(std::string_view key) const {
  const Entry* e = entry(key);
  return e ? &e->value : nullptr;
}

const Value& MapView::require(std::string_view key) const {
  if (const Value* v = find(key)) return *v;
  std::string path = map_.path.empty() ? std::string(key) : map_.path + "." + std::string(key);
  reader_.fail(map_.pos, path, "required key missing");
}

void MapView::forbid(std::string_view key, const std::string& why) const {
  if (const Entry* e = entry(key)) reader_.fail(e->key_pos, e->value.path, why);
}

void YamlReader::expect_map(const Value& v) const {
  if (!v.node.IsMap()) fail(v, "expected a mapping, got " + describe(v.node));
}

void YamlReader::expect_sequence(const Value& v) const {
  if (!v.node.IsSequence()) fail(v, "expected a sequence, got " + describe(v.node));
}

std::vector<Value> YamlReader::elements(const Value& v) {
  expect_sequence(v);
  std::vector<Value> out;
  size_t i = 0;
  for (auto it = v.node.begin(); it != v.node.end(); ++it, ++i) {
    SourcePos pos = pos_of(it->Mark());
    if (it->IsNull() && pos.line != v.pos.line) pos = v.pos;  // "- " with nothing after it
    out.push_back(visit(*it, v.path + "[" + std::to_string(i) + "]", pos));
  }
  return out;
}

int64_t YamlReader::read_integer(const Value& v) const {
  const YAML::Node& n = v.node;
  bool tagged_int = n.Tag() == "?" || n.Tag() == "tag:yaml.org,2002:int";
  if (!n.IsScalar() || !tagged_int) fail(v, "expected an integer, got " + describe(n));
  const std::string& text = n.Scalar();
  size_t i = (!text.empty() && (text[0] == '-' || text[0] == '+')) ? 1 : 0;
  if (i == text.size()) fail(v, "expected an integer, got " + describe(n));
  int64_t value = 0;
  for (size_t j = i; j < text.size(); ++j) {
    if (!std::isdigit(static_cast<unsigned char>(text[j])))
      fail(v, "expected an integer, got " + describe(n));
    // Saturate: any range check then fails and prints the text as written.
    if (value < std::numeric_limits<int64_t>::max() / 10 - 9)
      value = value * 10 + (text[j] - '0');
    else
      value = std::numeric_limits<int64_t>::max();
  }
  return text[0] == '-' ? -value : value;
}

int64_t YamlReader::read_int(const Value& v, int64_t lo, int64_t hi) const {
  int64_t value = read_integer(v);
  if (value < lo || value > hi) fail(v, "must be " + range(lo, hi) + ", got " + v.node.Scalar());
  return value;
}

bool YamlReader::read_bool(const Value& v) const {
  // YAML 1.2's core schema: yaml-cpp would also take yes/no/on/off, which YAML 1.2 reads as
  // strings.
  if (v.node.IsScalar() && is_plain(v.node)) {
    const std::string& s = v.node.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  fail(v, "expected true or false, got " + describe(v.node));
}

std::string YamlReader::read_string(const Value& v) const {
  if (!v.node.IsScalar()) fail(v, "expected a string, got " + describe(v.node));
  return v.node.Scalar();
}

size_t YamlReader::read_choice(const Value& v, std::initializer_list<const char*> choices) const {
  std::string s = read_string(v);
  std::string list;
  size_t i = 0;
  for (const char* c : choices) {
    if (s == c) return i;
    list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + std::string(c);
    ++i;
  }
  fail(v, "must be " + list + ", got " + in_quotes(s));
}

}  // namespace vqs::app
