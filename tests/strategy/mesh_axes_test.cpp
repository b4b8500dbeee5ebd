// The registry of mesh axes by role: one entry per role, the trained ones named in order, an
// unknown or untrained axis refused by name, and the planner's layout read by role.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "error_of.hpp"
#include "shardwise/plan/layout.hpp"
#include "shardwise/strategy/mesh_axes.hpp"

namespace shardwise {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

TEST(MeshAxes, EveryRoleHasOneAxisAndTheTrainedOnesComeFirst) {
  std::set<AxisRole> roles;
  std::set<std::string> names;
  bool untrained_seen = false;
  for (const MeshAxisRole& axis : mesh_axis_roles()) {
    EXPECT_TRUE(roles.insert(axis.role).second) << axis.name;
    EXPECT_TRUE(names.insert(axis.name).second) << axis.name;
    EXPECT_EQ(find_mesh_axis(axis.name), &axis);
    EXPECT_EQ(&mesh_axis(axis.role), &axis);
    EXPECT_FALSE(axis.what.empty());
    if (!axis.trained) untrained_seen = true;
    EXPECT_FALSE(untrained_seen && axis.trained) << axis.name << " after an untrained axis";
  }
  EXPECT_EQ(roles.size(), 6U);
  EXPECT_EQ(trained_axis_names(), "data, fsdp, model, pipeline, expert");
  EXPECT_EQ(find_mesh_axis("tensor"), nullptr);
}

TEST(MeshAxes, AMeshIsCheckedAxisByAxis) {
  check_trained_axes(Mesh::parse("data=2,fsdp=2,model=2,pipeline=2"), "mesh");
  EXPECT_THAT(error_of([] { check_trained_axes(Mesh::parse("data=2,tensor=2"), "mesh"); }),
              HasSubstr("mesh: axis 'tensor' is not one the training layer knows"));
  EXPECT_THAT(error_of([] { check_trained_axes(Mesh::parse("context=2"), "layout"); }),
              HasSubstr("layout: axis 'context' is context parallelism"));
}

TEST(MeshAxes, ThePlannersLayoutTakesEachDegreeByItsRole) {
  const plan::Layout l =
      plan::layout_of_axes(Mesh::parse("pipeline=2,model=4,fsdp=3,data=5"), "layout");
  EXPECT_EQ(l.data, 5);
  EXPECT_EQ(l.fsdp, 3);
  EXPECT_EQ(l.model, 4);
  EXPECT_EQ(l.pipeline, 2);
  EXPECT_EQ(l.expert, 1);
  EXPECT_EQ(plan::layout_of_axes(Mesh::parse("data=2,expert=4"), "layout").expert, 4);
  EXPECT_EQ(plan::layout_of_axes(Mesh::parse("data=2,expert=4"), "layout").data_parallel(), 8);
  EXPECT_THAT(error_of([] { (void)plan::layout_of_axes(Mesh::parse("context=2"), "layout"); }),
              HasSubstr("layout: axis 'context' is context parallelism"));
}

}  // namespace
}  // namespace shardwise
