#!/usr/bin/env python3
"""The project's own small container images for tests on a real kubelet node, built from this
machine's Debian packages (busybox-static, gcc) and this directory alone: no base image, no
Docker. Each image is one gzip layer; the same inputs give the same digests (sorted tar entries,
fixed owners and mtimes, gzip without name or time).

Images (see IMAGES below; adding one is adding an entry):
  pause   /pause (pause.c, static): a pod sandbox that exits 0 on TERM/INT and reaps children
  web     busybox; /usr/local/bin/serve, as 1000:100, copies /srv to $WEB_ROOT (/tmp/www),
          serves it on $PORT (8888) and writes ready ("ok") there once httpd answers, after
          whoami (`id`) and hostname
  ahead   web under another name and digest (the pre-pull test's, pulled by no other test)
  tokens  web, plus a fresh random 32-hex-char token in /tmp/key (mode 600) before serving
          ($TOKEN_FILES), which is where the backend reads it (by exec) from a deic-dk image's
          first container
  NAME    with --bench-image NAME=BYTES only (outfit-bench/NAME:1 with --name-prefix outfit-bench):
          web serving on $PORT 80, plus a second layer of BYTES incompressible bytes
          (/var/filler, stored uncompressed), for the start-time benchmark's real pulls
  ssh     busybox and Debian's dropbear (with the libraries it loads): root logs in on 22 with a
          key of $AUTHORIZED_KEYS, never a password; host keys made at the first connection
  outfit  with --outfit-binary PATH only: that outfit binary as /usr/local/bin/outfit (the
          entrypoint, as in hack/image's image), the shared libraries `ldd` names for it (a test
          build is dynamic; the release image's is static), and the CA bundle; user 65532
  jupyterlab  with --jupyterlab-venv DIR only: JupyterLab from PyPI (jupyterlab.txt, by hash) in
          a venv of Debian's python3.11 at /opt/jupyter, with busybox; serves on 8888 with no
          token of its own, as 1000:100 (jupyterlab.py says why and what it holds)

usage: build.py --registry HOST:PORT [--name-prefix PREFIX] [--only NAME ...] [--outfit-binary PATH]
                [--jupyterlab-venv DIR]
       build.py --oci-archive DIR [--name-prefix PREFIX] [--only NAME ...] [--outfit-binary PATH]
                [--jupyterlab-venv DIR]
       build.py --jupyterlab-venv DIR      (only make the venv, from PyPI, if it is missing)

  --registry HOST:PORT  push each image as <prefix>/<name>:1 to http://HOST:PORT (Distribution API,
                        plain HTTP, no auth)
  --oci-archive DIR     write DIR/<name>.tar, an OCI image layout for `ctr -n k8s.io images import`
                        (the image is named <prefix>/<name>:1, normalized as the kubelet looks it
                        up: outfit-test/web:1 becomes docker.io/outfit-test/web:1)
  --name-prefix PREFIX  repository prefix, default outfit-test
  --only NAME ...       build only these images (default: all, outfit only with --outfit-binary)
  --outfit-binary PATH  the binary of the outfit image
  --jupyterlab-venv DIR the jupyterlab image's venv, made there first if missing or of another
                        lock (hack/control-plane/build.sh makes it in its cache)
  --bench-image NAME=BYTES  an image of that name and size (repeatable)

Both --registry and --oci-archive may be given. SOURCE_DATE_EPOCH sets the files' mtime (default
0). Each image's manifest digest is printed on stdout, one line per image.
"""

import argparse
import dataclasses
import functools
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

from jupyterlab import PREFIX as JUPYTER_PREFIX, make_venv, with_jupyterlab
from tree import Tree, file_with_parents, shared_libraries

HERE = os.path.dirname(os.path.abspath(__file__))
BUSYBOX = "/bin/busybox"  # Debian's busybox-static: statically linked, needs nothing else
TAG = "1"
HTTP_TIMEOUT = 10  # seconds, per request

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
MEDIA_LAYER_PLAIN = "application/vnd.oci.image.layer.v1.tar"

PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
JOVYAN = (1000, 100)  # uid, gid (group "users"), as in Jupyter's docker-stacks images

PASSWD = """\
root:x:0:0:root:/root:/bin/sh
jovyan:x:1000:100:jovyan:/home/jovyan:/bin/sh
"""
GROUP = """\
root:x:0:
users:x:100:jovyan
"""

# The entrypoint of web and tokens. PID 1 ignores TERM and INT without a handler, hence the
# trap: without it a pod would wait out its whole grace period before being killed.
SERVE = r"""#!/bin/sh
# Serves a copy of /srv over HTTP on $PORT and writes $root/ready once httpd listens, then
# $root/api/status as Jupyter Server's. Each file named in TOKEN_FILES (space-separated) first
# gets a fresh random token, readable only by us.
set -eu
port="${PORT:-8888}"
root="${WEB_ROOT:-/tmp/www}"

for file in ${TOKEN_FILES:-}; do
    token=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
    rm -f "$file"
    (umask 077 && printf '%s' "$token" >"$file")
done

mkdir -p "$root"
rm -f "$root/ready"
cp -R /srv/. "$root/"
id >"$root/whoami"
hostname >"$root/hostname"

busybox httpd -f -p "$port" -h "$root" &
pid=$!
trap 'kill "$pid" 2>/dev/null; exit 0' TERM INT

# Ready once a fresh file comes back over HTTP: a bare connect could reach another listener on
# the same port (host network, or another container of the pod) while our httpd fails to bind,
# and `timeout` is for such a listener that never answers.
probe=$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')
printf '%s' "$probe" >"$root/.probe"
until printf 'GET /.probe HTTP/1.0\r\n\r\n' | timeout 1 nc 127.0.0.1 "$port" 2>/dev/null |
    grep -q "$probe"; do
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "serve: httpd on port $port exited" >&2
        exit 1
    fi
    sleep 0.05
done
rm -f "$root/.probe"
printf ok >"$root/ready"

# Jupyter Server's /api/status, which the backend's idle culling asks (outfit.dev/activity-url):
# last_activity is when the server started, or now, every second, while BUSY is set.
mkdir -p "$root/api"
status() {
    printf '{"last_activity": "%s"}' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$root/api/status.new"
    mv "$root/api/status.new" "$root/api/status"
}
status
if [ -n "${BUSY:-}" ]; then
    while kill -0 "$pid" 2>/dev/null; do sleep 1; status; done &
fi
echo "serve: $root on port $port, ready"
wait "$pid"
"""


def index_page(image, what):
    return f"""<!doctype html>
<title>outfit test image: {image}</title>
<h1>outfit test image: {image}</h1>
<p>{what}</p>
<p>Built by tests/tools/node-images/build.py. <a href="ready">ready</a>,
<a href="whoami">whoami</a>, <a href="hostname">hostname</a>.</p>
"""


def base_tree(layer, image):
    """What every image holds: the usual directories, and users root and jovyan."""
    for path in ("/bin", "/dev", "/etc", "/home", "/proc", "/run", "/srv", "/sys", "/usr",
                 "/usr/local", "/usr/local/bin", "/var"):
        layer.dir(path)
    layer.dir("/root", mode=0o700)
    layer.dir("/tmp", mode=0o1777)
    layer.dir("/var/tmp", mode=0o1777)
    layer.dir("/home/jovyan", owner=JOVYAN)
    layer.file("/etc/passwd", PASSWD)
    layer.file("/etc/group", GROUP)


@functools.cache
def pause_binary():
    with tempfile.TemporaryDirectory(prefix="node-images-") as scratch:
        output = os.path.join(scratch, "pause")
        subprocess.run(["gcc", "-static", "-Os", "-s", "-o", output,
                        os.path.join(HERE, "pause.c")], check=True)
        with open(output, "rb") as binary:
            return binary.read()


@functools.cache
def busybox():
    """The binary and its applets' names."""
    with open(BUSYBOX, "rb") as binary:
        data = binary.read()
    listed = subprocess.run([BUSYBOX, "--list"], check=True, capture_output=True, text=True)
    # A symlink /bin/busybox -> busybox would replace the binary itself.
    applets = sorted(name for name in listed.stdout.split() if name != "busybox")
    return data, applets


def with_pause(layer, image):
    layer.file("/pause", pause_binary(), mode=0o755)


def with_busybox(layer, image):
    data, applets = busybox()
    layer.file("/bin/busybox", data, mode=0o755)
    for applet in applets:
        layer.symlink(f"/bin/{applet}", "busybox")


def with_web(what):
    """busybox, the serve script, and an index page saying which image this is and what."""
    def add(layer, image):
        with_busybox(layer, image)
        layer.file("/usr/local/bin/serve", SERVE, mode=0o755)
        layer.file("/srv/index.html", index_page(image, what))
    return add


CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def with_dynamic(binaries):
    """Each dynamic binary (host path, image path), with the shared libraries it loads."""
    def add(layer, image):
        libraries = set()
        for host, path in binaries:
            with open(host, "rb") as f:
                file_with_parents(layer, path, f.read(), 0o755)
            libraries.update(shared_libraries(host))
        for library in sorted(libraries):
            with open(library, "rb") as f:  # through any symlink: the file itself
                file_with_parents(layer, library, f.read(), 0o755)
    return add


def with_outfit(binary):
    """outfit as a test build makes it, with what a dynamic binary needs to start."""
    def add(layer, image):
        with_dynamic([(binary, "/usr/local/bin/outfit")])(layer, image)
        with open(CA_BUNDLE, "rb") as f:
            file_with_parents(layer, CA_BUNDLE, f.read(), 0o644)
    return add


DROPBEAR = "/usr/sbin/dropbear"  # Debian's dropbear-bin

# The entrypoint of ssh: root logs in with a key of $AUTHORIZED_KEYS, never a password; the host
# keys are made at the first connection (-R).
SSHD = r"""#!/bin/sh
set -eu
mkdir -p /root/.ssh /etc/dropbear
chmod 700 /root/.ssh
printf '%s\n' "${AUTHORIZED_KEYS:-}" >/root/.ssh/authorized_keys
chmod 600 /root/.ssh/authorized_keys
echo "sshd: dropbear on port ${PORT:-22}"
exec dropbear -R -F -E -s -p "${PORT:-22}"
"""


def with_ssh(layer, image):
    with_busybox(layer, image)
    with_dynamic([(DROPBEAR, DROPBEAR)])(layer, image)
    layer.file("/usr/local/bin/sshd", SSHD, mode=0o755)
    layer.file("/etc/shells", "/bin/sh\n")


@dataclasses.dataclass(frozen=True)
class Image:
    contents: tuple  # functions (layer, image name) adding files, after base_tree
    entrypoint: list
    cmd: list = None
    env: dict = dataclasses.field(default_factory=dict)  # besides PATH
    user: str = ""
    workdir: str = ""
    ports: tuple = ()  # "8888/tcp"
    # gzip's level: 9 for the small images; 1 for outfit's, a hundred megabytes of test build
    # that level 9 takes seconds over
    compression: int = 9
    # Bytes of a second layer of random data, stored uncompressed (gzip would gain nothing), so
    # that a pull moves that much: the start-time benchmark's images.
    filler: int = 0


WEB_SERVING = dict(entrypoint=["/usr/local/bin/serve"], user="%d:%d" % JOVYAN,
                   workdir="/home/jovyan", ports=("8888/tcp",))

IMAGES = {
    "pause": Image(contents=(with_pause,), entrypoint=["/pause"], user="65535:65535"),
    "web": Image(contents=(with_web("busybox httpd serving a copy of /srv."),), **WEB_SERVING),
    # The web image again under another name and digest, which only the pre-pull test launches:
    # no other test has had it pulled onto the node before the planner does.
    "ahead": Image(contents=(with_web("busybox httpd serving a copy of /srv; pulled ahead."),),
                   **WEB_SERVING),
    "tokens": Image(
        contents=(with_web("busybox httpd serving a copy of /srv; a fresh token in /tmp/key, "
                           "served nowhere."),),
        env={"TOKEN_FILES": "/tmp/key"}, **WEB_SERVING),
    # deic-dk's ssh: dropbear as root on 22, its keys from the pod's env.
    "ssh": Image(contents=(with_ssh,), entrypoint=["/usr/local/bin/sshd"], user="0:0",
                 workdir="/root", ports=("22/tcp",)),
}


def digest_of(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical_json(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


@dataclasses.dataclass
class Built:
    name: str
    layers: list  # blobs: a gzipped tar, then any uncompressed one
    config: bytes
    manifest: bytes

    @property
    def digest(self):
        return digest_of(self.manifest)

    @property
    def blobs(self):
        """What the manifest refers to, by digest."""
        blobs = {digest_of(layer): layer for layer in self.layers}
        blobs[digest_of(self.config)] = self.config
        return blobs


def bench_image(size):
    return Image(contents=(with_web("busybox httpd serving a copy of /srv; a filler layer."),),
                 entrypoint=["/usr/local/bin/serve"], env={"PORT": "80"}, user="%d:%d" % JOVYAN,
                 workdir="/home/jovyan", ports=("80/tcp",), filler=size)


def filler_layer(name, size, mtime):
    """/var/filler: `size` bytes from a generator seeded by the image's name (the same image, the
    same digest)."""
    import random
    layer = Tree(mtime)
    layer.file("/var/filler", random.Random(name).randbytes(size))
    return layer.tar()


def jupyterlab_image(venv):
    return Image(contents=(with_busybox, with_jupyterlab(venv)),
                 entrypoint=[f"{JUPYTER_PREFIX}/bin/python", "-m", "jupyterlab"],
                 env={"HOME": "/home/jovyan", "SHELL": "/bin/sh"}, user="%d:%d" % JOVYAN,
                 workdir="/home/jovyan", ports=("8888/tcp",), compression=1)


def outfit_image(binary):
    return Image(contents=(with_outfit(binary),), entrypoint=["/usr/local/bin/outfit"],
                 user="65532:65532", compression=1)


def build(name, mtime, spec):
    layer = Tree(mtime)
    for add in (base_tree, *spec.contents):
        add(layer, name)
    layer_tar = layer.tar()

    compressed = io.BytesIO()
    # No file name and mtime 0 in the gzip header, so the digest depends on the contents only.
    with gzip.GzipFile(filename="", mode="wb", fileobj=compressed, mtime=0,
                       compresslevel=spec.compression) as gz:
        gz.write(layer_tar)
    layer_blob = compressed.getvalue()
    layers = [(MEDIA_LAYER, layer_blob, layer_tar)]
    if spec.filler:
        filler = filler_layer(name, spec.filler, mtime)
        layers.append((MEDIA_LAYER_PLAIN, filler, filler))

    runtime = {"Entrypoint": spec.entrypoint,
               "Env": [PATH_ENV] + [f"{key}={value}" for key, value in spec.env.items()]}
    if spec.cmd is not None:
        runtime["Cmd"] = spec.cmd
    if spec.user:
        runtime["User"] = spec.user
    if spec.workdir:
        runtime["WorkingDir"] = spec.workdir
    if spec.ports:
        runtime["ExposedPorts"] = {port: {} for port in spec.ports}
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(mtime))
    config = canonical_json({
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": runtime,
        "rootfs": {"type": "layers", "diff_ids": [digest_of(tar) for _, _, tar in layers]},
        "history": [{"created": created, "created_by": "tests/tools/node-images/build.py"}],
    })
    manifest = canonical_json({
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": {"mediaType": MEDIA_CONFIG, "digest": digest_of(config), "size": len(config)},
        "layers": [{"mediaType": media, "digest": digest_of(blob), "size": len(blob)}
                   for media, blob, _ in layers],
    })
    return Built(name, [blob for _, blob, _ in layers], config, manifest)


def normalized(reference):
    """The reference as the kubelet's CRI looks it up in containerd: a first component that is
    no registry host (no "." or ":", not localhost) means Docker Hub, as in `docker.io/x/y:1`."""
    if "/" not in reference:
        return "docker.io/library/" + reference
    first = reference.split("/", 1)[0]
    if "." in first or ":" in first or first == "localhost":
        return reference
    return "docker.io/" + reference


def write_oci_archive(image, reference, directory, mtime):
    """DIR/<name>.tar: an OCI image layout. ctr names the image by io.containerd.image.name,
    normalized, since a pod's `outfit-test/web:1` is found only as `docker.io/outfit-test/web:1`."""
    index = canonical_json({
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": [{
            "mediaType": MEDIA_MANIFEST,
            "digest": image.digest,
            "size": len(image.manifest),
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {"io.containerd.image.name": normalized(reference),
                            "org.opencontainers.image.ref.name": TAG},
        }],
    })
    files = {"oci-layout": canonical_json({"imageLayoutVersion": "1.0.0"}), "index.json": index}
    for digest, blob in [*image.blobs.items(), (image.digest, image.manifest)]:
        files["blobs/sha256/" + digest.removeprefix("sha256:")] = blob

    layout = Tree(mtime)
    layout.dir("blobs")
    layout.dir("blobs/sha256")
    for path, data in files.items():
        layout.file(path, data)
    path = os.path.join(directory, f"{image.name}.tar")
    with open(path + ".partial", "wb") as archive:
        archive.write(layout.tar())
    os.replace(path + ".partial", path)
    return path


class PushError(Exception):
    pass


class Registry:
    """Just enough of the Distribution API to push, over plain HTTP."""

    def __init__(self, host_port):
        self.base = f"http://{host_port}"
        # Never through an http_proxy from the environment: test registries are local.
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def request(self, image, step, method, url, body=None, headers=None, expect=(200,)):
        """The reply's status and headers if the status is one of expect, else PushError."""
        request = urllib.request.Request(urllib.parse.urljoin(self.base, url), data=body,
                                         method=method, headers=headers or {})
        try:
            with self.opener.open(request, timeout=HTTP_TIMEOUT) as response:
                status, reply_headers, reply = response.status, response.headers, response.read(300)
        except urllib.error.HTTPError as error:  # any status but 2xx, a reply all the same
            status, reply_headers, reply = error.code, error.headers, error.read(300)
        except (urllib.error.URLError, OSError) as error:
            raise PushError(f"{image}: {step}: {method} {request.full_url}: {error}") from None
        if status not in expect:
            raise PushError(f"{image}: {step}: {method} {request.full_url}: HTTP {status}: "
                            f"{reply!r}")
        return status, reply_headers

    def push_blob(self, image, repo, digest, blob):
        status, _ = self.request(image, f"check blob {digest}", "HEAD",
                                 f"/v2/{repo}/blobs/{digest}", expect=(200, 404))
        if status == 200:
            return False
        _, headers = self.request(image, f"start upload of {digest}", "POST",
                                  f"/v2/{repo}/blobs/uploads/", body=b"", expect=(202,))
        location = headers.get("Location")
        if not location:
            raise PushError(f"{image}: start upload of {digest}: HTTP 202 without Location")
        # Location may be relative, and may already hold a query (a state token, say).
        location = urllib.parse.urljoin(f"{self.base}/v2/{repo}/blobs/uploads/", location)
        separator = "&" if "?" in location else "?"
        self.request(image, f"upload {digest}", "PUT",
                     f"{location}{separator}digest={urllib.parse.quote(digest, safe=':')}",
                     body=blob, headers={"Content-Type": "application/octet-stream"},
                     expect=(201,))
        return True

    def push(self, image, repo):
        uploaded = 0
        for digest, blob in image.blobs.items():
            uploaded += self.push_blob(image.name, repo, digest, blob)
        self.request(image.name, "put manifest", "PUT", f"/v2/{repo}/manifests/{TAG}",
                     body=image.manifest, headers={"Content-Type": MEDIA_MANIFEST},
                     expect=(201,))
        return uploaded


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--registry", metavar="HOST:PORT",
                        help="push to this registry over plain HTTP")
    parser.add_argument("--oci-archive", metavar="DIR", help="write DIR/<name>.tar")
    parser.add_argument("--name-prefix", default="outfit-test", metavar="PREFIX",
                        help="repository prefix (default: outfit-test)")
    parser.add_argument("--only", nargs="+", choices=sorted([*IMAGES, "outfit", "jupyterlab"]),
                        metavar="NAME",
                        help=f"build only these images, of: {', '.join(IMAGES)}, outfit, jupyterlab")
    parser.add_argument("--outfit-binary", metavar="PATH", help="the outfit image's binary")
    parser.add_argument("--jupyterlab-venv", metavar="DIR",
                        help="the jupyterlab image's venv, made there if missing")
    parser.add_argument("--bench-image", action="append", default=[], metavar="NAME=BYTES",
                        help="an image of the start-time benchmark (repeatable)")
    args = parser.parse_args()
    images = dict(IMAGES)
    if args.bench_image:
        images = {}  # only those
        for spec in args.bench_image:
            name, _, size = spec.partition("=")
            if not name or not size.isdigit():
                parser.error(f"--bench-image {spec}: expected NAME=BYTES")
            images[name] = bench_image(int(size))
    if args.outfit_binary:
        if not os.access(args.outfit_binary, os.X_OK):
            parser.error(f"--outfit-binary {args.outfit_binary}: not an executable file")
        images["outfit"] = outfit_image(args.outfit_binary)
    elif args.only and "outfit" in args.only:
        parser.error("the outfit image needs --outfit-binary PATH")
    if args.jupyterlab_venv:
        started = time.monotonic()
        make_venv(args.jupyterlab_venv)
        print(f"build.py: the venv {args.jupyterlab_venv} in {time.monotonic() - started:.2f} s",
              file=sys.stderr)
        if not args.registry and not args.oci_archive:
            return  # the venv alone (hack/control-plane/build.sh makes it ahead)
        images["jupyterlab"] = jupyterlab_image(args.jupyterlab_venv)
    elif args.only and "jupyterlab" in args.only:
        parser.error("the jupyterlab image needs --jupyterlab-venv DIR")
    if not args.registry and not args.oci_archive:
        parser.error("give --registry HOST:PORT, --oci-archive DIR, or both")
    if args.registry and "/" in args.registry:
        parser.error("--registry is HOST:PORT, without scheme or path")
    prefix = args.name_prefix.strip("/")
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    registry = Registry(args.registry) if args.registry else None
    if args.oci_archive:
        os.makedirs(args.oci_archive, exist_ok=True)

    started = time.monotonic()
    for name in args.only or images:
        image = build(name, mtime, images[name])
        repo = f"{prefix}/{name}" if prefix else name
        done = []
        if args.oci_archive:
            done.append(write_oci_archive(image, f"{repo}:{TAG}", args.oci_archive, mtime))
        if registry:
            try:
                uploaded = registry.push(image, repo)
            except PushError as error:
                sys.exit(f"build.py: push failed: {error}")
            done.append(f"{args.registry}/{repo}:{TAG} ({uploaded} blobs uploaded)")
        size = sum(len(layer) for layer in image.layers)
        print(f"{name}\t{image.digest}\tlayers {size} bytes\t{', '.join(done)}",
              flush=True)
    print(f"build.py: done in {time.monotonic() - started:.2f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
