"""Image layers as files by path, written as deterministic tars, and the host's files that go
into them: a dynamic binary's shared libraries, a directory tree copied as it is."""

import io
import os
import subprocess
import tarfile


class Tree:
    """Files by path (no leading slash), written as a deterministic tar: a layer, or an OCI
    layout."""

    def __init__(self, mtime):
        self.mtime = mtime
        self.entries = {}  # path -> (TarInfo, bytes or None)

    def _add(self, path, kind, mode, owner, data=None, link=None, mtime=None):
        info = tarfile.TarInfo(path.lstrip("/"))
        info.type = kind
        info.mode = mode
        info.uid, info.gid = owner
        info.uname = info.gname = ""
        info.mtime = self.mtime if mtime is None else mtime
        if data is not None:
            info.size = len(data)
        if link is not None:
            info.linkname = link
        self.entries[info.name] = (info, data)

    def dir(self, path, mode=0o755, owner=(0, 0)):
        self._add(path, tarfile.DIRTYPE, mode, owner)

    def file(self, path, data, mode=0o644, owner=(0, 0), mtime=None):
        if isinstance(data, str):
            data = data.encode()
        self._add(path, tarfile.REGTYPE, mode, owner, data=data, mtime=mtime)

    def symlink(self, path, target, mtime=None):
        self._add(path, tarfile.SYMTYPE, 0o777, (0, 0), link=target, mtime=mtime)

    def tar(self):
        # Sorting by path also puts each directory before what it holds.
        return deterministic_tar((self.entries[path] for path in sorted(self.entries)))


def deterministic_tar(entries):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def shared_libraries(binary):
    """The files the dynamic loader maps for `binary`, the loader itself among them, by the paths
    `ldd` prints (which are where the binary and the loader look for them)."""
    listed = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    paths = []
    for line in listed.splitlines():
        words = line.split()
        if "=>" in words and len(words) > words.index("=>") + 1:
            path = words[words.index("=>") + 1]
        elif words and words[0].startswith("/"):
            path = words[0]  # the loader: "/lib64/ld-linux-x86-64.so.2 (0x...)"
        else:
            continue  # linux-vdso.so.1, which the kernel provides
        if path.startswith("/"):
            paths.append(path)
    return sorted(set(paths))


def parents(layer, path):
    """Each directory above `path` that `layer` does not hold yet."""
    parts = path.strip("/").split("/")
    for depth in range(1, len(parts)):
        directory = "/" + "/".join(parts[:depth])
        if directory.lstrip("/") not in layer.entries:
            layer.dir(directory)


def file_with_parents(layer, path, data, mode):
    """`path` in `layer`, and each of its directories not there yet."""
    parents(layer, path)
    layer.file(path, data, mode=mode)


def copy_tree(layer, source, destination, skip=(), rewrite=None, absolute_links=False):
    """The directory `source` of this machine as `destination` in `layer`, owned by root, with each
    file's mode and mtime (a Python bytecode cache is valid only beside the mtime of its source).
    `skip`: paths relative to `source` left out with all they hold. Relative symbolic links are
    kept; absolute ones only with `absolute_links` (for links to what the image holds at that
    path). `rewrite(relative path, bytes)` may change a file's contents. The ELF shared objects
    copied, by host path."""
    parents(layer, destination)
    shared_objects = []
    for directory, subdirectories, files in os.walk(source):
        relative = os.path.relpath(directory, source)
        subdirectories[:] = sorted(d for d in subdirectories
                                   if os.path.normpath(os.path.join(relative, d)) not in skip)
        target = os.path.normpath(os.path.join(destination, relative))
        stat = os.lstat(directory)
        layer.dir(target, mode=stat.st_mode & 0o7777)
        for name in sorted(files + [d for d in subdirectories if os.path.islink(os.path.join(directory, d))]):
            host = os.path.join(directory, name)
            path = os.path.join(target, name)
            if os.path.normpath(os.path.join(relative, name)) in skip:
                continue
            stat = os.lstat(host)
            if os.path.islink(host):
                link = os.readlink(host)
                if absolute_links or not os.path.isabs(link):
                    layer.symlink(path, link, mtime=int(stat.st_mtime))
                continue
            with open(host, "rb") as f:
                data = f.read()
            if rewrite is not None:
                data = rewrite(os.path.normpath(os.path.join(relative, name)), data)
            layer.file(path, data, mode=stat.st_mode & 0o7777, mtime=int(stat.st_mtime))
            if data[:4] == b"\x7fELF" and ".so" in name:
                shared_objects.append(host)
    return shared_objects
