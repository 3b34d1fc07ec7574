#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Check packaging/kubernetes/ and packaging/container/ against gpuqd.

    check_deploy.py SRCDIR GPUQD        check; exit 1 with a list of what is wrong
    check_deploy.py --self-test SRCDIR GPUQD
                                        each planted mistake is reported

Every packaging/kubernetes/*.yaml parses (PyYAML's safe loader) into objects
with apiVersion, kind and metadata.name. The gpuqd DaemonSet's container
binds `--socket P` where P is the socket path gpuqd uses by itself (read
from the build: the one fixed path on the "# socket:" line of
`gpuqd --check-config /dev/null`) and systemd/gpuqd.socket's ListenStream=; P's folder is a
hostPath volume mounted at the same path; its probes ping P; its selector
matches its labels; it asks the device plugin for GPUs (or sets
NVIDIA_VISIBLE_DEVICES); it runs as a non-root uid and gid with a group
socket mode; its grace period outlasts gpuqd's drain_timeout (from the
build). Every client Pod mounts the same host folder at the same path, sets
GPUQ_SOCKET=P, is in gpuqd's group (supplementalGroups) and uses its
nodeSelector. packaging/container/Dockerfile installs the .deb and makes
the user with the DaemonSet's uid and gid.
"""

import copy
import glob
import os
import re
import subprocess
import sys

try:
    import yaml
except ImportError:
    sys.exit("check_deploy: PyYAML is missing (Debian: apt-get install python3-yaml)")


def gpuqd_facts(gpuqd):
    """(socket path, drain_timeout) that this gpuqd uses by default."""
    env = {"PATH": "/usr/bin:/bin"}  # no GPUQ_SOCKET, no XDG_RUNTIME_DIR
    p = subprocess.run([gpuqd, "--check-config", "/dev/null"], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, timeout=30)
    texts = [p.stdout]
    # Its "# socket: not set, so ..." line names the fixed path last (--help's
    # examples name other paths, so only this line is read).
    line = re.search(r"^# socket: .*$", p.stdout, re.M)
    paths = set(re.findall(r"(?<![\w$/.])(/[\w./-]+\.sock)\b", line.group(0) if line else ""))
    if len(paths) != 1:
        sys.exit("check_deploy: cannot tell gpuqd's socket path from its output (%s):\n%s" %
                 (sorted(paths) or "none", "\n".join(texts)))
    m = re.search(r"^drain_timeout = (\d+)", texts[0], re.M)
    if not m:
        sys.exit("check_deploy: no drain_timeout in gpuqd --check-config:\n" + texts[0])
    return paths.pop(), int(m.group(1))


def socket_unit_path(text):
    m = re.findall(r"^ListenStream=(\S+)", text, re.M)
    return m[0] if len(m) == 1 else None


def flag_value(argv, flag):
    """The value of --flag V or --flag=V in argv, or None."""
    argv = [str(a) for a in argv or []]
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a[len(flag) + 1:]
    return None


def env_value(container, name):
    for e in container.get("env") or []:
        if e.get("name") == name:
            return e.get("value")
    return None


def host_dir_mount(pod_spec, container, folder):
    """Error text, or None when container mounts host folder `folder` at `folder`."""
    vols = {v.get("name"): v for v in pod_spec.get("volumes") or []}
    for m in container.get("volumeMounts") or []:
        if m.get("mountPath", "").rstrip("/") != folder:
            continue
        hp = (vols.get(m.get("name")) or {}).get("hostPath")
        if not hp:
            return "volume %r at %s is not a hostPath" % (m.get("name"), folder)
        if hp.get("path", "").rstrip("/") != folder:
            return "the host folder mounted at %s is %s" % (folder, hp.get("path"))
        return None
    return "nothing is mounted at %s" % folder


def check(files, dockerfile, facts, unit_text):
    """files: {name: [objects]}. Returns a list of errors."""
    sock, drain = facts
    folder = os.path.dirname(sock)
    errs = []
    unit = socket_unit_path(unit_text)
    if unit != sock:
        errs.append("systemd/gpuqd.socket listens on %s, gpuqd's own path is %s" % (unit, sock))
    objs = []
    for name, docs in files.items():
        for d in docs:
            if d is None:
                continue
            if not isinstance(d, dict) or not all(
                    k in d for k in ("apiVersion", "kind", "metadata")) or not d["metadata"].get("name"):
                errs.append("%s: an object without apiVersion, kind or metadata.name" % name)
                continue
            objs.append((name, d))
    ds = [d for _, d in objs if d["kind"] == "DaemonSet" and d["metadata"]["name"] == "gpuqd"]
    if len(ds) != 1:
        return errs + ["want one DaemonSet named gpuqd, found %d" % len(ds)]
    ds = ds[0]
    tmpl = ds.get("spec", {}).get("template", {})
    spec = tmpl.get("spec", {})
    sel = ds.get("spec", {}).get("selector", {}).get("matchLabels") or {}
    labels = tmpl.get("metadata", {}).get("labels") or {}
    if not sel or any(labels.get(k) != v for k, v in sel.items()):
        errs.append("DaemonSet: selector %s does not match the pod labels %s" % (sel, labels))
    node_sel = spec.get("nodeSelector")
    if not node_sel:
        errs.append("DaemonSet: no nodeSelector (GPU nodes only)")
    if not spec.get("tolerations"):
        errs.append("DaemonSet: no tolerations (GPU nodes are often tainted)")
    grace = spec.get("terminationGracePeriodSeconds", 30)
    if grace <= drain:
        errs.append("DaemonSet: terminationGracePeriodSeconds %s does not outlast gpuqd's "
                    "drain_timeout %s" % (grace, drain))
    cs = [c for c in spec.get("containers") or [] if c.get("name") == "gpuqd"]
    if len(cs) != 1:
        return errs + ["DaemonSet: want one container named gpuqd"]
    c = cs[0]
    argv = list(c.get("command") or []) + list(c.get("args") or [])
    arg_sock = flag_value(argv, "--socket") or env_value(c, "GPUQ_SOCKET")
    if arg_sock != sock:
        errs.append("DaemonSet: gpuqd binds %s (--socket), gpuqd's own path is %s" % (arg_sock, sock))
    mode = flag_value(argv, "--socket-mode")
    if mode is not None and not (int(str(mode), 8) & 0o060 == 0o060):
        errs.append("DaemonSet: --socket-mode %s keeps the socket's group out" % mode)
    e = host_dir_mount(spec, c, folder)
    if e:
        errs.append("DaemonSet: " + e)
    for probe in ("livenessProbe", "readinessProbe"):
        cmd = ((c.get(probe) or {}).get("exec") or {}).get("command")
        if probe == "livenessProbe" and not cmd:
            errs.append("DaemonSet: no exec livenessProbe")
            continue
        if cmd:
            psock = flag_value(cmd, "--socket") or env_value(c, "GPUQ_SOCKET")
            if not any("gpuqctl" in str(a) for a in cmd) or psock != sock:
                errs.append("DaemonSet: %s %s does not ping %s" % (probe, cmd, sock))
    limits = (c.get("resources") or {}).get("limits") or {}
    if "nvidia.com/gpu" not in limits and not env_value(c, "NVIDIA_VISIBLE_DEVICES"):
        errs.append("DaemonSet: neither limits nvidia.com/gpu nor NVIDIA_VISIBLE_DEVICES")
    sc = dict(spec.get("securityContext") or {})
    sc.update(c.get("securityContext") or {})
    uid, gid = sc.get("runAsUser"), sc.get("runAsGroup")
    if not sc.get("runAsNonRoot") or not isinstance(uid, int) or not uid or not isinstance(gid, int):
        errs.append("DaemonSet: gpuqd must run as a non-root runAsUser and runAsGroup")
    if sc.get("allowPrivilegeEscalation") is not False:
        errs.append("DaemonSet: allowPrivilegeEscalation must be false")
    clients = [(n, d) for n, d in objs if d["kind"] == "Pod"]
    if not clients:
        errs.append("no client Pod example")
    for n, pod in clients:
        pspec = pod.get("spec", {})
        where = "%s: Pod %s" % (n, pod["metadata"]["name"])
        groups = (pspec.get("securityContext") or {}).get("supplementalGroups") or []
        if gid not in groups:
            errs.append("%s: supplementalGroups %s lack gpuqd's group %s" % (where, groups, gid))
        if pspec.get("nodeSelector") != node_sel:
            errs.append("%s: nodeSelector %s, gpuqd's is %s" % (where, pspec.get("nodeSelector"),
                                                              node_sel))
        for pc in pspec.get("containers") or []:
            e = host_dir_mount(pspec, pc, folder)
            if e:
                errs.append("%s: %s" % (where, e))
            if env_value(pc, "GPUQ_SOCKET") != sock:
                errs.append("%s: GPUQ_SOCKET is %s, not %s" % (where, env_value(pc, "GPUQ_SOCKET"),
                                                             sock))
    args = dict(re.findall(r"^ARG (GPUQ_[UG]ID)=(\d+)", dockerfile, re.M))
    if (args.get("GPUQ_UID"), args.get("GPUQ_GID")) != (str(uid), str(gid)):
        errs.append("Dockerfile: user gpuq is %s:%s, the DaemonSet runs as %s:%s" %
                    (args.get("GPUQ_UID"), args.get("GPUQ_GID"), uid, gid))
    if not re.search(r"apt-get install[^\n]*gpuq_\*\.deb", dockerfile):
        errs.append("Dockerfile: does not install the gpuq .deb")
    return errs


def load(src):
    files = {}
    for path in sorted(glob.glob(os.path.join(src, "packaging", "kubernetes", "*.yaml"))):
        with open(path) as f:
            try:
                files[os.path.relpath(path, src)] = list(yaml.safe_load_all(f))
            except yaml.YAMLError as e:
                sys.exit("check_deploy: %s does not parse: %s" % (path, e))
    if not files:
        sys.exit("check_deploy: no packaging/kubernetes/*.yaml")
    with open(os.path.join(src, "packaging", "container", "Dockerfile")) as f:
        dockerfile = f.read()
    with open(os.path.join(src, "systemd", "gpuqd.socket")) as f:
        unit = f.read()
    return files, dockerfile, unit


def self_test(files, dockerfile, facts, unit):
    def ds_of(fs):
        return next(d for docs in fs.values() for d in docs
                    if d and d.get("kind") == "DaemonSet")

    def gpuqd_c(fs):
        return ds_of(fs)["spec"]["template"]["spec"]["containers"][0]

    def pod_of(fs):
        return next(d for docs in fs.values() for d in docs if d and d.get("kind") == "Pod")

    def set_arg(fs, flag, value):
        a = gpuqd_c(fs)["args"]
        a[a.index(flag) + 1] = value

    def set_env(c, name, value):
        for e in c["env"]:
            if e["name"] == name:
                e["value"] = value

    def host_path(spec, value):
        for v in spec["volumes"]:
            if "hostPath" in v:
                v["hostPath"]["path"] = value

    mutations = [
        ("gpuqd --socket elsewhere", lambda fs: set_arg(fs, "--socket", "/run/gpuqd/gpuqd.sock")),
        ("DaemonSet hostPath elsewhere",
         lambda fs: host_path(ds_of(fs)["spec"]["template"]["spec"], "/var/run/gpuq2")),
        ("client hostPath elsewhere", lambda fs: host_path(pod_of(fs)["spec"], "/tmp/gpuq")),
        ("client GPUQ_SOCKET elsewhere",
         lambda fs: set_env(pod_of(fs)["spec"]["containers"][0], "GPUQ_SOCKET", "/tmp/gpuqd.sock")),
        ("client not in gpuqd's group",
         lambda fs: pod_of(fs)["spec"]["securityContext"].update(supplementalGroups=[1234])),
        ("probe pings another socket",
         lambda fs: gpuqd_c(fs)["livenessProbe"]["exec"]["command"].__setitem__(2, "/x.sock")),
        ("socket mode without the group", lambda fs: set_arg(fs, "--socket-mode", "0600")),
        ("grace period shorter than the drain",
         lambda fs: ds_of(fs)["spec"]["template"]["spec"].update(terminationGracePeriodSeconds=5)),
        ("no GPUs asked for", lambda fs: gpuqd_c(fs)["resources"].pop("limits")),
        ("selector does not match", lambda fs: ds_of(fs)["spec"]["selector"]["matchLabels"].update(
            app="other")),
        ("gpuqd as root", lambda fs: gpuqd_c(fs)["securityContext"].update(runAsUser=0)),
    ]
    ok = True
    for what, mutate in mutations:
        fs = copy.deepcopy(files)
        mutate(fs)
        errs = check(fs, dockerfile, facts, unit)
        ok &= bool(errs)
        print("self-test: %s: %s" % (what, errs[0] if errs else "NOT REPORTED"))
    for what, df, fc, un in (
            ("Dockerfile uid differs", dockerfile.replace("ARG GPUQ_UID=", "ARG GPUQ_UID=1"), facts,
             unit),
            ("gpuqd's own path differs", dockerfile, ("/run/gpuq/other.sock", facts[1]), unit),
            ("socket unit elsewhere", dockerfile, facts, unit.replace("ListenStream=/", "ListenStream=/x"))):
        errs = check(files, df, fc, un)
        ok &= bool(errs)
        print("self-test: %s: %s" % (what, errs[0] if errs else "NOT REPORTED"))
    clean = check(files, dockerfile, facts, unit)
    if clean:
        print("self-test: the unchanged files fail: %s" % clean)
    return 0 if ok and not clean else 1


def main():
    argv = sys.argv[1:]
    st = argv[:1] == ["--self-test"]
    if st:
        argv = argv[1:]
    if len(argv) != 2:
        sys.exit(__doc__)
    src, gpuqd = argv
    files, dockerfile, unit = load(src)
    facts = gpuqd_facts(gpuqd)
    if st:
        return self_test(files, dockerfile, facts, unit)
    errs = check(files, dockerfile, facts, unit)
    for e in errs:
        print("check_deploy: " + e)
    if not errs:
        print("check_deploy: %s: socket %s (gpuqd's own), drain_timeout %ds: ok" %
              (", ".join(files), facts[0], facts[1]))
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
