// `shardwise data prepare`: a text file encoded ahead of time into the token file that `train
// --data-format` reads (nanoGPT's prepare.py), with a progress line. The library does the work
// (train::prepare_token_file); this file reads the flags and prints.
#include <CLI/CLI.hpp>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <optional>
#include <ostream>
#include <sstream>

#include "../detail/output_file.hpp"
#include "command.hpp"
#include "number_text.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/text/tokenizer.hpp"
#include "shardwise/train/token_file.hpp"

namespace shardwise::cli {
namespace {

std::string mebibytes(std::uint64_t bytes) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1 << 20) << " MiB";
  return text.str();
}

class DataCommand final : public Command {
 public:
  explicit DataCommand(CLI::App& parent)
      : app_(parent.add_subcommand("data", "Prepare training data")) {
    app_->require_subcommand(1);
    prepare_ = app_->add_subcommand(
        "prepare",
        "Encode a text file with a tokenizer into a token file (little-endian ids) that train "
        "--data-format reads, as it streams, on every core");
    prepare_->add_option("text", text_, "The text file (UTF-8), of any size")->required();
    prepare_->add_option("--tokenizer", tokenizer_, "The tokenizer.json")->required();
    prepare_->add_option("--out", out_, "The token file to write")->required();
    prepare_->add_option("--format", format_,
                         "tokens-u16 or tokens-u32 (default: tokens-u16 where every id fits)");
    prepare_->add_flag("--no-special-tokens", no_special_,
                       "Leave out the tokens the tokenizer's post-processor adds around the text "
                       "(a Llama's <s>)");
    prepare_->add_option("--threads", threads_, "Threads encoding (default: every core)");
    prepare_->add_flag("--force", force_, "Replace a file at --out");
  }

  [[nodiscard]] const CLI::App& app() const override { return *app_; }

  void run(std::ostream& out) const override {
    if (tokenizer_.empty())
      throw InvalidArgument("--tokenizer is empty; expected a tokenizer.json");
    if (out_.empty()) throw InvalidArgument("--out is an empty path");
    const text::Tokenizer tokenizer = [&] {
      try {
        return text::Tokenizer::from_file(tokenizer_);
      } catch (const Error& e) {
        throw InvalidArgument(std::string("--tokenizer: ") + e.what());
      }
    }();
    const train::TokenFormat format = format_ ? train::parse_token_format(*format_, "--format")
                                              : train::token_format_for(tokenizer);
    if (format == train::TokenFormat::kText || format == train::TokenFormat::kJsonLines) {
      throw InvalidArgument("--format is " + train::to_string(format) +
                            "; a token file is tokens-u16 or tokens-u32");
    }
    if (format == train::TokenFormat::kTokensU16 && tokenizer.vocab_size() > 65536) {
      throw InvalidArgument("--format tokens-u16 holds ids below 65536; --tokenizer has " +
                            std::to_string(tokenizer.vocab_size()) + " tokens (tokens-u32)");
    }
    // What is in the way is found before a byte is read: an existing file is replaced only with
    // --force, and a symlink, FIFO or folder there never.
    shardwise::detail::check_output_path(
        out_,
        force_ ? shardwise::detail::IfExists::kReplaceFile : shardwise::detail::IfExists::kRefuse,
        "--out", "; --force replaces it");
    text::StreamOptions options;
    options.add_special_tokens = !no_special_;
    if (threads_) options.threads = static_cast<int>(bounded(*threads_, "--threads", 1, 256));
    // A line on stderr every two seconds at most, as the text streams.
    auto last = std::chrono::steady_clock::now();
    const auto start = last;
    const auto progress = [&](const text::StreamProgress& done) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last < std::chrono::seconds(2)) return;
      last = now;
      const double seconds = std::chrono::duration<double>(now - start).count();
      std::cerr << "encoded " << mebibytes(done.bytes);
      if (done.total_bytes > 0) {
        std::cerr << " of " << mebibytes(done.total_bytes) << " (" << std::fixed
                  << std::setprecision(0)
                  << 100.0 * static_cast<double>(done.bytes) / static_cast<double>(done.total_bytes)
                  << "%)";
      }
      std::cerr << ", " << done.ids << " tokens, " << std::fixed << std::setprecision(1)
                << static_cast<double>(done.bytes) / (1 << 20) / seconds << " MiB/s" << std::endl;
    };
    const train::PreparedTokens made =
        train::prepare_token_file(text_, tokenizer, out_, format, force_, options, progress);
    out << "wrote " << echo_input(out_, 200) << ": " << made.tokens << " tokens ("
        << train::to_string(made.format) << ") from " << made.text_bytes << " bytes of text in "
        << std::fixed << std::setprecision(1) << made.seconds << " s ("
        << (made.seconds > 0 ? static_cast<double>(made.text_bytes) / (1 << 20) / made.seconds : 0)
        << " MiB/s); train --data " << echo_input(out_, 200) << " --data-format "
        << train::to_string(made.format) << " reads it\n";
  }

 private:
  CLI::App* app_;
  CLI::App* prepare_;
  std::string text_, tokenizer_, out_;
  std::optional<std::string> format_, threads_;
  bool no_special_ = false;
  bool force_ = false;
};

}  // namespace

std::unique_ptr<Command> add_data_command(CLI::App& parent) {
  return std::make_unique<DataCommand>(parent);
}

}  // namespace shardwise::cli
