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
the man pages; the exporter, its units and monitord-exporter(8); the library; the headers under
/usr/include/monitord, the pkg-config files and libmonitord(3)), the units in the directory
systemd's pkg-config file names, nothing else directly in /usr/include and no file of
HPCToolkit's libmonitor's names (libmonitor.so*, libmonitor.a, monitor.h). deb: lintian
reports no error and no warning (informational and pedantic tags are printed: the note of
the change explains them), the configuration is a conffile, monitord's maintainer scripts
enable its socket and service and create the group, and monitord-exporter's enable its
socket. rpm: the configuration is
%config(noreplace), the scriptlets create the group. Both: the library's examples build
against the unpacked development packages alone (the C one with libmonitord.pc and the
shared library, the C++ one with the installed headers and libmonitord++.pc) and run, and a C
program that includes <mon.h>, as MON's programs do, builds with libmonitord.pc too.
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


def systemd_dir(variable, default):
    """A directory systemd's pkg-config file names, as the packages' build takes it."""
    r = subprocess.run(["pkg-config", f"--variable={variable}", "systemd"], capture_output=True,
                       text=True)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else default


UNITDIR = systemd_dir("systemdsystemunitdir", "/lib/systemd/system")
SYSUSERSDIR = systemd_dir("sysusersdir", "/usr/lib/sysusers.d")
TMPFILESDIR = systemd_dir("tmpfilesdir", "/usr/lib/tmpfiles.d")

# package -> files it must hold (suffixes of the paths; man pages may be compressed)
DEB_FILES = {
    "monitord": ["/usr/sbin/monitord", "/usr/bin/monctl", f"{UNITDIR}/monitord.service",
                 f"{UNITDIR}/monitord.socket", f"{SYSUSERSDIR}/monitord.conf",
                 f"{TMPFILESDIR}/monitord.conf", "/etc/monitord/monitord.conf",
                 "/usr/share/man/man1/monctl.1.gz", "/usr/share/man/man5/monitord.conf.5.gz",
                 "/usr/share/man/man8/monitord.8.gz", "/usr/share/doc/monitord/copyright",
                 "/usr/share/bash-completion/completions/monctl",
                 "/usr/share/zsh/vendor-completions/_monctl",
                 "/usr/share/fish/vendor_completions.d/monctl.fish"],
    "monitord-exporter": ["/usr/sbin/monitord-exporter",
                          f"{UNITDIR}/monitord-exporter.service",
                          f"{UNITDIR}/monitord-exporter.socket",
                          "/usr/share/man/man8/monitord-exporter.8.gz",
                          "/usr/share/monitord/prometheus/monitord-alerts.yml",
                          "/usr/share/monitord/prometheus/monitord-rules.yml",
                          "/usr/share/monitord/grafana/monitord.json",
                          "/usr/share/doc/monitord-exporter/copyright"],
    "libmonitord0": ["/libmonitord.so.0"],
    "libmonitord-dev": ["/usr/include/monitord/mon.h",
                        "/usr/include/monitord/monitor/perf/perf_session.hpp",
                        "/usr/include/monitord/monitor/status.hpp", "/libmonitord.so",
                        "/libmonitord.a", "/pkgconfig/libmonitord.pc",
                        "/pkgconfig/libmonitord++.pc", "/usr/share/man/man3/libmonitord.3.gz"],
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
    "libmonitord": ["/libmonitord.so.0"],
    "libmonitord-devel": ["/usr/include/monitord/mon.h",
                          "/usr/include/monitord/monitor/perf/perf_session.hpp",
                          "/usr/include/monitord/monitor/status.hpp", "/libmonitord.so",
                          "/libmonitord.a", "/pkgconfig/libmonitord.pc",
                          "/pkgconfig/libmonitord++.pc", "/man3/libmonitord.3"],
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
    # The headers in a directory of their own; nothing of HPCToolkit's libmonitor's names.
    top = {p.split("/")[3] for p in listing if p.startswith("/usr/include/")} - {"", "monitord"}
    for name in sorted(top):
        problem(f"{package} puts /usr/include/{name} outside /usr/include/monitord")
    for path in listing:
        if re.search(r"/(libmonitor\.(so|a)\b[^/]*|monitor\.h)$", path):
            problem(f"{package} holds {path}, a name of HPCToolkit's libmonitor")


def out(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def build_examples(root):
    """Builds and runs the examples against the development files unpacked under root."""
    pcs = glob.glob(os.path.join(root, "usr", "lib*", "**", "libmonitord++.pc"), recursive=True)
    if not pcs:
        problem("no libmonitord++.pc to build the examples with")
        return
    pcdir = os.path.dirname(pcs[0])
    env = dict(os.environ, PKG_CONFIG_PATH=pcdir)
    # The .pc files say prefix=/usr: point it at the unpacked tree.
    define = ["--define-variable=prefix=" + os.path.join(root, "usr")]
    libdir = os.path.dirname(pcdir)
    # A program of MON's, which includes <mon.h>: the .pc file's -I${includedir}/monitord.
    mon_program = os.path.join(root, "mon_program.c")
    with open(mon_program, "w") as f:
        f.write('#include <mon.h>\n#include <stdio.h>\n'
                'int main(void) { MON_status s = MON_initialize();\n'
                '  printf("MON_initialize: %s\\n", MON_status_name(s));\n'
                '  return s == MON_SUCCESS && MON_shutdown() == MON_SUCCESS ? 0 : 1; }\n')
    examples = [("mon_perf", ["cc"], os.path.join(TOP, "examples", "mon_perf.c"), "libmonitord"),
                ("mon_program", ["cc"], mon_program, "libmonitord"),
                ("monitor_counts", ["c++", "-std=c++23"],
                 os.path.join(TOP, "examples", "monitor_counts.cpp"), "libmonitord++")]
    for name, compiler, source, pc in examples:
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", *define, pc], env=env,
                               capture_output=True, text=True)
        if flags.returncode != 0:
            problem(f"pkg-config {pc}: {flags.stderr.strip()}")
            continue
        exe = os.path.join(root, name)
        cmd = [*compiler, source, "-o", exe,
               *flags.stdout.split()]
        built = subprocess.run(cmd, capture_output=True, text=True)
        if built.returncode != 0:
            problem(f"{source} does not build against the package: {' '.join(cmd)}\n"
                    + built.stderr[-3000:])
            continue
        run_env = dict(os.environ, LD_LIBRARY_PATH=libdir)
        if pc == "libmonitord":
            # The C program must load the packaged shared library, not an installed one.
            ldd = subprocess.run(["ldd", exe], capture_output=True, text=True, env=run_env)
            loaded = re.search(r"libmonitord\.so\.0 => (\S+)", ldd.stdout)
            if not loaded or not loaded.group(1).startswith(root):
                problem(f"{name} does not load the packaged libmonitord.so.0:\n{ldd.stdout}")
                continue
        ran = subprocess.run([exe, "200"], capture_output=True, text=True, timeout=60,
                             env=run_env)
        if ran.returncode != 0:
            problem(f"{name} built against the package exited {ran.returncode}: "
                    + (ran.stderr or ran.stdout)[-2000:])
            continue
        print(f"{os.path.basename(source)} built with `pkg-config {pc}` and ran:\n  "
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
        if name.startswith("libmonitord"):
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
        if name.startswith("libmonitord"):
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
