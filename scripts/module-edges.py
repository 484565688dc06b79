#!/usr/bin/env python3
"""The module edges the architecture promises, checked on Package.swift as SwiftPM reads it.

A device links no server code: the Pixie device SDK (PixieDevice) and the `pixie` program must not depend,
directly or through another module, on pixie-server's modules, libpq, the transparency log's server half,
libmicrohttpd or libnats. Reads `swift package describe --type json` (no build); exits 1 naming every
forbidden edge and the path that reaches it. `--self-test` first checks the checker on a graph of its own that
has such an edge.

    python3 scripts/module-edges.py [--self-test]
"""
import json
import subprocess
import sys

DEVICE_MODULES = ["PixieDevice", "pixie"]
SERVER_ONLY = {
    "PixieServer": "pixie-server's services",
    "StoragePostgreSQL": "the PostgreSQL backend",
    "CPostgreSQL": "libpq",
    "TransparencyLog": "the transparency log's sequencer and store",
    "HTTPServer": "the HTTP server (libmicrohttpd)",
    "CMicroHTTPD": "libmicrohttpd",
    "CNATS": "libnats",
}


def forbidden_paths(graph, roots, forbidden):
    """Every (root, path) by which a root reaches a forbidden module; paths as lists of module names."""
    found = []
    for root in roots:
        seen = {root}
        stack = [[root]]
        while stack:
            path = stack.pop()
            for dependency in graph.get(path[-1], []):
                if dependency in seen:
                    continue
                seen.add(dependency)
                if dependency in forbidden:
                    found.append((root, path + [dependency]))
                stack.append(path + [dependency])
    return found


def package_graph():
    described = subprocess.run(
        ["swift", "package", "describe", "--type", "json"], check=True, capture_output=True, text=True
    ).stdout
    targets = json.loads(described)["targets"]
    return {target["name"]: target.get("target_dependencies", []) for target in targets}


def self_test():
    graph = {"PixieDevice": ["Storage", "Transparency"], "Storage": ["StoragePostgreSQL"], "StoragePostgreSQL": []}
    found = forbidden_paths(graph, ["PixieDevice"], SERVER_ONLY)
    assert found == [("PixieDevice", ["PixieDevice", "Storage", "StoragePostgreSQL"])], found
    assert forbidden_paths({"PixieDevice": ["Storage"], "Storage": []}, ["PixieDevice"], SERVER_ONLY) == []


def main():
    if "--self-test" in sys.argv:
        self_test()
    graph = package_graph()
    missing = [root for root in DEVICE_MODULES if root not in graph]
    if missing:
        print(f"module-edges: no target named {', '.join(missing)} in Package.swift", file=sys.stderr)
        return 1
    found = forbidden_paths(graph, DEVICE_MODULES, SERVER_ONLY)
    for root, path in found:
        print(
            f"module-edges: {root} links {SERVER_ONLY[path[-1]]} through {' -> '.join(path)}; a device links no "
            "server code: move what it needs into a module both ends share (PixieWire, Storage, Transparency)",
            file=sys.stderr,
        )
    if not found:
        print(f"module-edges: {', '.join(DEVICE_MODULES)} link no server module")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
