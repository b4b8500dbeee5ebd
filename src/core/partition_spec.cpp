#include "shardwise/core/partition_spec.hpp"

#include <algorithm>
#include <sstream>

#include "detail/hash_combine.hpp"
#include "detail/text_scanner.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

std::string quote(const std::string& axis) { return "'" + axis + "'"; }

// One axis name inside a spec: quoted with either quote, or a bare identifier.
std::string parse_axis_name(detail::TextScanner& scan) {
  if (scan.peek() == '\'' || scan.peek() == '"') {
    std::string name = scan.quoted("an axis name");
    if (name.empty()) scan.fail("axis names must not be empty");
    // Mesh axes are identifiers, so no other name can ever match one; refusing it here also
    // keeps parse(to_string(spec)) == spec.
    if (!detail::is_identifier(name)) {
      scan.fail("axis name '" + echo_input(name) +
                "' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
    }
    return name;
  }
  if (scan.at_identifier() && scan.consume_word("None")) {
    scan.fail("None is not allowed inside a tuple of axes");
  }
  return scan.identifier("an axis name, None or a tuple of axes");
}

SpecEntry parse_tuple(detail::TextScanner& scan) {
  std::vector<std::string> axes;
  scan.skip_space();
  while (!scan.consume(')')) {
    if (scan.peek() == '(') scan.fail("nested tuples are not allowed in a partition spec");
    axes.push_back(parse_axis_name(scan));
    scan.skip_space();
    if (!scan.consume(',')) {
      scan.expect(')');
      break;
    }
    scan.skip_space();
  }
  return SpecEntry(std::move(axes));
}

SpecEntry parse_entry(detail::TextScanner& scan) {
  if (scan.consume('(')) return parse_tuple(scan);
  if (scan.consume_word("None")) return None;
  return SpecEntry(parse_axis_name(scan));
}

}  // namespace

std::string SpecEntry::to_string() const {
  if (axes_.empty()) return "None";
  if (axes_.size() == 1) return quote(axes_[0]);
  std::string out = "(";
  for (std::size_t i = 0; i < axes_.size(); ++i) out += (i ? ", " : "") + quote(axes_[i]);
  return out + ")";
}

PartitionSpec PartitionSpec::parse(std::string_view text) {
  detail::TextScanner scan(text, "partition spec");
  scan.skip_space();
  // "P" and "PartitionSpec" wrap the entries only when a parenthesis follows; otherwise they
  // are bare axis names.
  const std::size_t start = scan.position();
  bool wrapped = scan.consume_word("PartitionSpec") || scan.consume_word("P");
  if (wrapped) {
    scan.skip_space();
    wrapped = scan.consume('(');
    if (!wrapped) scan.rewind(start);
  }
  std::vector<SpecEntry> entries;
  scan.skip_space();
  while (!scan.at_end() && !(wrapped && scan.peek() == ')')) {
    entries.push_back(parse_entry(scan));
    scan.skip_space();
    if (!scan.consume(',')) break;
    scan.skip_space();
  }
  if (wrapped) scan.expect(')');
  scan.expect_end();
  return PartitionSpec(std::move(entries));
}

const SpecEntry& PartitionSpec::entry(std::size_t d) const {
  return d < entries_.size() ? entries_[d] : None;
}

std::vector<std::string> PartitionSpec::all_axes() const {
  std::vector<std::string> out;
  for (const SpecEntry& e : entries_) out.insert(out.end(), e.axes().begin(), e.axes().end());
  return out;
}

int PartitionSpec::dimension_of(std::string_view axis) const {
  for (std::size_t d = 0; d < entries_.size(); ++d) {
    const auto& axes = entries_[d].axes();
    if (std::find(axes.begin(), axes.end(), axis) != axes.end()) return static_cast<int>(d);
  }
  return -1;
}

std::string PartitionSpec::to_string() const {
  std::string out = "P(";
  for (std::size_t d = 0; d < entries_.size(); ++d)
    out += (d ? ", " : "") + entries_[d].to_string();
  return out + ")";
}

}  // namespace shardwise

std::size_t std::hash<shardwise::PartitionSpec>::operator()(
    const shardwise::PartitionSpec& spec) const noexcept {
  std::size_t seed = spec.size();
  for (const shardwise::SpecEntry& entry : spec.entries()) {
    shardwise::detail::hash_combine(seed, entry.axes().size());
    for (const std::string& axis : entry.axes()) shardwise::detail::hash_combine(seed, axis);
  }
  return seed;
}
