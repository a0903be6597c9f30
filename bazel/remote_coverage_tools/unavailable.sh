#!/bin/sh
echo "coverage tools are not available in this offline Bazel set-up" >&2
exit 1
