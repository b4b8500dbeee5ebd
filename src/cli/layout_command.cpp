#include <CLI/CLI.hpp>
#include <optional>
#include <ostream>

#include "command.hpp"
#include "layout_render.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::cli {
namespace {

class LayoutCommand final : public Command {
 public:
  explicit LayoutCommand(CLI::App& parent)
      : app_(parent.add_subcommand(
            "layout",
            "Show how a sharding splits an array: shard shape, each device's index "
            "range and replica id, and a drawing of the blocks")) {
    app_->add_option("--mesh", mesh_, "Mesh axes and sizes, e.g. data=2,model=4")->required();
    app_->add_option("--spec", spec_, "Partition spec, e.g. \"P('data', None)\"")
        ->default_val("P()");
    app_->add_option("--shape", shape_, "Global array shape, e.g. 8,16 ('' for a scalar)")
        ->required();
    app_->add_option("--devices", devices_,
                     "Device ids in mesh order, e.g. 3,2,1,0 (default 0..n-1)");
    app_->add_flag("--uneven", uneven_,
                   "Allow dimensions the shards do not divide (torch.chunk semantics)");
    app_->add_flag("--json", json_, "Print one JSON object instead of the report");
  }

  [[nodiscard]] const CLI::App& app() const override { return *app_; }

  void run(std::ostream& out) const override {
    Mesh mesh = Mesh::parse(mesh_);
    if (devices_) {
      if (devices_->find_first_not_of(" \t") == std::string::npos) {
        throw InvalidArgument(
            "--devices is empty; give one device id per mesh position, or "
            "leave --devices out for 0.." +
            std::to_string(mesh.size() - 1));
      }
      const std::vector<DeviceId> ids = parse_int_list(*devices_, "--devices");
      const bool mesh_has_ids = mesh_.find("devices") != std::string::npos;
      if (mesh_has_ids && ids != mesh.device_ids()) {
        throw InvalidArgument("--devices " + echo_input(*devices_) +
                              " disagrees with the device ids of --mesh " + echo_input(mesh_) +
                              "; give them in one place");
      }
      mesh = Mesh(mesh.axis_names(), mesh.axis_sizes(), ids);
    }
    const NamedSharding sharding(std::move(mesh), PartitionSpec::parse(spec_),
                                 uneven_ ? Evenness::kUneven : Evenness::kStrict);
    const Shape shape = parse_shape(shape_);
    sharding.validate(shape);
    out << (json_ ? render_layout_json(sharding, shape) + "\n"
                  : render_layout_text(sharding, shape));
  }

 private:
  CLI::App* app_;
  std::string mesh_;
  std::string spec_;
  std::string shape_;
  std::optional<std::string> devices_;
  bool uneven_ = false;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> add_layout_command(CLI::App& parent) {
  return std::make_unique<LayoutCommand>(parent);
}

}  // namespace shardwise::cli
