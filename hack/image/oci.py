#!/usr/bin/env python3
"""Write outfit's container image as an OCI image archive (a tar of an OCI image layout).

No daemon, no registry, no base image: one layer with the static binary, the CA bundle, and the
passwd/group entries of the non-root user; the config, manifest and index written by hand. Every
byte is a function of the inputs (sorted entries, fixed owners and mtimes, gzip without a name or
time), so the same binary, CA bundle and SOURCE_DATE_EPOCH give the same digest.

usage: oci.py --binary PATH --ca-bundle PATH --ref REPOSITORY:TAG --created EPOCH --out PATH
              [--label KEY=VALUE]...
Prints the manifest digest on stdout. Called by build.sh, which says where the inputs come from.
"""

import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import tarfile

UID = GID = 65532
USER = "nonroot"
ENTRYPOINT = "/usr/local/bin/outfit"
CA_PATH = "etc/ssl/certs/ca-certificates.crt"

# No shell and no home for root: /sbin/nologin does not exist in the image, which is the point.
PASSWD = f"root:x:0:0:root:/root:/sbin/nologin\n{USER}:x:{UID}:{GID}:{USER}:/home/{USER}:/sbin/nologin\n"
GROUP = f"root:x:0:\n{USER}:x:{GID}:\n"

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def tar_bytes(entries, mtime: int) -> bytes:
    """A tar of (path, mode, uid, content-or-None-for-a-directory), in the given order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path, mode, uid, content in entries:
            info = tarfile.TarInfo(path)
            info.mode, info.uid, info.gid, info.mtime = mode, uid, uid, mtime
            info.uname = info.gname = ""
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--ca-bundle", required=True)
    parser.add_argument("--ref", required=True, help="repository:tag, e.g. ghcr.io/outfit-dev/outfit:0.1.0")
    parser.add_argument("--created", required=True, type=int, help="seconds since the epoch")
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    tag = args.ref.rsplit(":", 1)[1]
    mtime = args.created
    created = datetime.datetime.fromtimestamp(mtime, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    labels = dict(label.split("=", 1) for label in args.label)

    with open(args.binary, "rb") as f:
        binary = f.read()
    with open(args.ca_bundle, "rb") as f:
        ca_bundle = f.read()

    # Parents before children, as `tar` itself writes them.
    layer = tar_bytes([
        ("etc", 0o755, 0, None),
        ("etc/group", 0o644, 0, GROUP.encode()),
        ("etc/passwd", 0o644, 0, PASSWD.encode()),
        ("etc/ssl", 0o755, 0, None),
        ("etc/ssl/certs", 0o755, 0, None),
        (CA_PATH, 0o644, 0, ca_bundle),
        ("home", 0o755, 0, None),
        (f"home/{USER}", 0o755, UID, None),
        # Scratch space for `outfit serve --self-signed` outside Kubernetes; in a pod with a
        # read-only root file system mount an emptyDir here instead.
        ("tmp", 0o1777, 0, None),
        ("usr", 0o755, 0, None),
        ("usr/local", 0o755, 0, None),
        ("usr/local/bin", 0o755, 0, None),
        (ENTRYPOINT.lstrip("/"), 0o755, 0, binary),
    ], mtime)
    # mtime=0 and no file name in the gzip header: the compressed bytes depend on the tar alone.
    layer_gz = gzip.compress(layer, compresslevel=9, mtime=0)

    config = canonical({
        "created": created,
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "User": f"{UID}:{GID}",
            "Entrypoint": [ENTRYPOINT],
            "Env": ["PATH=/usr/local/bin", f"SSL_CERT_FILE=/{CA_PATH}"],
            # "/", not the home directory: a pod run as another uid (OpenShift assigns one) must
            # still be able to enter it.
            "WorkingDir": "/",
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [sha256(layer)]},
        "history": [{"created": created, "created_by": "hack/image/build.sh"}],
    })
    manifest = canonical({
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": {"mediaType": MEDIA_CONFIG, "digest": sha256(config), "size": len(config)},
        "layers": [{"mediaType": MEDIA_LAYER, "digest": sha256(layer_gz), "size": len(layer_gz)}],
        "annotations": {k: v for k, v in labels.items() if k.startswith("org.opencontainers.image.")},
    })
    index = canonical({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": MEDIA_MANIFEST, "digest": sha256(manifest), "size": len(manifest),
            "platform": {"architecture": "amd64", "os": "linux"},
            # ref.name is the tag (skopeo's oci-archive:FILE:TAG, umoci's DIR:TAG); containerd's
            # `ctr images import` names the image by the full reference.
            "annotations": {"org.opencontainers.image.ref.name": tag, "io.containerd.image.name": args.ref},
        }],
    })

    blobs = sorted((sha256(b).split(":")[1], b) for b in (layer_gz, config, manifest))
    entries = [("blobs", 0o755, 0, None), ("blobs/sha256", 0o755, 0, None)]
    entries += [(f"blobs/sha256/{hexdigest}", 0o644, 0, blob) for hexdigest, blob in blobs]
    entries += [("index.json", 0o644, 0, index), ("oci-layout", 0o644, 0, canonical({"imageLayoutVersion": "1.0.0"}))]
    tmp = f"{args.out}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(tar_bytes(entries, mtime))
    os.replace(tmp, args.out)
    print(sha256(manifest))


if __name__ == "__main__":
    main()
