"""What the VM tests share: finding Debian's kernel with the modules a test needs, an
initramfs with busybox, those modules and an /init script, and booting it under qemu (TCG)
while watching the console for "VMTEST: NAME" marks."""
import glob
import os
import re
import shutil
import subprocess
import sys
import threading
import time

SKIP = 77  # meson's exit code for a skipped test


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(SKIP)


def require_tools(*tools):
    for tool in tools:
        if shutil.which(tool) is None:
            skip(f"{tool} is not installed (scripts/bootstrap --test installs it)")


def find_kernel(modules):
    """The newest readable /boot/vmlinuz-VERSION that has every module named, as
    (vmlinuz, {module: path}), or (None, None)."""
    for vmlinuz in sorted(glob.glob("/boot/vmlinuz-*"), reverse=True):
        version = vmlinuz[len("/boot/vmlinuz-"):]
        paths = {}
        for m in modules:
            found = glob.glob(f"/lib/modules/{version}/kernel/**/{m}.ko", recursive=True)
            if not found:
                break
            paths[m] = found[0]
        if len(paths) == len(modules) and os.access(vmlinuz, os.R_OK):
            return vmlinuz, paths
    return None, None


def with_dependencies(vmlinuz, modules):
    """The modules named and those they depend on (the kernel's modules.dep), each after what
    it needs, as [(name, path)]: the order in which to insmod them. None when one is missing."""
    version = vmlinuz[len("/boot/vmlinuz-"):]
    base = f"/lib/modules/{version}"
    deps = {}
    try:
        with open(os.path.join(base, "modules.dep")) as f:
            for line in f:
                module, _, needs = line.partition(":")
                deps[module] = needs.split()
    except OSError:
        return None
    by_name = {os.path.basename(m)[:-len(".ko")]: m for m in deps if m.endswith(".ko")}
    order = []

    def add(module):
        if module in order:
            return
        for d in deps.get(module, []):
            add(d)
        order.append(module)

    for name in modules:
        if name not in by_name:
            return None
        add(by_name[name])
    return [(os.path.basename(m)[:-len(".ko")].replace("-", "_"), os.path.join(base, m))
            for m in order]


def initramfs_root(work, init_script, modules, dirs=()):
    """A directory for the initramfs: busybox in /bin, the modules as /modules/NAME.ko, the
    script as /init, and the directories named. Returns its path."""
    root = os.path.join(work, "root")
    for d in ("bin", "modules", "proc", "sys", "dev", *dirs):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    shutil.copy(shutil.which("busybox"), os.path.join(root, "bin/busybox"))
    for name, path in modules.items():
        shutil.copy(path, os.path.join(root, "modules", f"{name}.ko"))
    shutil.copy(init_script, os.path.join(root, "init"))
    os.chmod(os.path.join(root, "init"), 0o755)
    return root


def pack_initramfs(root, image):
    """root as a newc cpio archive at image; returns image."""
    files = subprocess.run(["find", "."], cwd=root, capture_output=True, check=True).stdout
    with open(image, "wb") as f:
        subprocess.run(["cpio", "--quiet", "-o", "-H", "newc"], cwd=root, input=files,
                       stdout=f, check=True)
    return image


def boot(cmd, log_path, budget_s, echo_marks=False, kill_after=None):
    """Runs qemu (cmd) until it exits or budget_s pass, the console going to log_path; with
    kill_after=(NAME, SECONDS), kills it (the machine's power cut) SECONDS after the mark NAME.
    Returns (marks, lines, wall): the seconds since the start at which each "VMTEST: NAME"
    first appeared (and "KILL", when it was cut), the console's lines, and the VM's wall time."""
    start = time.monotonic()
    marks, lines = {}, []
    cut = None
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, errors="replace")

        def stop():  # also when the guest has gone silent
            print(f"  the VM ran for {budget_s} s: stopped", flush=True)
            proc.kill()

        timer = threading.Timer(budget_s, stop)
        timer.start()
        try:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                lines.append(line.rstrip())
                m = re.search(r"VMTEST: (\w+)", line)
                if m and m.group(1) not in marks:
                    marks[m.group(1)] = time.monotonic() - start
                    if echo_marks:
                        print(f"  {marks[m.group(1)]:6.1f} s  {line.strip()}", flush=True)
                    if kill_after and m.group(1) == kill_after[0]:

                        def power_off():
                            marks["KILL"] = time.monotonic() - start
                            proc.kill()

                        cut = threading.Timer(kill_after[1], power_off)
                        cut.start()
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        finally:
            timer.cancel()
            if cut is not None:
                cut.cancel()
    return marks, lines, time.monotonic() - start
