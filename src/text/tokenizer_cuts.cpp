// Where a text can be cut so that its pieces encode to the ids of the whole
// (Tokenizer::last_cut), and the special ids around the sequence: what encoding a text of any
// size chunk by chunk needs (text_stream.cpp).
//
// A cut at p is exact when every step splits the text at p anyway and nothing either side of p
// depends on the other side:
//  - the pre-tokenizer's first step that splits (after Digits steps, which split at digits
//    alone) is GPT-2's or Llama 3's expression, without a prefix space added to the whole
//    segment. Both expressions match from left to right without looking behind, and two kinds
//    of place end a match whatever follows: a line break after a character that is not a space
//    and before an ASCII letter (rule A: the line break is a match, or ends one, since no
//    alternative carries a line break into a letter), and a space between two ASCII letters
//    (rule B: a run of letters ends at the space, and " word" starts there). Later steps only
//    split pieces further;
//  - no added token holds a space or a line break (none can span the cut), no lstrip token
//    starts with a letter (it would take the line break before it, rule A), and no rstrip token
//    ends with one (it would take the space after it, rule B);
//  - no normalizer; or, SentencePiece-style BPE, whose spaces are "▁" (a Prepend "▁" and Replace
//    " " -> "▁" normalizer and no pre-tokenizer, or a Metaspace pre-tokenizer alone) and whose
//    vocabulary holds no "▁" after another character (Parts::spaces_start_pieces): then no merge
//    joins the two sides of a space, and a space between two ASCII letters is a cut (rule B) as
//    long as no added token holds a space or ends with a letter (a piece after an added token
//    gets a "▁" of its own). The piece after the cut continues the text: encode_continuing
//    leaves out the Prepend that marks a text's start.
// Where the parts hold anything the rules do not know, there is no cut.

#include <string_view>

#include "detail/tokenizer_parts.hpp"
#include "shardwise/text/tokenizer.hpp"

namespace shardwise::text {
namespace {

bool ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool ascii_non_space(char c) {
  return static_cast<unsigned char>(c) < 0x80 && !ascii_space(c) && c != '\0';
}

struct CutRules {
  bool after_line_break = false;     // rule A
  bool space_between_words = false;  // rule B
};

constexpr std::string_view kSpaceMark = "\u2581";  // SentencePiece's "▁"

// The text's spaces are "▁" as SentencePiece writes them, and nothing else is rewritten. Where the
// pieces are not split at each "▁" (one word for the whole text), ignore_merges would take a
// piece after a cut that is a token whole, where the whole text's word is merged: no cut then.
bool sentencepiece_spaces(const Tokenizer::Parts& parts) {
  if (!parts.spaces_start_pieces) return false;
  const bool ignores_merges = parts.model.settings().ignore_merges;
  if (parts.normalizer.empty()) {
    if (parts.pre_tokenizer.size() != 1) return false;
    const auto* metaspace = std::get_if<detail::MetaspaceStep>(&parts.pre_tokenizer.front());
    return metaspace != nullptr && metaspace->replacement == kSpaceMark &&
           (metaspace->split || !ignores_merges);
  }
  if (ignores_merges || !parts.pre_tokenizer.empty() || parts.normalizer.size() != 2) {
    return false;
  }
  bool prepend = false;
  bool replace = false;
  for (const detail::NormalizerStep& step : parts.normalizer) {
    if (const auto* p = std::get_if<detail::PrependStep>(&step)) {
      prepend = prepend || p->text == kSpaceMark;
    } else {
      const auto& r = std::get<detail::ReplaceStep>(step);
      replace = replace || (r.pattern == " " && r.content == kSpaceMark);
    }
  }
  return prepend && replace;
}

// An added token may not hold a space or a "▁" past its start (it could match across the cut:
// a normalized one is matched in the text with its spaces made "▁"), nor end with a letter (a
// piece after an added token gets a "▁" of its own).
CutRules sentencepiece_rules(const Tokenizer::Parts& parts) {
  for (const detail::AddedToken& token : parts.added.tokens()) {
    const std::string& content = token.content;
    if (content.empty() || content.find_first_of(" \n") != std::string::npos ||
        content.find(kSpaceMark, 1) != std::string::npos || ascii_letter(content.back())) {
      return {};
    }
  }
  return {false, true};
}

CutRules cut_rules(const Tokenizer::Parts& parts) {
  CutRules none;
  if (sentencepiece_spaces(parts)) return sentencepiece_rules(parts);
  // A normalizer rewrites each piece (Prepend at its start, Replace across the place): the rules
  // below know the text as the pre-tokenizer sees it unchanged.
  if (!parts.normalizer.empty()) return none;
  bool splits = false;
  for (const detail::PreTokenizerStep& step : parts.pre_tokenizer) {
    if (std::holds_alternative<detail::DigitsStep>(step)) continue;
    if (const auto* byte_level = std::get_if<detail::ByteLevelStep>(&step)) {
      splits = byte_level->use_regex && !byte_level->add_prefix_space;
    } else {
      splits = std::holds_alternative<detail::SplitStep>(step);
    }
    break;  // the first step that is not Digits decides
  }
  if (!splits) return none;
  CutRules rules{true, true};
  for (const detail::AddedToken& token : parts.added.tokens()) {
    const std::string& content = token.content;
    if (content.find_first_of(" \n") != std::string::npos) return none;
    if (token.lstrip && ascii_letter(content.front())) rules.after_line_break = false;
    if (token.rstrip && ascii_letter(content.back())) rules.space_between_words = false;
  }
  return rules;
}

}  // namespace

bool spaces_start_pieces(const detail::BpeModel& model) {
  // "▁" itself a token: a space is never an unknown character fused with the one before it.
  if (!model.token_to_id(kSpaceMark)) return false;
  for (std::size_t id = 0; id < model.size(); ++id) {
    const std::string& token = model.token(static_cast<std::int32_t>(id));
    for (std::size_t at = token.find(kSpaceMark, 1); at != std::string::npos;
         at = token.find(kSpaceMark, at + 1)) {
      if (at < kSpaceMark.size() ||
          token.compare(at - kSpaceMark.size(), kSpaceMark.size(), kSpaceMark) != 0) {
        return false;
      }
    }
  }
  return true;
}

std::optional<Tokenizer::SpecialIds> Tokenizer::special_ids_around_sequence() const {
  SpecialIds ids;
  if (!parts_->post_template) return ids;
  int sequences = 0;
  for (const detail::TemplatePiece& piece : *parts_->post_template) {
    if (piece.is_sequence) {
      ++sequences;
      continue;
    }
    std::vector<std::int32_t>& side = sequences == 0 ? ids.before : ids.after;
    side.insert(side.end(), piece.special_ids.begin(), piece.special_ids.end());
  }
  if (sequences != 1) return std::nullopt;
  return ids;
}

bool Tokenizer::cuts_text() const {
  const CutRules rules = cut_rules(*parts_);
  return rules.after_line_break || rules.space_between_words;
}

std::size_t Tokenizer::last_cut(std::string_view text) const {
  const CutRules rules = cut_rules(*parts_);
  if (!rules.after_line_break && !rules.space_between_words) return 0;
  // p + 1 < size: rule B looks at the letter after the space.
  for (std::size_t p = text.size() < 2 ? 0 : text.size() - 2; p >= 2; --p) {
    if (rules.after_line_break && ascii_letter(text[p]) && text[p - 1] == '\n' &&
        ascii_non_space(text[p - 2])) {
      return p;
    }
    if (rules.space_between_words && text[p] == ' ' && ascii_letter(text[p - 1]) &&
        ascii_letter(text[p + 1])) {
      return p;
    }
  }
  return 0;
}

}  // namespace shardwise::text
