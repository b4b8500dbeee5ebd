// The decoders of both families against the training forward: the next-token loss of a sequence
// computed from the decoder's cached logits, position by position, equals the training chunk's
// loss; a prompt decoded in pieces gives the logits of one position at a time; every 'model'
// degree (split and replicated key/value heads, tied and untied heads) gives one rank's logits
// and its greedy and seeded texts; and a decoder refuses what would overrun its cache, changing
// nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <mutex>

#include "error_of.hpp"
#include "shardwise/comm/backend_registry.hpp"
#include "shardwise/comm/run_local.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/models/llama.hpp"
#include "shardwise/train/decoding_model.hpp"
#include "shardwise/train/distributed_model.hpp"
#include "shardwise/train/generation_job.hpp"

namespace shardwise::train {
namespace {

using testing::error_of;

std::shared_ptr<const ModelDefinition> small_gpt() {
  return std::make_shared<models::GptDefinition>(models::GptConfig{2, 4, 32, 32, 64});
}

std::shared_ptr<const ModelDefinition> small_llama(std::size_t kv_heads, bool tied,
                                                   bool scaled = false) {
  models::LlamaConfig c;
  c.n_layer = 2;
  c.hidden_size = 32;
  c.n_head = 4;
  c.n_kv_head = kv_heads;
  c.head_dim = 8;
  c.intermediate_size = 48;
  c.context_length = 32;
  c.vocab_size = 64;
  c.tie_word_embeddings = tied;
  c.rope_theta = 500000;
  if (scaled) c.rope_scaling = {8, 1, 4, 16};
  return std::make_shared<models::LlamaDefinition>(c);
}

// A source's values: the blocks of a one-rank model's whole parameters (any box, row-major).
InitialValues values_of(ParameterStore& whole) {
  return [&whole](std::span<const ParameterBlock> blocks) {
    for (const ParameterBlock& block : blocks) {
      const std::size_t p = whole.index_of(block.name);
      const float* from = whole.value(p);
      const Shape& shape = block.shape;
      std::vector<std::int64_t> at(shape.size());
      for (std::size_t d = 0; d < shape.size(); ++d) at[d] = block.box[d].start;
      for (std::size_t i = 0; i < block.values.size(); ++i) {
        std::int64_t flat = 0;
        for (std::size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + at[d];
        block.values[i] = from[flat];
        for (std::size_t d = shape.size(); d-- > 0;) {
          if (++at[d] < block.box[d].stop) break;
          at[d] = block.box[d].start;
        }
      }
    }
  };
}

std::vector<std::int32_t> some_tokens(std::size_t count, std::size_t vocab) {
  std::vector<std::int32_t> tokens;
  for (std::size_t i = 0; i < count; ++i)
    tokens.push_back(static_cast<std::int32_t>((i * 37 + 11) % vocab));
  return tokens;
}

// The logits after each of `tokens`, fed one at a time.
std::vector<std::vector<float>> stepwise(Decoder& decoder,
                                         const std::vector<std::int32_t>& tokens) {
  decoder.reset();
  std::vector<std::vector<float>> logits;
  for (const std::int32_t token : tokens) {
    logits.emplace_back(decoder.vocab_size());
    decoder.forward({&token, 1}, logits.back());
  }
  return logits;
}

double mean_loss(const std::vector<std::vector<float>>& logits,
                 const std::vector<std::int32_t>& tokens) {
  double sum = 0;
  for (std::size_t t = 0; t + 1 < tokens.size(); ++t) {
    double largest = -INFINITY;
    for (const float l : logits[t]) largest = std::max<double>(largest, l);
    double z = 0;
    for (const float l : logits[t]) z += std::exp(l - largest);
    sum += std::log(z) + largest - logits[t][static_cast<std::size_t>(tokens[t + 1])];
  }
  return sum / static_cast<double>(tokens.size() - 1);
}

struct Decoded {
  std::vector<std::vector<float>> logits;
  std::vector<std::int32_t> greedy, sampled;
};

Decoded decode_on(std::shared_ptr<const ModelDefinition> model, int degree, ParameterStore& whole,
                  const std::vector<std::int32_t>& tokens) {
  Decoded decoded;
  std::mutex mutex;
  run_local(degree, [&](Communicator& comm) {
    const ParallelContext context(comm, Mesh({"model"}, {degree}));
    DecodingModel decoding(model, context, values_of(whole));
    std::vector<std::vector<float>> logits = stepwise(decoding.decoder(), tokens);
    GenerationOptions options;
    options.max_new_tokens = 12;
    const auto prompt = std::span(tokens).first(5);
    std::vector<std::int32_t> greedy = decoding.generate(prompt, options).tokens;
    options.sampling = {0.9, 20, 0.95, 7};
    std::vector<std::int32_t> sampled = decoding.generate(prompt, options).tokens;
    if (comm.rank() == 0) {
      const std::lock_guard lock(mutex);
      decoded = {std::move(logits), std::move(greedy), std::move(sampled)};
    }
  });
  return decoded;
}

void expect_decoders_agree(const std::shared_ptr<const ModelDefinition>& model,
                           const std::vector<int>& degrees) {
  DistributedModel whole_model(model, 3);
  ParameterStore& whole = whole_model.parameters();
  // Larger values than the initialisation's, so that the logits differ enough for greedy
  // choices and the loss to tell positions apart.
  for (float& v : whole.values()) v *= 6;
  const std::vector<std::int32_t> tokens = some_tokens(20, model->vocab_size());
  const std::vector<std::int32_t> inputs(tokens.begin(), tokens.end() - 1);
  const std::vector<std::int32_t> targets(tokens.begin() + 1, tokens.end());
  const double trained = whole_model.forward_backward(inputs, targets, 1, inputs.size(), false);

  const Decoded one = decode_on(model, 1, whole, tokens);
  EXPECT_NEAR(mean_loss(one.logits, tokens), trained, 1e-5 * trained) << model->describe();
  EXPECT_EQ(one.greedy.size(), 12U);
  EXPECT_NE(one.greedy, one.sampled);
  for (const int degree : degrees) {
    const Decoded many = decode_on(model, degree, whole, tokens);
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      for (std::size_t v = 0; v < model->vocab_size(); ++v) {
        ASSERT_NEAR(many.logits[t][v], one.logits[t][v], 1e-4)
            << model->describe() << " on model=" << degree << " position " << t << " token " << v;
      }
    }
    EXPECT_EQ(many.greedy, one.greedy) << "model=" << degree;
    EXPECT_EQ(many.sampled, one.sampled) << "model=" << degree;
  }

  // A prompt in pieces: the logits of its last position, as one position at a time gave them.
  ParameterStore& values = whole;
  run_local(1, [&](Communicator& comm) {
    const ParallelContext context(comm, Mesh({"model"}, {1}));
    DecodingModel decoding(model, context, values_of(values));
    Decoder& decoder = decoding.decoder();
    std::vector<float> logits(model->vocab_size());
    decoder.forward(std::span(tokens).first(8), logits);
    for (std::size_t v = 0; v < logits.size(); ++v) ASSERT_NEAR(logits[v], one.logits[7][v], 1e-4);
    decoder.forward(std::span(tokens).subspan(8, 5), logits);
    EXPECT_EQ(decoder.length(), 13U);
    for (std::size_t v = 0; v < logits.size(); ++v) ASSERT_NEAR(logits[v], one.logits[12][v], 1e-4);
  });
}

TEST(Decoder, TheGptsLogitsAreTheTrainingForwardsOnEveryModelDegree) {
  expect_decoders_agree(small_gpt(), {2, 4});
}

TEST(Decoder, TheLlamasLogitsAreTheTrainingForwardsWithSplitAndReplicatedHeads) {
  // Two key/value heads: split on model=2, each replicated on two ranks on model=4.
  expect_decoders_agree(small_llama(2, false), {2, 4});
  // Tied head, one key/value head held whole by every rank, Llama 3's rotary scaling.
  expect_decoders_agree(small_llama(1, true, true), {2});
}

// A Mixture of Experts decodes through the same part as it trains: the routed experts of a
// few rows at a time are the training forward's (Mixtral renormalised; Qwen3-MoE not, with its
// norms of queries and keys; and with a dense layer among the routed), on one rank and with the
// experts folded over 2 and 4 model ranks (each holding 2 or 1 of them; one decoded row is routed
// by one rank, the others route none).
TEST(Decoder, AMixtureOfExpertsLogitsAreTheTrainingForwards) {
  for (const models::LlamaVariant variant :
       {models::LlamaVariant::kMixtral, models::LlamaVariant::kQwen3Moe}) {
    models::LlamaConfig c;
    c.variant = variant;
    c.n_layer = 2;
    c.hidden_size = 32;
    c.n_head = 4;
    c.n_kv_head = 2;
    c.head_dim = 8;
    c.intermediate_size = 16;
    c.context_length = 32;
    c.vocab_size = 64;
    c.experts = 4;
    c.experts_per_token = 2;
    c.expert_width = 16;
    c.renormalize_routing = variant == models::LlamaVariant::kMixtral;
    expect_decoders_agree(std::make_shared<models::LlamaDefinition>(c), {2, 4});
    if (variant == models::LlamaVariant::kQwen3Moe) {
      // Layer 0 a dense MLP (decoder_sparse_step 2), layer 1 routed.
      c.sparse_step = 2;
      c.intermediate_size = 24;
      expect_decoders_agree(std::make_shared<models::LlamaDefinition>(c), {2, 4});
    }
  }
}

TEST(Decoder, RefusesWhatWouldOverrunItsCacheAndKeepsWhatItHolds) {
  const auto model = small_llama(2, false);
  DistributedModel whole_model(model, 3);
  ParameterStore& whole = whole_model.parameters();
  run_local(1, [&](Communicator& comm) {
    const ParallelContext context(comm, Mesh({"model"}, {1}));
    DecodingModel decoding(model, context, values_of(whole), 10);
    Decoder& decoder = decoding.decoder();
    EXPECT_EQ(decoder.capacity(), 10U);
    std::vector<float> logits(64);
    const std::vector<std::int32_t> tokens = some_tokens(8, 64);
    decoder.forward(tokens, logits);
    const std::vector<std::int32_t> three{1, 2, 3};
    EXPECT_THAT(error_of([&] { decoder.forward(three, logits); }),
                ::testing::HasSubstr("3 positions after 8; it caches 10"));
    const std::vector<std::int32_t> outside{64};
    EXPECT_THAT(error_of([&] { decoder.forward(outside, logits); }),
                ::testing::HasSubstr("token 0 is 64, outside the model's vocabulary of 64"));
    const std::vector<std::int32_t> negative{-1};
    EXPECT_THAT(error_of([&] { decoder.forward(negative, logits); }),
                ::testing::HasSubstr("token 0 is -1"));
    std::vector<float> short_logits(63);
    EXPECT_THAT(error_of([&] { decoder.forward(negative, short_logits); }),
                ::testing::HasSubstr("logits of 63 values"));
    EXPECT_EQ(decoder.length(), 8U);
    // A prompt that fills the cache leaves no room for a token.
    EXPECT_THAT(error_of([&] { (void)decoding.generate(some_tokens(10, 64), {}); }),
                ::testing::HasSubstr("leaves no room"));
    EXPECT_THAT(error_of([&] { (void)decoding.generate({}, {}); }),
                ::testing::HasSubstr("the prompt is empty"));
    // Generation stops where the cache is full.
    GenerationOptions options;
    options.max_new_tokens = 100;
    const GenerationResult result = decoding.generate(some_tokens(4, 64), options);
    EXPECT_EQ(result.tokens.size(), 7U);
    EXPECT_EQ(result.stop, StopReason::kContext);
  });
  EXPECT_THAT(error_of([&] {
                run_local(1, [&](Communicator& comm) {
                  const ParallelContext context(comm, Mesh({"model"}, {1}));
                  DecodingModel decoding(model, context, values_of(whole), 33);
                });
              }),
              ::testing::HasSubstr("caching 33 positions; the model's context is 32"));
}

TEST(Decoder, GenerationRunsOnAModelAxisAloneAndStopsAtAnEndToken) {
  EXPECT_THAT(error_of([] {
                DecodingModel::check_mesh(Mesh({"data", "model"}, {2, 2}));
              }),
              ::testing::HasSubstr("'data' has size 2"));
  DecodingModel::check_mesh(Mesh({"data", "model"}, {1, 4}));
  const auto model = small_gpt();
  DistributedModel whole_model(model, 3);
  ParameterStore& whole = whole_model.parameters();
  for (float& v : whole.values()) v *= 6;
  run_local(1, [&](Communicator& comm) {
    const ParallelContext context(comm, Mesh({"model"}, {1}));
    DecodingModel decoding(model, context, values_of(whole));
    GenerationOptions options;
    options.max_new_tokens = 10;
    const std::vector<std::int32_t> prompt = some_tokens(3, 64);
    const GenerationResult free_run = decoding.generate(prompt, options);
    ASSERT_EQ(free_run.tokens.size(), 10U);
    options.stop_tokens = {free_run.tokens[4]};
    const GenerationResult stopped = decoding.generate(prompt, options);
    const auto first =
        std::find(free_run.tokens.begin(), free_run.tokens.end(), free_run.tokens[4]);
    EXPECT_EQ(stopped.tokens, std::vector<std::int32_t>(free_run.tokens.begin(), first + 1));
    EXPECT_EQ(stopped.stop, StopReason::kStopToken);
    std::vector<std::int32_t> heard;
    options.on_token = [&](std::int32_t token) { heard.push_back(token); };
    EXPECT_EQ(decoding.generate(prompt, options).tokens, heard);
  });
}

// The library's generation job: the checks made before a rank starts name each setting as the
// caller names it, and the ranks of a model axis write the one rank's text.
TEST(GenerationJob, ChecksBeforeAnyRankAndWritesTheOneRanksTextOnAModelAxis) {
  const auto model = small_gpt();
  DistributedModel whole_model(model, 3);
  ParameterStore& whole = whole_model.parameters();
  for (float& v : whole.values()) v *= 6;
  const BackendInfo& local = *find_backend("local");
  const auto settings_on = [&](const char* mesh) {
    GenerationSettings settings;
    settings.model = model;
    settings.values = values_of(whole);
    settings.mesh = Mesh::parse(mesh);
    settings.options.max_new_tokens = 8;
    settings.names = SettingNames({{"mesh", "--mesh"}, {"stop_tokens", "--stop-ids"}});
    return settings;
  };
  const std::vector<std::int32_t> prompt = some_tokens(3, 64);
  const GenerationJob one(settings_on("model=1"));
  const std::optional<GenerationResult> alone = one.run(local, prompt);
  ASSERT_TRUE(alone.has_value());
  ASSERT_EQ(alone->tokens.size(), 8U);
  const std::optional<GenerationResult> split =
      GenerationJob(settings_on("model=2")).run(local, prompt);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->tokens, alone->tokens);

  EXPECT_THAT(error_of([&] { (void)GenerationJob(settings_on("data=2")); }),
              ::testing::HasSubstr("--mesh"));
  GenerationSettings bad_stop = settings_on("model=1");
  bad_stop.options.stop_tokens = {64};
  EXPECT_THAT(
      error_of([&] { (void)GenerationJob(bad_stop); }),
      ::testing::HasSubstr("--stop-ids: the id 64 is outside the model's vocabulary 0..63"));
  GenerationSettings no_model = settings_on("model=1");
  no_model.model = nullptr;
  EXPECT_THAT(error_of([&] { (void)GenerationJob(no_model); }),
              ::testing::HasSubstr("model is not given"));
  GenerationSettings hot = settings_on("model=1");
  hot.options.sampling.temperature = -1;
  EXPECT_THAT(error_of([&] { (void)GenerationJob(hot); }), ::testing::HasSubstr("temperature"));

  EXPECT_THAT(error_of([&] { one.check_prompt({}); }), ::testing::HasSubstr("the prompt is empty"));
  EXPECT_THAT(error_of([&] {
                one.check_prompt(std::vector<std::int32_t>{1, 64});
              }),
              ::testing::HasSubstr("the prompt's token 1 is the id 64"));
  EXPECT_THAT(error_of([&] { one.check_prompt(some_tokens(32, 64)); }),
              ::testing::HasSubstr("leaves no room"));
  one.check_prompt(some_tokens(31, 64));

  // A rank whose values cannot be read is the caller's InvalidArgument, with its message.
  GenerationSettings unreadable = settings_on("model=2");
  unreadable.values = [](std::span<const ParameterBlock>) {
    throw InvalidArgument("the weights file is cut short");
  };
  try {
    (void)GenerationJob(unreadable).run(local, prompt);
    ADD_FAILURE() << "a rank that cannot load generated";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("the weights file is cut short"));
  }
}

TEST(Decoder, ARankThatCannotLoadFailsEveryRank) {
  const auto model = small_llama(2, false);
  const std::string message = error_of([&] {
    run_local(2, [&](Communicator& comm) {
      const ParallelContext context(comm, Mesh({"model"}, {2}));
      const InitialValues values = [&comm](std::span<const ParameterBlock> blocks) {
        if (comm.rank() == 1) throw InvalidArgument("rank 1's file is gone");
        for (const ParameterBlock& block : blocks)
          std::fill(block.values.begin(), block.values.end(), 0.0F);
      };
      DecodingModel decoding(model, context, values);
    });
  });
  EXPECT_THAT(message, ::testing::HasSubstr("rank 1's file is gone"));
}

// Ranks given another prompt or seed (an MPMD launch, a prompt file that differs between hosts)
// are refused on every rank before a token is computed: their collectives could agree in size
// and decode another text on each, or stop at a mismatched call.
TEST(Decoder, RanksThatDisagreeOnThePromptOrTheSettingsAreRefusedOnEveryRank) {
  const auto model = small_gpt();
  DistributedModel whole_model(model, 3);
  ParameterStore& whole = whole_model.parameters();
  (void)whole.values();  // made once here, not by both ranks at once as they read it
  for (const auto& [name, change] :
       std::vector<std::pair<std::string,
                             std::function<void(std::vector<std::int32_t>&, GenerationOptions&)>>>{
           {"prompt", [](auto&prompt, auto&) { prompt.push_back(7); }},
           {"seed", [](auto&, auto&options) { options.sampling.seed = 8; }},
           {"temperature", [](auto&, auto&options) { options.sampling.temperature = 1e-9; }},
           {"stop_tokens", [](auto&, auto&options) { options.stop_tokens = {3}; }}}) {
    std::vector<std::string> errors(2);
    std::vector<std::size_t> generated(2, 0);
    run_local(2, [&](Communicator& comm) {
      const ParallelContext context(comm, Mesh({"model"}, {2}));
      DecodingModel decoding(model, context, values_of(whole));
      std::vector<std::int32_t> prompt = some_tokens(4, 64);
      GenerationOptions options;
      options.max_new_tokens = 5;
      if (comm.rank() == 1) change(prompt, options);
      try {
        generated[static_cast<std::size_t>(comm.rank())] =
            decoding.generate(prompt, options).tokens.size();
      } catch (const InvalidArgument& e) {
        errors[static_cast<std::size_t>(comm.rank())] = e.what();
      }
    });
    for (const std::string& error : errors) {
      EXPECT_THAT(error, ::testing::HasSubstr("rank 1 runs with another " + name + " than rank 0"))
          << name;
    }
    EXPECT_EQ(generated, (std::vector<std::size_t>{0, 0})) << name;
  }
}

TEST(TokenSampler, GreedyTakesTheFirstLargestAndSamplingFollowsTheSoftmax) {
  const std::vector<float> tie{0, 3, 3, 1};
  EXPECT_EQ(TokenSampler({}).next(tie), 1);
  // Probabilities 1/7, 2/7 and 4/7.
  const std::vector<float> logits{0, std::log(2.0F), std::log(4.0F)};
  const auto frequencies = [&](const SamplingOptions& options) {
    TokenSampler sampler(options);
    std::vector<double> counts(3);
    const int draws = 70000;
    for (int i = 0; i < draws; ++i) counts[static_cast<std::size_t>(sampler.next(logits))] += 1;
    for (double& c : counts) c /= draws;
    return counts;
  };
  const std::vector<double> plain = frequencies({1, 0, 1, 11});
  EXPECT_NEAR(plain[0], 1.0 / 7, 0.01);
  EXPECT_NEAR(plain[1], 2.0 / 7, 0.01);
  EXPECT_NEAR(plain[2], 4.0 / 7, 0.01);
  // Temperature 0.5 squares the odds: 1/21, 4/21, 16/21.
  const std::vector<double> cooled = frequencies({0.5, 0, 1, 11});
  EXPECT_NEAR(cooled[2], 16.0 / 21, 0.01);
  // Top-k 2 keeps tokens 2 and 1 (2/3, 1/3); top-p 0.5 token 2 alone (4/7 reaches it); 0.6 both.
  const std::vector<double> top_two = frequencies({1, 2, 1, 11});
  EXPECT_EQ(top_two[0], 0);
  EXPECT_NEAR(top_two[2], 2.0 / 3, 0.01);
  EXPECT_EQ(frequencies({1, 0, 0.5, 11})[2], 1);
  const std::vector<double> nucleus = frequencies({1, 0, 0.6, 11});
  EXPECT_EQ(nucleus[0], 0);
  EXPECT_NEAR(nucleus[1], 1.0 / 3, 0.01);
  // One seed, one sequence; another seed, another.
  const auto draws = [&](std::uint64_t seed) {
    TokenSampler sampler({1, 0, 1, seed});
    std::vector<std::int32_t> out;
    for (int i = 0; i < 40; ++i) out.push_back(sampler.next(logits));
    return out;
  };
  EXPECT_EQ(draws(5), draws(5));
  EXPECT_NE(draws(5), draws(6));
}

TEST(TokenSampler, RefusesSettingsAndLogitsItCannotDrawFrom) {
  EXPECT_THAT(error_of([] {
                validate(SamplingOptions{-1, 0, 1, 0});
              }),
              ::testing::HasSubstr("temperature is -1"));
  EXPECT_THAT(error_of([] {
                validate(SamplingOptions{NAN, 0, 1, 0});
              }),
              ::testing::HasSubstr("temperature is nan"));
  EXPECT_THAT(error_of([] {
                validate(SamplingOptions{INFINITY, 0, 1, 0});
              }),
              ::testing::HasSubstr("temperature is inf"));
  for (const double p : {0.0, 1.5, -0.1, static_cast<double>(NAN)}) {
    EXPECT_THAT(error_of([p] {
                  validate(SamplingOptions{1, 0, p, 0});
                }),
                ::testing::HasSubstr("top_p is"));
  }
  const std::vector<float> with_nan{0, NAN, 1};
  EXPECT_THAT(error_of([&] { (void)TokenSampler({}).next(with_nan); }),
              ::testing::HasSubstr("logit 1 is NaN"));
  const std::vector<float> none{-INFINITY, -INFINITY};
  EXPECT_THAT(error_of([&] {
                (void)TokenSampler({1, 0, 1, 0}).next(none);
              }),
              ::testing::HasSubstr("every logit is -inf"));
}

}  // namespace
}  // namespace shardwise::train
