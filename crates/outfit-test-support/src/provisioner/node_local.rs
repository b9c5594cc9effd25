//! Where the volumes of [`super::NODE_LOCAL_CLASS`] live: a directory per volume, named by its CSI
//! volume handle, under the plane's state directory, which the real node's CSI driver
//! (`tests/tools/csi-node`, started by `real-node.sh`) bind-mounts into pods; and a directory per
//! snapshot, a copy of its volume's when it was cut, which a volume restored from it starts as.
//! The copies are the driver's controller side, here because the test process can do them and
//! the node-side binary need not.

use std::{
    io,
    path::{Path, PathBuf},
    process::Command,
};

pub(crate) struct NodeLocal {
    volumes: PathBuf,
    snapshots: PathBuf,
}

impl NodeLocal {
    /// The directories of the plane at `state_dir` (`real-node.sh` makes `node-local-volumes`
    /// and hands it to the driver).
    pub(crate) fn of(state_dir: &Path) -> Self {
        NodeLocal {
            volumes: state_dir.join("node-local-volumes"),
            snapshots: state_dir.join("node-local-snapshots"),
        }
    }

    pub(crate) fn volume(&self, handle: &str) -> PathBuf {
        self.volumes.join(handle)
    }

    fn snapshot(&self, handle: &str) -> PathBuf {
        self.snapshots.join(handle)
    }

    /// The volume `handle`'s directory, which anyone may write, as the workspace's user (not
    /// root) writes its home; a copy of the snapshot `from` if given.
    pub(crate) fn make(&self, handle: &str, from: Option<&str>) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let path = self.volume(handle);
        std::fs::create_dir_all(&path)?;
        if let Some(snapshot) = from {
            copy(&self.snapshot(snapshot), &path)?;
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))
    }

    /// Whether the volume `handle` is one of these (a directory here).
    pub(crate) fn holds(&self, handle: &str) -> bool {
        self.volume(handle).is_dir()
    }

    /// Cuts the snapshot `snapshot` of the volume `handle`: a copy of its directory now.
    pub(crate) fn cut(&self, handle: &str, snapshot: &str) -> io::Result<()> {
        let path = self.snapshot(snapshot);
        if path.exists() {
            return Ok(()); // cut already, by an earlier pass whose status write failed
        }
        let partial = self.snapshots.join(format!(".{snapshot}.partial"));
        let _ = std::fs::remove_dir_all(&partial);
        std::fs::create_dir_all(&partial)?;
        copy(&self.volume(handle), &partial)?;
        std::fs::rename(&partial, &path)
    }

    pub(crate) fn remove_volume(&self, handle: &str) {
        let _ = std::fs::remove_dir_all(self.volume(handle));
    }

    pub(crate) fn remove_snapshot(&self, snapshot: &str) {
        let _ = std::fs::remove_dir_all(self.snapshot(snapshot));
    }
}

/// Everything in `from` into `to`, owners, modes and times kept (`cp -a`, as root).
fn copy(from: &Path, to: &Path) -> io::Result<()> {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from.join("."))
        .arg(to)
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "cp -a {}/. {}: {status}",
            from.display(),
            to.display()
        )))
    }
}
