#!/usr/bin/env python3
"""Writes the gpu-labelled CTest entries of a build tree as a bash list a GPU bundle runs.

A GPU bundle (scripts/make_gpu_bundle.sh) carries binaries, not the build tree, so `ctest -L gpu`
cannot run on the device machine. This reads `ctest --show-only=json-v1 -L gpu` of BUILD and
writes one line per test for tests/gpu/run_bundle_ctest.sh:

    t NAME TIMEOUT_S WORKDIR_TAG ENV... -- COMMAND ARGS...

with the build tree's paths rewritten to the bundle's: BUILD/bin/X -> "$B"/bin/X, a script under
SRC/tests/gpu/ -> "$B"/tests/X (make_gpu_bundle.sh copies them), any other path under BUILD ->
"$OUT"/build/REST (a scratch folder of the run: gen-kernel caches). A command naming a binary
the bundle lacks, or a path of the build tree that is not one of these, is an error here (not a
surprise on the device). The multicast switches every entry sets are left out: the runner
exports them once.

Usage: bundle_ctest.py BUILD_DIR SRC_DIR BUNDLE_DIR OUT_FILE
"""
import json
import os
import shlex
import subprocess
import sys

ALWAYS = {"NCCL_NVLS_ENABLE=0", "TORCH_SYMM_MEM_DISABLE_MULTICAST=1", "NVSHMEM_DISABLE_NVLS=1"}


def rewrite(arg, build, src, bundle):
    """One argument with the build tree's and the checkout's paths made the bundle's."""
    if arg.startswith(build + "/bin/"):
        name = arg[len(build) + 5:]
        if not os.path.exists(os.path.join(bundle, "bin", name)):
            raise SystemExit(f"bundle_ctest.py: the bundle has no bin/{name} (a test runs it)")
        return '"$B"/bin/' + shlex.quote(name)
    if arg.startswith(src + "/tests/gpu/") and arg.endswith(".sh"):
        return '"$B"/tests/' + shlex.quote(os.path.basename(arg))
    if arg == "/usr/bin/bash" or arg == "/bin/bash":
        return "bash"
    for prefix in (build, src):
        if prefix + "/" in arg:
            head, rest = arg.split(prefix + "/", 1)
            if prefix == build:
                return shlex.quote(head) + '"$OUT"/build/' + shlex.quote(rest)
            raise SystemExit(f"bundle_ctest.py: a test names the checkout's {rest}, which the bundle does not carry")
    return shlex.quote(arg)


def main():
    if len(sys.argv) != 5:
        raise SystemExit(__doc__.strip().splitlines()[-1])
    build, src, bundle, out = (os.path.realpath(a) for a in sys.argv[1:5])
    listing = subprocess.run(["ctest", "--show-only=json-v1", "-L", "gpu"], cwd=build,
                             check=True, capture_output=True, text=True).stdout
    lines = []
    for test in json.loads(listing)["tests"]:
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        env = [e for e in props.get("ENVIRONMENT", []) if e not in ALWAYS]
        timeout = int(float(props.get("TIMEOUT", 600)))
        workdir = "nccl" if props.get("WORKING_DIRECTORY", "").endswith("/nccl") else "gpu"
        cmd = [rewrite(a, build, src, bundle) for a in test["command"]]
        envq = [rewrite(e, build, src, bundle) for e in env]
        lines.append(" ".join(["t", test["name"], str(timeout), workdir] + envq + ["--"] + cmd))
    with open(out, "w") as f:
        f.write("# gpu-labelled CTest entries of %s (scripts/bundle_ctest.py); run by run_ctest.sh\n" % build)
        f.write("\n".join(lines) + "\n")
    print(f"bundle_ctest.py: {len(lines)} tests in {out}")


if __name__ == "__main__":
    main()
