#!/bin/sh
echo "bazel coverage is not supported offline; build with --copt=--coverage --linkopt=--coverage and use gcovr" >&2
exit 1
