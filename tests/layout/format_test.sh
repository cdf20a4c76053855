#!/usr/bin/env bash
# The C++ sources are formatted as .clang-format says.
#
#   bash tests/layout/format_test.sh SOURCE_DIR
#
# Runs `clang-format --dry-run --Werror` over every .h, .cpp and .c file of allocator/,
# pagemap/, rbtree/, tests/ and benchmarks/ (the .in templates, which CMake fills in, aside):
# it prints each line that would change and fails if any would. `clang-format -i FILE`
# formats a file.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 SOURCE_DIR" >&2; exit 2; }
cd "$(realpath -e -- "$1")"
command -v clang-format >/dev/null || { echo "FAIL: clang-format is not installed"; exit 1; }
mapfile -t sources < <(find allocator pagemap rbtree tests benchmarks -type f \
                         \( -name '*.h' -o -name '*.cpp' -o -name '*.c' \) | sort)
[ "${#sources[@]}" -gt 100 ] || { echo "FAIL: only ${#sources[@]} sources found"; exit 1; }
clang-format --dry-run --Werror "${sources[@]}"
echo "format: ${#sources[@]} sources as .clang-format says ($(clang-format --version))"
