#include "shardwise/core/mesh.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unordered_set>

#include "error_of.hpp"

namespace shardwise {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testing::error_of;

TEST(Mesh, DefaultDeviceIdsAreRowMajor) {
  Mesh mesh({"data", "model"}, {2, 4});
  EXPECT_EQ(mesh.size(), 8);
  EXPECT_EQ(mesh.num_axes(), 2u);
  EXPECT_THAT(mesh.device_ids(), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_TRUE(mesh.has_default_device_ids());
  // The last axis varies fastest.
  EXPECT_EQ(mesh.device_at({0, 3}), 3);
  EXPECT_EQ(mesh.device_at({1, 0}), 4);
  EXPECT_THAT(mesh.coords_of(6), ElementsAre(1, 2));
}

TEST(Mesh, ExplicitDeviceIds) {
  Mesh mesh({"x", "y"}, {2, 2}, std::vector<DeviceId>{7, 5, 3, 1});
  EXPECT_EQ(mesh.device_at({0, 1}), 5);
  EXPECT_THAT(mesh.coords_of(3), ElementsAre(1, 0));
  EXPECT_EQ(mesh.position_of_device(1), 3);
  EXPECT_TRUE(mesh.contains_device(7));
  EXPECT_FALSE(mesh.contains_device(0));
  EXPECT_FALSE(mesh.has_default_device_ids());
  EXPECT_THAT(error_of([&] { (void)mesh.coords_of(4); }), HasSubstr("device 4 is not in"));
}

TEST(Mesh, CoordinatesRoundTripEveryPosition) {
  Mesh mesh({"a", "b", "c"}, {2, 3, 4});
  for (std::int64_t p = 0; p < mesh.size(); ++p) {
    EXPECT_EQ(mesh.position_of(mesh.coords_at(p)), p);
  }
  EXPECT_THAT(error_of([&] {
                (void)mesh.position_of({0, 3, 0});
              }),
              HasSubstr("coordinate 3 on axis 'b' is outside [0, 3)"));
  EXPECT_THAT(error_of([&] { (void)mesh.position_of({0, 0}); }), HasSubstr("has 3 axes"));
  EXPECT_THAT(error_of([&] { (void)mesh.coords_at(24); }), HasSubstr("outside [0, 24)"));
}

TEST(Mesh, AxisLookup) {
  Mesh mesh({"data", "model"}, {2, 4});
  EXPECT_EQ(mesh.axis_index("model"), 1u);
  EXPECT_EQ(mesh.axis_size("data"), 2);
  EXPECT_TRUE(mesh.has_axis("data"));
  EXPECT_FALSE(mesh.has_axis("pipeline"));
  EXPECT_THAT(error_of([&] { (void)mesh.axis_index("pipeline"); }),
              HasSubstr("axis 'pipeline' is not in Mesh('data': 2, 'model': 4)"));
}

TEST(Mesh, ValidationNamesTheField) {
  EXPECT_THAT(error_of([] { Mesh({}, {}); }), HasSubstr("no axes"));
  EXPECT_THAT(error_of([] {
                Mesh({"data", "data"}, {2, 2});
              }),
              HasSubstr("'data' is used by axes 0 and 1"));
  EXPECT_THAT(error_of([] { Mesh({"data", ""}, {2, 2}); }), HasSubstr("axis 1 has name ''"));
  EXPECT_THAT(error_of([] { Mesh({"da ta"}, {2}); }), HasSubstr("'da ta'"));
  EXPECT_THAT(error_of([] { Mesh({"data"}, {0}); }), HasSubstr("'data' has size 0"));
  EXPECT_THAT(error_of([] { Mesh({"data"}, {-3}); }), HasSubstr("'data' has size -3"));
  EXPECT_THAT(error_of([] {
                Mesh({"data", "model"}, {2});
              }),
              HasSubstr("2 axis names but 1 axis sizes"));
  EXPECT_THAT(error_of([] {
                Mesh({"data"}, {4}, std::vector<DeviceId>{0, 1, 2});
              }),
              HasSubstr("has 4 positions but 3 device ids"));
  EXPECT_THAT(error_of([] {
                Mesh({"data"}, {3}, std::vector<DeviceId>{0, 2, 2});
              }),
              HasSubstr("device id 2 appears at positions 1 and 2"));
  EXPECT_THAT(error_of([] {
                Mesh({"data"}, {2}, std::vector<DeviceId>{0, -1});
              }),
              HasSubstr("device id -1 at position 1 is negative"));
  EXPECT_THAT(error_of([] {
                Mesh({"a", "b", "c"}, {65536, 65536, 4});
              }),
              HasSubstr("mesh a=65536, b=65536, c=4 has more than 1048576 devices"));
}

TEST(Mesh, InvalidArgumentIsAShardwiseError) {
  EXPECT_THROW(Mesh({"data"}, {0}), InvalidArgument);
  EXPECT_THROW(Mesh::parse("data=0"), ParseError);
}

TEST(Mesh, ParsesAndPrints) {
  Mesh mesh = Mesh::parse("data=2,model=4");
  EXPECT_EQ(mesh, Mesh({"data", "model"}, {2, 4}));
  EXPECT_EQ(mesh.to_string(), "Mesh('data': 2, 'model': 4)");
  EXPECT_EQ(Mesh::parse(" data = 2 , model = 4 "), mesh);
  EXPECT_EQ(Mesh::parse(mesh.to_string()), mesh);
  EXPECT_EQ(Mesh::parse("Mesh(\"data\": 2, 'model': 4)"), mesh);
}

TEST(Mesh, PrintsAndParsesExplicitDeviceIds) {
  Mesh mesh({"x", "y"}, {2, 2}, std::vector<DeviceId>{3, 2, 1, 0});
  EXPECT_EQ(mesh.to_string(), "Mesh('x': 2, 'y': 2, devices=[3, 2, 1, 0])");
  EXPECT_EQ(Mesh::parse(mesh.to_string()), mesh);
}

TEST(Mesh, ParseErrorsQuoteTheText) {
  EXPECT_THAT(error_of([] { Mesh::parse(""); }), HasSubstr("expected an axis name"));
  EXPECT_THAT(error_of([] { Mesh::parse("data"); }),
              HasSubstr("cannot parse mesh 'data': expected '='"));
  EXPECT_THAT(error_of([] { Mesh::parse("data=x"); }), HasSubstr("expected an axis size"));
  EXPECT_THAT(error_of([] { Mesh::parse("data=2,"); }), HasSubstr("expected an axis name"));
  EXPECT_THAT(error_of([] { Mesh::parse("data=2 model=4"); }), HasSubstr("unexpected 'model=4'"));
  EXPECT_THAT(error_of([] { Mesh::parse("data=2,data=2"); }),
              HasSubstr("mesh 'data=2,data=2': mesh axis name 'data' is used by axes 0 and 1"));
  EXPECT_THAT(error_of([] { Mesh::parse("Mesh('x': 2, devices=[0, 0])"); }),
              HasSubstr("device id 0 appears at positions 0 and 1"));
  EXPECT_THAT(error_of([] { Mesh::parse("data=99999999999999999999"); }),
              HasSubstr("out of range"));
}

TEST(Mesh, GroupsAlongOneAxis) {
  Mesh mesh({"data", "model"}, {2, 4});
  EXPECT_THAT(mesh.groups({"model"}),
              ElementsAre(ElementsAre(0, 1, 2, 3), ElementsAre(4, 5, 6, 7)));
  EXPECT_THAT(mesh.groups({"data"}), ElementsAre(ElementsAre(0, 4), ElementsAre(1, 5),
                                                 ElementsAre(2, 6), ElementsAre(3, 7)));
}

TEST(Mesh, GroupsAlongSeveralAxesAreInMeshOrder) {
  Mesh mesh({"a", "b", "c"}, {2, 2, 2});
  // The order the axes are named in does not matter: members are in mesh order.
  EXPECT_EQ(mesh.groups({"c", "a"}), mesh.groups({"a", "c"}));
  EXPECT_THAT(mesh.groups({"a", "c"}),
              ElementsAre(ElementsAre(0, 1, 4, 5), ElementsAre(2, 3, 6, 7)));
  EXPECT_THAT(mesh.groups({}),
              ElementsAre(ElementsAre(0), ElementsAre(1), ElementsAre(2), ElementsAre(3),
                          ElementsAre(4), ElementsAre(5), ElementsAre(6), ElementsAre(7)));
  EXPECT_THAT(mesh.groups({"a", "b", "c"}), ElementsAre(ElementsAre(0, 1, 2, 3, 4, 5, 6, 7)));
}

TEST(Mesh, GroupsUseDeviceIds) {
  Mesh mesh({"x", "y"}, {2, 2}, std::vector<DeviceId>{10, 11, 12, 13});
  EXPECT_THAT(mesh.groups({"x"}), ElementsAre(ElementsAre(10, 12), ElementsAre(11, 13)));
}

TEST(Mesh, GroupsPartitionTheDevicesAndVaryOnlyAlongTheirAxes) {
  Mesh mesh({"a", "b", "c", "d"}, {2, 3, 1, 2});
  for (const std::vector<std::string>& axes :
       std::vector<std::vector<std::string>>{{"a"}, {"b", "d"}, {"c"}, {"a", "b", "d"}}) {
    std::unordered_set<DeviceId> seen;
    for (const auto& group : mesh.groups(axes)) {
      for (DeviceId device : group) {
        EXPECT_TRUE(seen.insert(device).second);
        const auto coords = mesh.coords_of(device);
        const auto first = mesh.coords_of(group.front());
        for (std::size_t a = 0; a < mesh.num_axes(); ++a) {
          bool in_group = std::find(axes.begin(), axes.end(), mesh.axis_names()[a]) != axes.end();
          if (!in_group) {
            EXPECT_EQ(coords[a], first[a]);
          }
        }
      }
    }
    EXPECT_EQ(static_cast<std::int64_t>(seen.size()), mesh.size());
  }
}

TEST(Mesh, GroupErrors) {
  Mesh mesh({"data", "model"}, {2, 4});
  EXPECT_THAT(error_of([&] { (void)mesh.groups({"x"}); }), HasSubstr("axis 'x' is not in"));
  EXPECT_THAT(error_of([&] {
                (void)mesh.groups({"data", "data"});
              }),
              HasSubstr("axis 'data' appears twice"));
}

TEST(Mesh, EqualityAndHash) {
  Mesh a({"data", "model"}, {2, 4});
  Mesh b = Mesh::parse("data=2,model=4");
  Mesh c({"data", "model"}, {4, 2});
  Mesh d({"data", "model"}, {2, 4}, std::vector<DeviceId>{7, 6, 5, 4, 3, 2, 1, 0});
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  EXPECT_EQ(std::hash<Mesh>{}(a), std::hash<Mesh>{}(b));
  std::unordered_set<Mesh> set{a, b, c, d};
  EXPECT_EQ(set.size(), 3u);
}

}  // namespace
}  // namespace shardwise
