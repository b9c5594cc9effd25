"""The jupyterlab image's contents: Debian's python3.11 (the interpreter, its standard library and
the shared libraries they load) and a virtual environment at /opt/jupyter holding JupyterLab and
what it needs, installed from PyPI by the hashes of jupyterlab.txt, nothing else.

The server listens on 8888 for any host, without a token or password of its own: what stands in
front of it decides who gets in (outfit's workspace proxy, a workspace's NetworkPolicy), as in
Kubeflow's notebook images behind their gateway."""

import fcntl
import hashlib
import json
import os
import shutil
import subprocess

from tree import copy_tree, file_with_parents, shared_libraries

HERE = os.path.dirname(os.path.abspath(__file__))
LOCK = os.path.join(HERE, "jupyterlab.txt")
PYTHON = "/usr/bin/python3.11"  # Debian's: the image's interpreter, and the venv's base
STDLIB = "/usr/lib/python3.11"
PREFIX = "/opt/jupyter"  # the venv in the image
STAMP = ".outfit-lock"  # in a venv: the sha256 of the lock it was installed from

# Left out of the standard library: its tests, GUI and 2to3, and the static libpython for
# embedding (python3.11-dev), none of which a notebook server loads.
STDLIB_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "lib2to3", "config-3.11-x86_64-linux-gnu",
               "__phello__"}

SERVER_CONFIG = {
    "ServerApp": {"ip": "0.0.0.0", "port": 8888, "open_browser": False,
                  "allow_remote_access": True, "root_dir": "/home/jovyan"},
    "IdentityProvider": {"token": ""},
}


def lock_digest():
    with open(LOCK, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def make_venv(directory):
    """`directory`: a venv of Debian's python3.11 with the lock's packages, made once per lock
    (its stamp, written last, says which); each later call returns at once. Made where it stays,
    since its scripts name that path (the image's copy names /opt/jupyter instead), one maker at a
    time."""
    digest = lock_digest()
    stamp = os.path.join(directory, STAMP)
    os.makedirs(os.path.dirname(os.path.abspath(directory)), exist_ok=True)
    with open(f"{directory}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(stamp) as f:
                if f.read().strip() == digest:
                    return directory
        except FileNotFoundError:
            pass
        shutil.rmtree(directory, ignore_errors=True)
        subprocess.run([PYTHON, "-m", "venv", directory], check=True)
        subprocess.run([os.path.join(directory, "bin", "pip"), "install", "--quiet",
                        "--disable-pip-version-check", "--no-input", "--require-hashes",
                        "--only-binary", ":all:", "--no-deps", "-r", LOCK], check=True)
        with open(stamp, "w") as f:
            f.write(digest + "\n")
    return directory


def with_jupyterlab(venv):
    """The interpreter, the standard library, the venv as /opt/jupyter (its scripts pointed at
    /opt/jupyter) and its server configuration, and every shared library these load that is not
    in a wheel of the venv."""
    host_prefix = os.path.realpath(venv).encode()

    def retarget(relative, data):
        # Scripts and pyvenv.cfg name the venv where it was made.
        if relative.startswith("bin/") or relative == "pyvenv.cfg":
            return data.replace(host_prefix, PREFIX.encode())
        return data

    def add(layer, image):
        with open(PYTHON, "rb") as f:
            file_with_parents(layer, PYTHON, f.read(), 0o755)
        layer.symlink("/usr/bin/python3", "python3.11")
        loaded = [PYTHON]
        loaded += copy_tree(layer, STDLIB, STDLIB, skip=STDLIB_SKIP)
        loaded += copy_tree(layer, os.path.realpath(venv), PREFIX, skip={STAMP}, rewrite=retarget,
                            absolute_links=True)
        file_with_parents(layer, f"{PREFIX}/etc/jupyter/jupyter_server_config.json",
                          json.dumps(SERVER_CONFIG, indent=1, sort_keys=True) + "\n", 0o644)
        libraries = set()
        for binary in loaded:
            libraries.update(path for path in shared_libraries(binary)
                             if not path.startswith(host_prefix.decode() + "/"))
        for library in sorted(libraries):
            with open(library, "rb") as f:  # through any symlink: the file itself
                file_with_parents(layer, library, f.read(), 0o755)
    return add
