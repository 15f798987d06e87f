#!/usr/bin/env python3
"""libmonitor installed as a board's build takes it: `meson install` into a staging sysroot,
then a C program (the MON API's example) compiled by the cross compiler with nothing but
`pkg-config --static` pointed at that sysroot (PKG_CONFIG_SYSROOT_DIR, PKG_CONFIG_LIBDIR),
and run under the emulator, where it must print the loading as the example does.

    board_install.py BUILD_DIR CC EXAMPLE_SOURCE CHECK_EXAMPLE EMULATOR...
"""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

build_dir, cc, example, check_example = sys.argv[1:5]
emulator = sys.argv[5:]
pkg_config = shutil.which("pkg-config")
if pkg_config is None:
    print("pkg-config is not installed (Debian's pkg-config)")
    sys.exit(77)

with tempfile.TemporaryDirectory(prefix="monitord-sysroot-") as tmp:
    sysroot = pathlib.Path(tmp) / "sysroot"
    subprocess.run(["meson", "install", "-C", build_dir, "--no-rebuild", "--quiet",
                    "--destdir", str(sysroot)], check=True)
    pcs = sorted(sysroot.rglob("libmonitord.pc"))
    if len(pcs) != 1:
        print(f"FAILED: expected one libmonitord.pc under {sysroot}, found {pcs}")
        sys.exit(1)
    env = dict(os.environ, PKG_CONFIG_SYSROOT_DIR=str(sysroot),
               PKG_CONFIG_LIBDIR=str(pcs[0].parent), PKG_CONFIG_PATH="")
    flags = subprocess.run([pkg_config, "--static", "--cflags", "--libs", "libmonitord"],
                           env=env, check=True, capture_output=True, text=True).stdout.split()
    print("pkg-config --static --cflags --libs libmonitord:", " ".join(flags))
    outside = [f for f in flags if f.startswith(("-I/", "-L/")) and str(sysroot) not in f]
    if outside:
        print(f"FAILED: paths outside the sysroot: {outside}")
        sys.exit(1)
    program = pathlib.Path(tmp) / "mon_loading"
    subprocess.run([cc, "-static", example, "-o", str(program)] + flags, check=True)
    r = subprocess.run([check_example, "3"] + emulator + [str(program)])
    sys.exit(r.returncode)
