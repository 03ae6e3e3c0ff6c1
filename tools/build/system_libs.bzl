"""Repository rule exposing Debian system libraries as Bazel cc_library targets.

Headers come from /usr/include (the compiler's default search path), so each
target only carries link flags, computed once by pkg-config. A missing package
fails the build at once with the apt-get line that fixes it; nothing is ever
downloaded.
"""

# name -> (pkg-config modules, literal link flags, probe header, Debian package)
_LIBS = {
    "ibverbs": (["libibverbs"], [], "infiniband/verbs.h", "libibverbs-dev"),
    "rdmacm": (["librdmacm"], [], "rdma/rdma_cma.h", "librdmacm-dev"),
    "absl": ([
        "absl_status",
        "absl_statusor",
        "absl_strings",
        "absl_str_format",
        "absl_flat_hash_map",
        "absl_flat_hash_set",
        "absl_hash",
        "absl_synchronization",
        "absl_time",
        "absl_random_random",
        "absl_span",
        "absl_flags",
        "absl_flags_parse",
        "absl_inlined_vector",
    ], [], "absl/status/status.h", "libabsl-dev"),
    "gtest": (["gtest"], [], "gtest/gtest.h", "libgtest-dev"),
    "gtest_main": (["gtest_main"], [], "gtest/gtest.h", "libgtest-dev"),
    "gmock": (["gmock"], [], "gmock/gmock.h", "libgmock-dev"),
    "benchmark": (["benchmark"], [], "benchmark/benchmark.h", "libbenchmark-dev"),
    "benchmark_main": ([], ["-lbenchmark_main", "-lbenchmark"], "benchmark/benchmark.h", "libbenchmark-dev"),
    "boost_program_options": ([], ["-lboost_program_options"], "boost/program_options.hpp", "libboost-program-options-dev"),
    "boost_lockfree": ([], [], "boost/lockfree/queue.hpp", "libboost-dev"),
    "nlohmann_json": ([], [], "nlohmann/json.hpp", "nlohmann-json3-dev"),
}

def _system_libs_impl(rctx):
    build = ['package(default_visibility = ["//visibility:public"])', ""]
    for name, (modules, literal, header, package) in _LIBS.items():
        if not rctx.path("/usr/include/" + header).exists:
            fail("missing /usr/include/%s: run `apt-get install -y %s` (or tools/setup_deps.sh)" % (header, package))
        flags = list(literal)
        if modules:
            res = rctx.execute(["pkg-config", "--libs"] + modules)
            if res.return_code != 0:
                fail("pkg-config --libs %s failed: %s\nrun `apt-get install -y %s pkg-config`" % (" ".join(modules), res.stderr, package))
            flags += res.stdout.strip().split(" ")
        flags.append("-pthread")
        build.append("cc_library(name = %r, linkopts = %r)" % (name, [f for f in flags if f]))
    rctx.file("BUILD", "\n".join(build) + "\n")
    rctx.file("WORKSPACE", "")

system_libs = repository_rule(
    implementation = _system_libs_impl,
    local = True,
    environ = ["PKG_CONFIG_PATH"],
)
