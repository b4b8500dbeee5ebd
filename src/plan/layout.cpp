#include "shardwise/plan/layout.hpp"

#include <sstream>

#include "shardwise/core/error.hpp"
#include "shardwise/strategy/mesh_axes.hpp"

namespace shardwise::plan {
namespace {

template <class Enum, std::size_t N>
Enum parse_enum(const std::string& text, const std::string& flag,
                const std::pair<const char*, Enum> (&names)[N]) {
  std::string expected;
  for (const auto& [name, value] : names) {
    if (text == name) return value;
    expected += (expected.empty() ? "" : ", ") + std::string(name);
  }
  throw InvalidArgument(flag + " is '" + text.substr(0, 40) + "'; expected " + expected);
}

constexpr std::pair<const char*, Precision> kPrecisions[] = {
    {"fp32", Precision::kFp32}, {"bf16", Precision::kBf16}, {"bf16-mixed", Precision::kBf16Mixed}};
constexpr std::pair<const char*, Optimizer> kOptimizers[] = {{"adam", Optimizer::kAdam},
                                                             {"sgd", Optimizer::kSgd}};
constexpr std::pair<const char*, ScheduleKind> kSchedules[] = {
    {"gpipe", ScheduleKind::kGPipe},
    {"1f1b", ScheduleKind::kOneFOneB},
    {"interleaved", ScheduleKind::kInterleaved1F1B}};

template <class Enum, std::size_t N>
std::string name_of(Enum value, const std::pair<const char*, Enum> (&names)[N]) {
  for (const auto& [name, candidate] : names) {
    if (candidate == value) return name;
  }
  return "?";
}

}  // namespace

std::string to_string(Precision value) { return name_of(value, kPrecisions); }
Precision planned(shardwise::Precision value) {
  return value == shardwise::Precision::kBf16 ? Precision::kBf16 : Precision::kFp32;
}
bool trainer_runs(Precision value) { return value != Precision::kBf16Mixed; }
ElementTypes element_types(Precision value, std::optional<DType> reduce,
                           std::optional<DType> residual) {
  ElementTypes types = value == Precision::kFp32 ? ElementTypes::fp32()
                       : value == Precision::kBf16
                           ? ElementTypes::bf16_compute(residual.value_or(DType::kF32))
                           : ElementTypes::bf16_mixed();
  if (reduce) types.reduce = *reduce;
  return types;
}
std::string to_string(Optimizer value) { return name_of(value, kOptimizers); }

Precision parse_precision(const std::string& text, const std::string& flag) {
  return parse_enum(text, flag, kPrecisions);
}
Optimizer parse_optimizer(const std::string& text, const std::string& flag) {
  return parse_enum(text, flag, kOptimizers);
}
ScheduleKind parse_schedule(const std::string& text, const std::string& flag) {
  return parse_enum(text, flag, kSchedules);
}

void TrainingSetup::validate() const {
  const auto bounded = [](const char* field, std::int64_t value, std::int64_t least,
                          std::int64_t most) {
    if (value < least || value > most) {
      throw InvalidArgument(std::string(field) + " is " + std::to_string(value) + "; expected " +
                            std::to_string(least) + " to " + std::to_string(most));
    }
  };
  bounded("global_batch", global_batch, 1, kMaxGlobalBatch);
  bounded("seq", seq, 1, kMaxSeq);
  bounded("micro_batch", micro_batch, 1, global_batch);
  if (!(compute_efficiency >= kLeastEfficiency && compute_efficiency <= 1)) {
    throw InvalidArgument("compute_efficiency is " + std::to_string(compute_efficiency) +
                          "; expected " + std::to_string(kLeastEfficiency) + " to 1");
  }
  if (!(overlap >= 0 && overlap <= 1)) {
    throw InvalidArgument("overlap is " + std::to_string(overlap) + "; expected 0 to 1");
  }
  if (reduce_dtype && *reduce_dtype != DType::kF32 && *reduce_dtype != DType::kBF16) {
    throw InvalidArgument("reduce_dtype is " + shardwise::to_string(*reduce_dtype) +
                          "; expected fp32 or bf16");
  }
  if (residual_dtype && *residual_dtype != DType::kF32 && *residual_dtype != DType::kBF16) {
    throw InvalidArgument("residual_dtype is " + shardwise::to_string(*residual_dtype) +
                          "; expected fp32 or bf16");
  }
  if (residual_dtype && *residual_dtype == DType::kBF16 && precision != Precision::kBf16) {
    throw InvalidArgument("residual_dtype is bf16 under precision " + plan::to_string(precision) +
                          "; a bf16 residual stream is counted under precision bf16 (bf16-mixed "
                          "keeps its stream in bf16 already)");
  }
  if (residual_dtype && *residual_dtype == DType::kF32 && precision == Precision::kBf16Mixed) {
    throw InvalidArgument(
        "residual_dtype is fp32 under precision bf16-mixed, which counts its stream in bf16; "
        "precision bf16 counts a float32 stream");
  }
}

std::string Layout::to_string() const {
  std::ostringstream out;
  out << "data=" << data << ",fsdp=" << fsdp << ",model=" << model << ",pipeline=" << pipeline;
  if (expert != 1) out << ",expert=" << expert;
  out << " zero " << zero << ", " << microbatches << " micro-batch"
      << (microbatches == 1 ? "" : "es");
  if (pipeline > 1) {
    out << " " << plan::to_string(schedule);
    if (schedule == ScheduleKind::kInterleaved1F1B) out << " x" << virtual_stages;
  }
  if (!stage_layers.empty()) {
    out << ", layers";
    for (std::size_t k = 0; k < stage_layers.size(); ++k) out << (k ? "," : " ") << stage_layers[k];
  }
  if (recompute != Recompute::kNone) out << ", recompute " << plan::to_string(recompute);
  if (sequence_parallel) out << ", sequence parallel";
  return out.str();
}

Layout layout_of_axes(const Mesh& mesh, const std::string& field) {
  check_trained_axes(mesh, field);
  Layout layout;
  for (std::size_t i = 0; i < mesh.num_axes(); ++i) {
    const std::int64_t size = mesh.axis_sizes()[i];
    switch (find_mesh_axis(mesh.axis_names()[i])->role) {
      case AxisRole::kBatch: layout.data = size; break;
      case AxisRole::kParameterShard: layout.fsdp = size; break;
      case AxisRole::kModelSplit: layout.model = size; break;
      case AxisRole::kPipeline: layout.pipeline = size; break;
      case AxisRole::kExperts: layout.expert = size; break;
      case AxisRole::kSequence: break;  // refused above until trained
    }
  }
  return layout;
}

}  // namespace shardwise::plan
