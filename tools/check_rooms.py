#!/usr/bin/env python3
"""Checks the include rule of allocator/src's rooms; exits 1 and names each breach.

    python3 tools/check_rooms.py [SRC_DIR]     (default: allocator/src beside this script)

The rooms and their order come from SRC_DIR/README.md, its numbered list of `room/` names,
bottom to top. The rule (the same README):
  - every file lies in a room, and every quoted include of a room's header names its room
    (only the generated build_config.h, and pagemap/, rbtree/ and pagemalloc/ headers, have
    none);
  - a declarations file (X.h) includes only declarations of its own room or of a lower one;
  - a definitions file (X_impl.h, X.cpp) may include any room's declarations, and no other
    room's definitions but through heap/allocator_impl.h, which gathers them all.
"""
import pathlib
import re
import sys

OUTSIDE = ("pagemap/", "rbtree/", "pagemalloc/")
UNROOMED = {"build_config.h"}
AGGREGATOR = "heap/allocator_impl.h"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE = re.compile(r"\.(h|cpp|c)$")


def rooms_of(readme):
    """The rooms in README's numbered list, bottom first."""
    rooms = re.findall(r"^\d+\.\s+`([a-z_]+)/`", readme.read_text(), re.M)
    if not rooms:
        sys.exit(f"{readme}: no numbered list of rooms (lines such as '1. `support/` ...')")
    return rooms


def is_definitions(name):
    return name.endswith("_impl.h") or name.endswith(".cpp") or name.endswith(".c")


def breaches(src):
    rank = {room: i for i, room in enumerate(rooms_of(src / "README.md"))}
    found = []
    for path in sorted(src.rglob("*")):
        if path.is_dir() or path.name == "README.md":
            continue
        relative = path.relative_to(src).as_posix()
        room = relative.split("/")[0] if "/" in relative else None
        if room not in rank:
            found.append(f"{relative}: not in a room listed in README.md")
            continue
        if not SOURCE.search(path.name):
            continue
        for line_number, line in enumerate(path.read_text().splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = match.group(1)
            where = f"{relative}:{line_number}: includes \"{target}\""
            if target in UNROOMED or target.startswith(OUTSIDE):
                continue
            target_room = target.split("/")[0] if "/" in target else None
            if target_room not in rank:
                found.append(f"{where}, which names no room")
                continue
            if not (src / target).is_file():
                found.append(f"{where}, which does not exist")
                continue
            higher = rank[target_room] > rank[room]
            if not is_definitions(path.name):
                if higher:
                    found.append(f"{where}: a declarations file of {room}/ reaches up to "
                                 f"{target_room}/")
                elif is_definitions(target):
                    found.append(f"{where}: a declarations file includes definitions")
            elif (is_definitions(target) and target_room != room
                  and relative != AGGREGATOR):
                found.append(f"{where}: another room's definitions (only {AGGREGATOR} "
                             f"gathers them)")
    return found


def main():
    default = pathlib.Path(__file__).resolve().parent.parent / "allocator" / "src"
    src = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else default
    found = breaches(src)
    for breach in found:
        print(breach)
    if found:
        print(f"{len(found)} breaches of the rooms' include rule ({src}/README.md)")
        return 1
    print(f"rooms: every include of {src} keeps the rule")
    return 0


if __name__ == "__main__":
    sys.exit(main())
