#!/usr/bin/env python3
"""Builds monitord's Debian or RPM packages from the tree and checks what they hold.

  check_packages.py deb --out DIR --version V [--quick]   scripts/build-deb, then lintian and
                                                         contents
  check_packages.py rpm --out DIR --version V [--quick]   scripts/build-rpm --nodeps, then
                                                         contents

--quick: the packages are compiled without debugging information, the Debian ones at -O1 and
the RPM ones at -O0 (the build scripts' --quick say why), in 60 to 80 % of the time; what they
hold and do is the same.

Both: the version of the package is the project's (meson.build) and each package holds the
files it must (the daemon, monctl, the units, sysusers.d and tmpfiles.d, the configuration,
the man pages; the exporter, its units and monitord-exporter(8); the library; the header,
pkg-config file and libmonitor(3)). deb: lintian reports no error and no warning
(informational and pedantic tags are printed: the note of the change explains them), the
configuration is a conffile, monitord's maintainer scripts enable its socket and service and
create the group, and monitord-exporter's enable its socket. rpm: the configuration is
%config(noreplace), the scriptlets create the group. Both: the library's examples build
against the unpacked development packages alone (the C one with libmonitor.pc and the shared
library, the C++ one with the installed headers and libmonitor++.pc) and run.
Exit status 0 when all holds, 1 otherwise, 77 (skip) without the packaging tools.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# package -> files it must hold (suffixes of the paths; man pages may be compressed)
DEB_FILES = {
    "monitord": ["/usr/sbin/monitord", "/usr/bin/monctl", "/lib/systemd/system/monitord.service",
                 "/lib/systemd/system/monitord.socket", "/usr/lib/sysusers.d/monitord.conf",
                 "/usr/lib/tmpfiles.d/monitord.conf", "/etc/monitord/monitord.conf",
                 "/usr/share/man/man1/monctl.1.gz", "/usr/share/man/man5/monitord.conf.5.gz",
                 "/usr/share/man/man8/monitord.8.gz", "/usr/share/doc/monitord/copyright",
                 "/usr/share/bash-completion/completions/monctl",
                 "/usr/share/zsh/vendor-completions/_monctl",
                 "/usr/share/fish/vendor_completions.d/monctl.fish"],
    "monitord-exporter": ["/usr/sbin/monitord-exporter",
                          "/lib/systemd/system/monitord-exporter.service",
                          "/lib/systemd/system/monitord-exporter.socket",
                          "/usr/share/man/man8/monitord-exporter.8.gz",
                          "/usr/share/monitord/prometheus/monitord-alerts.yml",
                          "/usr/share/monitord/prometheus/monitord-rules.yml",
                          "/usr/share/monitord/grafana/monitord.json",
                          "/usr/share/doc/monitord-exporter/copyright"],
    "libmonitor0": ["/libmonitor.so.0"],
    "libmonitor-dev": ["/usr/include/mon.h", "/usr/include/monitor/perf/perf_session.hpp",
                       "/usr/include/monitor/status.hpp", "/libmonitor.so", "/libmonitor.a",
                       "/pkgconfig/libmonitor.pc", "/pkgconfig/libmonitor++.pc",
                       "/usr/share/man/man3/libmonitor.3.gz"],
}
RPM_FILES = {
    "monitord": ["/usr/sbin/monitord", "/usr/bin/monctl", "/systemd/system/monitord.service",
                 "/systemd/system/monitord.socket", "/sysusers.d/monitord.conf",
                 "/tmpfiles.d/monitord.conf", "/etc/monitord/monitord.conf",
                 "/man1/monctl.1", "/man5/monitord.conf.5", "/man8/monitord.8",
                 "/usr/share/bash-completion/completions/monctl",
                 "/usr/share/zsh/site-functions/_monctl",
                 "/usr/share/fish/vendor_completions.d/monctl.fish"],
    "monitord-exporter": ["/usr/sbin/monitord-exporter",
                          "/systemd/system/monitord-exporter.service",
                          "/systemd/system/monitord-exporter.socket",
                          "/man8/monitord-exporter.8",
                          "/monitord/prometheus/monitord-alerts.yml",
                          "/monitord/prometheus/monitord-rules.yml",
                          "/monitord/grafana/monitord.json"],
    "libmonitor": ["/libmonitor.so.0"],
    "libmonitor-devel": ["/usr/include/mon.h", "/usr/include/monitor/perf/perf_session.hpp",
                         "/usr/include/monitor/status.hpp", "/libmonitor.so", "/libmonitor.a",
                         "/pkgconfig/libmonitor.pc", "/pkgconfig/libmonitor++.pc",
                         "/man3/libmonitor.3"],
}

problems = []


def problem(text):
    problems.append(text)
    print(f"FAILED: {text}", flush=True)


def holds(listing, suffix):
    return any(path.endswith(suffix) or path.endswith(suffix + ".gz") for path in listing)


def check_files(package, listing, expected):
    for suffix in expected:
        if not holds(listing, suffix):
            problem(f"{package} lacks {suffix}")


def out(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def build_examples(root):
    """Builds and runs the examples against the development files unpacked under root."""
    pcs = glob.glob(os.path.join(root, "usr", "lib*", "**", "libmonitor++.pc"), recursive=True)
    if not pcs:
        problem("no libmonitor++.pc to build the examples with")
        return
    pcdir = os.path.dirname(pcs[0])
    env = dict(os.environ, PKG_CONFIG_PATH=pcdir)
    # The .pc files say prefix=/usr: point it at the unpacked tree.
    define = ["--define-variable=prefix=" + os.path.join(root, "usr")]
    libdir = os.path.dirname(pcdir)
    examples = [("mon_perf", ["cc"], "mon_perf.c", "libmonitor"),
                ("monitor_counts", ["c++", "-std=c++23"], "monitor_counts.cpp", "libmonitor++")]
    for name, compiler, source, pc in examples:
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", *define, pc], env=env,
                               capture_output=True, text=True)
        if flags.returncode != 0:
            problem(f"pkg-config {pc}: {flags.stderr.strip()}")
            continue
        exe = os.path.join(root, name)
        cmd = [*compiler, os.path.join(TOP, "examples", source), "-o", exe,
               *flags.stdout.split()]
        built = subprocess.run(cmd, capture_output=True, text=True)
        if built.returncode != 0:
            problem(f"{source} does not build against the package: {' '.join(cmd)}\n"
                    + built.stderr[-3000:])
            continue
        run_env = dict(os.environ, LD_LIBRARY_PATH=libdir)
        if pc == "libmonitor":
            # The C program must load the packaged shared library, not an installed one.
            ldd = subprocess.run(["ldd", exe], capture_output=True, text=True, env=run_env)
            loaded = re.search(r"libmonitor\.so\.0 => (\S+)", ldd.stdout)
            if not loaded or not loaded.group(1).startswith(root):
                problem(f"{name} does not load the packaged libmonitor.so.0:\n{ldd.stdout}")
                continue
        ran = subprocess.run([exe, "200"], capture_output=True, text=True, timeout=60,
                             env=run_env)
        if ran.returncode != 0:
            problem(f"{name} built against the package exited {ran.returncode}: "
                    + (ran.stderr or ran.stdout)[-2000:])
            continue
        print(f"{source} built with `pkg-config {pc}` and ran:\n  "
              + ran.stdout.strip().replace("\n", "\n  "), flush=True)


def check_deb(args):
    debs = sorted(glob.glob(os.path.join(args.out, "*.deb")))
    for name, expected in DEB_FILES.items():
        found = [d for d in debs if os.path.basename(d).startswith(name + "_")]
        if not found:
            problem(f"no {name} package built")
            continue
        deb = found[0]
        version = out("dpkg-deb", "-f", deb, "Version").strip()
        if version != args.version:
            problem(f"{name} has version {version}, the project {args.version}")
        # "perms owner size date time ./path" and, for links, " -> target"
        listing = [line.split(None, 5)[5].split(" -> ")[0].lstrip(".")
                   for line in out("dpkg-deb", "-c", deb).splitlines()]
        check_files(name, listing, expected)
        print(f"{os.path.basename(deb)}: {len(listing)} entries, "
              f"{os.path.getsize(deb) // 1024} KiB", flush=True)
        if name.startswith("libmonitor"):
            subprocess.run(["dpkg-deb", "-x", deb, args.root], check=True)
        if name == "monitord":
            control = subprocess.run(["dpkg-deb", "--ctrl-tarfile", deb], capture_output=True,
                                     check=True).stdout
            files = subprocess.run(["tar", "-xO", "./conffiles", "./preinst", "./postinst"],
                                   input=control,
                                   capture_output=True, check=False).stdout.decode()
            if "/etc/monitord/monitord.conf" not in files:
                problem("monitord: /etc/monitord/monitord.conf is not a conffile")
            for what in ("monitord.socket", "monitord.service", "systemd-sysusers",
                         "systemd-tmpfiles"):
                if what not in files:
                    problem(f"monitord's postinst does not mention {what}")
        if name == "monitord-exporter":
            control = subprocess.run(["dpkg-deb", "--ctrl-tarfile", deb], capture_output=True,
                                     check=True).stdout
            postinst = subprocess.run(["tar", "-xO", "./postinst"], input=control,
                                      capture_output=True, check=False).stdout.decode()
            # deb-systemd-helper enables the socket, deb-systemd-invoke starts it.
            if not re.search(r"deb-systemd-helper[^\n]* enable [^\n]*"
                             r"'?monitord-exporter\.socket'?", postinst):
                problem("monitord-exporter's postinst does not enable monitord-exporter.socket")
            if not re.search(r"deb-systemd-invoke[^\n]*monitord-exporter\.socket", postinst):
                problem("monitord-exporter's postinst does not start monitord-exporter.socket")
    build_examples(args.root)
    report = open(os.path.join(args.out, "lintian.txt")).read()
    tags = [l for l in report.splitlines() if re.match(r"^[EWIPXO]: ", l)]
    print("lintian:" + ("".join(f"\n  {t}" for t in tags) if tags else " no tags"))
    for t in tags:
        if t.startswith(("E: ", "W: ")):
            problem(f"lintian: {t}")


def check_rpm(args):
    rpms = sorted(glob.glob(os.path.join(args.out, "*.rpm")))
    for name, expected in RPM_FILES.items():
        found = [r for r in rpms
                 if re.match(re.escape(name) + r"-\d", os.path.basename(r))]
        if not found:
            problem(f"no {name} package built")
            continue
        rpm = found[0]
        version = out("rpm", "-qp", "--qf", "%{VERSION}", rpm).strip()
        if version != args.version:
            problem(f"{name} has version {version}, the project {args.version}")
        listing = out("rpm", "-qlp", rpm).splitlines()
        check_files(name, listing, expected)
        print(f"{os.path.basename(rpm)}: {len(listing)} files, "
              f"{os.path.getsize(rpm) // 1024} KiB", flush=True)
        if name.startswith("libmonitor"):
            cpio = subprocess.run(["rpm2cpio", rpm], capture_output=True, check=True).stdout
            subprocess.run(["cpio", "-idm", "--quiet", "-D", args.root], input=cpio,
                           check=True)
        if name == "monitord":
            configs = out("rpm", "-qcp", rpm)
            if "/etc/monitord/monitord.conf" not in configs:
                problem("monitord: /etc/monitord/monitord.conf is not %config")
            scripts = out("rpm", "-qp", "--scripts", rpm)
            if "g monitor" not in scripts:
                problem("monitord's scriptlets do not create the group monitor")
    build_examples(args.root)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=["deb", "rpm"])
    p.add_argument("--out", required=True)
    p.add_argument("--version", required=True, help="the project's version")
    p.add_argument("--quick", action="store_true",
                   help="compile the packages faster, for a test of the packaging")
    args = p.parse_args()
    tools = {"deb": ["dpkg-buildpackage", "dh", "lintian"],
             "rpm": ["rpmbuild", "rpm", "rpm2cpio", "cpio"]}
    for tool in tools[args.kind]:
        if shutil.which(tool) is None:
            print(f"SKIP: {tool} is not installed (scripts/bootstrap --test installs it)")
            return SKIP
    t0 = time.monotonic()
    build = [os.path.join(TOP, "scripts", f"build-{args.kind}")]
    if args.kind == "rpm":
        build.append("--nodeps")  # the build dependencies are Debian's packages here
    if args.quick:
        build.append("--quick")
    if subprocess.run(build + [args.out]).returncode != 0:
        print("FAILED: the package build failed")
        return 1
    print(f"built in {time.monotonic() - t0:.0f} s", flush=True)
    with tempfile.TemporaryDirectory(prefix="monitord-pkg-") as root:
        args.root = root  # where the library packages are unpacked
        (check_deb if args.kind == "deb" else check_rpm)(args)
    print(f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
