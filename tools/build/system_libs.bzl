"""Repository rule exposing Debian system libraries as Bazel cc_library targets.

Headers come from /usr/include (the compiler's default search path), so most
targets only carry link flags, computed once by pkg-config. A library whose
probe header is not under /usr/include (Debian's PMIx lives under
/usr/lib/<triplet>/pmix2) gets the pkg-config include directory holding that
header linked into this repository, with its top-level headers as `hdrs` and
the directory in `includes`. A missing package
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
    "tbb": (["tbb"], [], "oneapi/tbb/concurrent_queue.h", "libtbb-dev"),
    "nlohmann_json": ([], [], "nlohmann/json.hpp", "nlohmann-json3-dev"),
    "pmix": (["pmix"], [], "pmix.h", "libpmix-dev"),
    # Debian's C client ships no .pc file.
    "zookeeper": ([], ["-lzookeeper_mt"], "zookeeper/zookeeper.h", "libzookeeper-mt-dev"),
}

# The directory holding `header`: /usr/include, else one of the -I directories
# pkg-config gives for `modules`; None when neither has it.
def _header_dir(rctx, modules, header):
    if rctx.path("/usr/include/" + header).exists:
        return "/usr/include"
    if not modules:
        return None
    res = rctx.execute(["pkg-config", "--cflags-only-I"] + modules)
    if res.return_code != 0:
        return None
    for flag in res.stdout.strip().split(" "):
        if flag.startswith("-I") and rctx.path(flag[2:] + "/" + header).exists:
            return flag[2:]
    return None

def _system_libs_impl(rctx):
    build = ['package(default_visibility = ["//visibility:public"])', ""]
    for name, (modules, literal, header, package) in _LIBS.items():
        header_dir = _header_dir(rctx, modules, header)
        if header_dir == None:
            fail("missing /usr/include/%s: run `apt-get install -y %s` (or tools/setup_deps.sh)" % (header, package))
        flags = list(literal)
        if modules:
            res = rctx.execute(["pkg-config", "--libs"] + modules)
            if res.return_code != 0:
                fail("pkg-config --libs %s failed: %s\nrun `apt-get install -y %s pkg-config`" % (" ".join(modules), res.stderr, package))
            flags += res.stdout.strip().split(" ")
        flags.append("-pthread")
        linkopts = [f for f in flags if f]
        if header_dir == "/usr/include":
            build.append("cc_library(name = %r, linkopts = %r)" % (name, linkopts))
        else:
            rctx.symlink(header_dir, name + "_include")
            build.append("cc_library(name = %r, hdrs = glob([%r]), includes = [%r], linkopts = %r)" % (
                name,
                name + "_include/*.h",
                name + "_include",
                linkopts,
            ))
    rctx.file("BUILD", "\n".join(build) + "\n")
    rctx.file("WORKSPACE", "")

system_libs = repository_rule(
    implementation = _system_libs_impl,
    local = True,
    environ = ["PKG_CONFIG_PATH"],
)
