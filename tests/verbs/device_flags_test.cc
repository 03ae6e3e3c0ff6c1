// --device/--port/--gid-index (rdma/verbs/flags.h) and how SelectPort honours
// them. The parsing tests run everywhere; the device tests run verbs_probe
// (a data dependency) and SelectPort on the real device: they skip without
// one, and fail instead under RDMADS_REQUIRE_VERBS=1 (the Soft-RoCE guest).

#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "rdma/fabric.h"
#include "rdma/verbs/flags.h"
#include "rdma/verbs/verbs_device.h"
#include "rdma/verbs/verbs_fabric.h"

namespace rdma::verbs {
namespace {

// Runs Extract on a copy of `args` (argv[0] is added); returns what is left.
absl::Status Extract(std::vector<std::string> args, DeviceFlags* f, std::vector<std::string>* rest) {
  args.insert(args.begin(), "prog");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  absl::Status s = f->Extract(&argc, argv.data());
  rest->clear();
  for (int i = 0; i < argc; ++i) rest->push_back(argv[i]);
  EXPECT_EQ(argv[argc], nullptr);
  return s;
}

TEST(DeviceFlags, BothFormsAreRemovedAndParsed) {
  DeviceFlags f;
  std::vector<std::string> rest;
  ASSERT_TRUE(Extract({"--fabric=verbs", "--device=mlx5_1", "--keys=5", "--port", "2", "--gid-index=3", "-q"}, &f,
                      &rest)
                  .ok());
  EXPECT_EQ(rest, (std::vector<std::string>{"prog", "--fabric=verbs", "--keys=5", "-q"}));
  EXPECT_EQ(f.device, "mlx5_1");
  EXPECT_EQ(f.port, 2);
  EXPECT_EQ(f.gid_index, 3);
  EXPECT_TRUE(f.given);
  FabricOptions o;
  o.kind = FabricKind::kAuto;
  ASSERT_TRUE(f.Apply(&o).ok());
  EXPECT_EQ(o.kind, FabricKind::kVerbs);  // an explicit device never falls back to soft
  EXPECT_EQ(o.device, "mlx5_1");
  EXPECT_EQ(o.port, 2);
  EXPECT_EQ(o.gid_index, 3);
  o.kind = FabricKind::kSoft;
  absl::Status s = f.Apply(&o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "--fabric=soft")) << s;
}

TEST(DeviceFlags, DefaultsAreAutoAndLeaveTheFabricAlone) {
  DeviceFlags f;
  std::vector<std::string> rest;
  ASSERT_TRUE(Extract({"--benchmark_filter=x", "--port=auto", "--gid-index", "auto"}, &f, &rest).ok());
  EXPECT_EQ(rest, (std::vector<std::string>{"prog", "--benchmark_filter=x"}));
  EXPECT_EQ(f.port, 0);
  EXPECT_EQ(f.gid_index, -1);
  DeviceFlags none;
  ASSERT_TRUE(Extract({"--portable", "--devices=3"}, &none, &rest).ok());  // prefixes of other flags stay
  EXPECT_EQ(rest.size(), 3u);
  EXPECT_FALSE(none.given);
  FabricOptions o;
  o.kind = FabricKind::kAuto;
  ASSERT_TRUE(none.Apply(&o).ok());
  EXPECT_EQ(o.kind, FabricKind::kAuto);
  EXPECT_EQ(o.port, 0);
  EXPECT_EQ(FabricOptions{}.port, 0);  // the library default is auto too
}

TEST(DeviceFlags, BadValuesNameTheFlag) {
  std::vector<std::string> rest;
  for (auto [args, want] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--port=0"}, "--port=0"},
           {{"--port=256"}, "--port=256"},
           {{"--port=x"}, "--port=x"},
           {{"--port="}, "--port="},
           {{"--gid-index=-2"}, "--gid-index=-2"},
           {{"--gid-index"}, "--gid-index needs a value"},
           {{"--device="}, "--device needs a device name"},
           {{"--device", "--port=1"}, "--device needs a device name"},
       }) {
    DeviceFlags f;
    absl::Status s = Extract(args, &f, &rest);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << args[0];
    EXPECT_TRUE(absl::StrContains(s.message(), want)) << want << " missing in: " << s;
  }
}

TEST(DeviceFlags, HelpListsAllThree) {
  for (const char* f : {"--device=NAME", "--port=N", "--gid-index=N"}) {
    EXPECT_TRUE(absl::StrContains(kDeviceFlagsHelp, f)) << f;
  }
}

// ------------------------------------------------------------ on a device

class DeviceSelectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FabricOptions o;
    o.kind = FabricKind::kVerbs;
    auto p = SelectPort(o);
    if (!p.ok()) {
      const char* req = std::getenv("RDMADS_REQUIRE_VERBS");
      if (req != nullptr && std::string(req) == "1") FAIL() << "RDMADS_REQUIRE_VERBS=1 but: " << p.status();
      GTEST_SKIP() << "no RDMA device here (" << p.status().message()
                   << "); run in the Soft-RoCE guest: tests/verbs/run_guest_tests.sh";
    }
    port_ = *p;
  }
  PortInfo port_;
};

// verbs_probe next to this binary (bazel-bin, as in the guest) or in the runfiles.
std::string ProbePath() {
  if (const char* srcdir = std::getenv("TEST_SRCDIR")) {
    const char* ws = std::getenv("TEST_WORKSPACE");
    std::string p = std::string(srcdir) + "/" + (ws ? ws : "_main") + "/tests/verbs/verbs_probe";
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  char self[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string(".");
  return dir.substr(0, dir.rfind('/')) + "/verbs_probe";
}

// Runs verbs_probe with `args`; returns its exit code, *out = stdout+stderr.
int RunProbe(const std::string& args, std::string* out) {
  const std::string cmd = ProbePath() + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  out->clear();
  char buf[512];
  for (size_t k; (k = fread(buf, 1, sizeof buf, p)) > 0;) out->append(buf, k);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST_F(DeviceSelectionTest, ProbeWithTheDeviceNameWorks) {
  std::string out;
  ASSERT_EQ(RunProbe("--device=" + port_.device, &out), 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "device " + port_.device + " port " + std::to_string(port_.port))) << out;
  ASSERT_EQ(RunProbe("--device " + port_.device + " --port=" + std::to_string(port_.port) + " --gid-index=auto", &out),
            0)
      << out;
}

TEST_F(DeviceSelectionTest, ProbeWithAMissingPortOrDeviceIsAClearError) {
  std::string out;
  // rxe has one port; port 2 does not exist and must not fall back to port 1.
  EXPECT_EQ(RunProbe("--device=" + port_.device + " --port=2", &out), 1) << out;
  EXPECT_TRUE(absl::StrContains(out, "port 2")) << out;
  EXPECT_TRUE(absl::StrContains(out, "FAILED_PRECONDITION")) << out;
  EXPECT_FALSE(absl::StrContains(out, "device " + port_.device + " port 1")) << out;  // no silent fallback
  EXPECT_EQ(RunProbe("--device=nosuch", &out), 1) << out;
  EXPECT_TRUE(absl::StrContains(out, "no RDMA device named 'nosuch'")) << out;
  EXPECT_TRUE(absl::StrContains(out, port_.device)) << out;  // lists what exists
  EXPECT_EQ(RunProbe("--port=0", &out), 2) << out;
  EXPECT_TRUE(absl::StrContains(out, "--port=0")) << out;
}

TEST_F(DeviceSelectionTest, ExplicitPortIsExactlyThatPort) {
  FabricOptions o;
  o.kind = FabricKind::kVerbs;
  o.port = port_.port;
  auto p = SelectPort(o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->port, port_.port);
  o.port = 2;
  absl::Status s = SelectPort(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "requested RDMA port 2")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "has no port 2")) << s;
  s = OpenVerbsFabric(o).status();  // the fabric open path gives the same error
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

}  // namespace
}  // namespace rdma::verbs
