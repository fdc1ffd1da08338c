// Pins v1beta1/api.proto to kubelet's published device plugin API v1beta1: kubelet speaks it on
// the wire, so every service, method, message, field name, number, type and label must match
// k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto. A change here breaks kubelet.
#include <string>
#include <vector>

#include "deviceplugin/v1beta1/api.pb.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"

namespace tessera::deviceplugin {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;

struct Field {
  std::string name;
  int number;
  FieldDescriptor::Type type;
  bool repeated;
  std::string message_type;  // full name for message (and map entry) fields
};

constexpr auto kString = FieldDescriptor::TYPE_STRING;
constexpr auto kBool = FieldDescriptor::TYPE_BOOL;
constexpr auto kInt32 = FieldDescriptor::TYPE_INT32;
constexpr auto kInt64 = FieldDescriptor::TYPE_INT64;
constexpr auto kMessage = FieldDescriptor::TYPE_MESSAGE;

void ExpectMessage(const std::string& name, const std::vector<Field>& fields) {
  const Descriptor* d = DescriptorPool::generated_pool()->FindMessageTypeByName("v1beta1." + name);
  ASSERT_NE(d, nullptr) << name;
  EXPECT_EQ(d->field_count(), static_cast<int>(fields.size())) << name;
  for (const Field& f : fields) {
    const FieldDescriptor* fd = d->FindFieldByName(f.name);
    ASSERT_NE(fd, nullptr) << name << "." << f.name;
    EXPECT_EQ(fd->number(), f.number) << name << "." << f.name;
    EXPECT_EQ(fd->type(), f.type) << name << "." << f.name;
    EXPECT_EQ(fd->is_repeated(), f.repeated) << name << "." << f.name;
    if (f.type == kMessage && !fd->is_map()) {
      EXPECT_EQ(fd->message_type()->full_name(), f.message_type) << name << "." << f.name;
    }
    if (fd->is_map()) {
      EXPECT_EQ(fd->message_type()->map_key()->type(), kString);
      EXPECT_EQ(fd->message_type()->map_value()->type(), kString);
    }
  }
}

TEST(ApiProtoTest, MessagesMatchKubeletV1beta1) {
  EXPECT_EQ(v1beta1::Empty::descriptor()->file()->package(), "v1beta1");
  ExpectMessage("DevicePluginOptions",
                {{"pre_start_required", 1, kBool, false, ""},
                 {"get_preferred_allocation_available", 2, kBool, false, ""}});
  ExpectMessage("RegisterRequest",
                {{"version", 1, kString, false, ""},
                 {"endpoint", 2, kString, false, ""},
                 {"resource_name", 3, kString, false, ""},
                 {"options", 4, kMessage, false, "v1beta1.DevicePluginOptions"}});
  ExpectMessage("Empty", {});
  ExpectMessage("ListAndWatchResponse", {{"devices", 1, kMessage, true, "v1beta1.Device"}});
  ExpectMessage("TopologyInfo", {{"nodes", 1, kMessage, true, "v1beta1.NUMANode"}});
  ExpectMessage("NUMANode", {{"ID", 1, kInt64, false, ""}});
  ExpectMessage("Device", {{"ID", 1, kString, false, ""},
                           {"health", 2, kString, false, ""},
                           {"topology", 3, kMessage, false, "v1beta1.TopologyInfo"}});
  ExpectMessage("PreStartContainerRequest", {{"devices_ids", 1, kString, true, ""}});
  ExpectMessage("PreStartContainerResponse", {});
  ExpectMessage("PreferredAllocationRequest", {{"container_requests", 1, kMessage, true,
                                                "v1beta1.ContainerPreferredAllocationRequest"}});
  ExpectMessage("ContainerPreferredAllocationRequest",
                {{"available_deviceIDs", 1, kString, true, ""},
                 {"must_include_deviceIDs", 2, kString, true, ""},
                 {"allocation_size", 3, kInt32, false, ""}});
  ExpectMessage("PreferredAllocationResponse", {{"container_responses", 1, kMessage, true,
                                                 "v1beta1.ContainerPreferredAllocationResponse"}});
  ExpectMessage("ContainerPreferredAllocationResponse", {{"deviceIDs", 1, kString, true, ""}});
  ExpectMessage("AllocateRequest",
                {{"container_requests", 1, kMessage, true, "v1beta1.ContainerAllocateRequest"}});
  ExpectMessage("ContainerAllocateRequest", {{"devices_ids", 1, kString, true, ""}});
  ExpectMessage("CDIDevice", {{"name", 1, kString, false, ""}});
  ExpectMessage("AllocateResponse",
                {{"container_responses", 1, kMessage, true, "v1beta1.ContainerAllocateResponse"}});
  ExpectMessage("ContainerAllocateResponse",
                {{"envs", 1, kMessage, true, ""},
                 {"mounts", 2, kMessage, true, "v1beta1.Mount"},
                 {"devices", 3, kMessage, true, "v1beta1.DeviceSpec"},
                 {"annotations", 4, kMessage, true, ""},
                 {"cdi_devices", 5, kMessage, true, "v1beta1.CDIDevice"}});
  ExpectMessage("Mount", {{"container_path", 1, kString, false, ""},
                          {"host_path", 2, kString, false, ""},
                          {"read_only", 3, kBool, false, ""}});
  ExpectMessage("DeviceSpec", {{"container_path", 1, kString, false, ""},
                               {"host_path", 2, kString, false, ""},
                               {"permissions", 3, kString, false, ""}});
}

TEST(ApiProtoTest, ServicesMatchKubeletV1beta1) {
  const auto* pool = DescriptorPool::generated_pool();
  const auto* reg = pool->FindServiceByName("v1beta1.Registration");
  ASSERT_NE(reg, nullptr);
  ASSERT_EQ(reg->method_count(), 1);
  EXPECT_EQ(reg->method(0)->name(), "Register");
  EXPECT_EQ(reg->method(0)->input_type()->full_name(), "v1beta1.RegisterRequest");
  EXPECT_EQ(reg->method(0)->output_type()->full_name(), "v1beta1.Empty");

  const auto* dp = pool->FindServiceByName("v1beta1.DevicePlugin");
  ASSERT_NE(dp, nullptr);
  struct Method {
    std::string name, in, out;
    bool server_streaming;
  };
  const std::vector<Method> methods = {
      {"GetDevicePluginOptions", "Empty", "DevicePluginOptions", false},
      {"ListAndWatch", "Empty", "ListAndWatchResponse", true},
      {"GetPreferredAllocation", "PreferredAllocationRequest", "PreferredAllocationResponse",
       false},
      {"Allocate", "AllocateRequest", "AllocateResponse", false},
      {"PreStartContainer", "PreStartContainerRequest", "PreStartContainerResponse", false},
  };
  ASSERT_EQ(dp->method_count(), static_cast<int>(methods.size()));
  for (const Method& m : methods) {
    const auto* md = dp->FindMethodByName(m.name);
    ASSERT_NE(md, nullptr) << m.name;
    EXPECT_EQ(md->input_type()->full_name(), "v1beta1." + m.in);
    EXPECT_EQ(md->output_type()->full_name(), "v1beta1." + m.out);
    EXPECT_EQ(md->server_streaming(), m.server_streaming) << m.name;
    EXPECT_FALSE(md->client_streaming()) << m.name;
  }
}

}  // namespace
}  // namespace tessera::deviceplugin
