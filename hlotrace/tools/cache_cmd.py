"""``hlotrace cache``: the persistent compile cache's directory, entries, size and counts;
``hlotrace cache clear`` empties it."""

from __future__ import annotations

import json
import sys

DESCRIPTION = """\
Show the persistent compile cache: its directory, how many compiled executables it holds,
their size against the cap, and the hits, misses and rejected entries counted by every
process that used the directory since it was last cleared (persisted in its stats.json;
hlotrace.metrics() has one process's own). 'hlotrace cache clear' deletes every entry and
the counts. The cache is on by default in ~/.cache/hlotrace ($XDG_CACHE_HOME/hlotrace);
HLOTRACE_CACHE_DIR=DIR moves it, HLOTRACE_CACHE_DIR=off turns it off, and
HLOTRACE_CACHE_MAX_BYTES (default 1 GiB) caps it, least recently used entries going first.

The cache holds machine code that hlotrace loads and runs: whoever can write to the
directory can run code in your processes. Keep it private."""

EPILOG = """\
examples:
  hlotrace cache
  hlotrace cache --json
  hlotrace cache clear
  HLOTRACE_CACHE_DIR=/tmp/hc hlotrace cache"""


def add_parser(sub, formatter) -> None:
    parser = sub.add_parser(
        "cache",
        help="show or clear the persistent compile cache",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=formatter,
    )
    parser.add_argument("action", nargs="?", choices=("show", "clear"), default="show", help="show (default) or clear")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of lines")
    parser.set_defaults(handler=run)


def cache_report() -> dict:
    import hlotrace.runtime.cache as cache  # lazy: loads runtime.cache (7 modules)

    root = cache.directory()
    if root is None:
        return {"directory": None, "enabled": False}
    found = cache.entries(root)
    counts = cache.persisted_counts(root)
    lookups = counts["hits"] + counts["misses"]
    return {
        "directory": str(root),
        "enabled": True,
        "exists": root.is_dir(),
        "entries": len(found),
        "bytes": sum(size for _, size, _ in found),
        "max_bytes": cache.max_bytes(),
        "hits": counts["hits"],
        "misses": counts["misses"],
        "rejected": counts["errors"],
        "hit_rate": counts["hits"] / lookups if lookups else None,
        "counts": "persisted: every process since the last clear",
    }


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def run(args) -> int:
    import hlotrace.runtime.cache as cache  # lazy: loads runtime.cache (7 modules)

    if args.action == "clear":
        root = cache.directory()
        if root is None:
            print("compile cache is off (HLOTRACE_CACHE_DIR=off): nothing to clear")
            return 0
        removed = cache.clear(root)
        print(f"removed {removed} entr{'y' if removed == 1 else 'ies'} from {root}")
        return 0
    report = cache_report()
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
        return 0
    if not report["enabled"]:
        print("compile cache: off (HLOTRACE_CACHE_DIR=off)")
        return 0
    rate = "" if report["hit_rate"] is None else f" ({report['hit_rate']:.0%} hits)"
    lines = [
        f"directory: {report['directory']}" + ("" if report["exists"] else "  (not created yet)"),
        f"entries:   {report['entries']}",
        f"size:      {_size(report['bytes'])} of {_size(report['max_bytes'])}",
        f"hits:      {report['hits']}",
        f"misses:    {report['misses']}{rate}",
        f"rejected:  {report['rejected']} (corrupted or unloadable entries, recompiled)",
        "(counts persisted in the directory: every process since the last clear)",
    ]
    print("\n".join(lines))
    return 0
