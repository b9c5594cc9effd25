//! `storageStrategy`: where a workspace's home (its `sciencedata` volume) lives.

/// Where a workspace's home lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageStrategy {
    /// deic-dk's: an NFS PersistentVolume outfit writes, `<nfsStorageRoot>/<user id>` on the silo,
    /// and a claim pinned to it; removed `storageGracePeriod` after the user's last workspace
    /// (the data stays: the volume's reclaim policy is Retain).
    Nfs,
    /// One claim per user from `storageClassName` (empty: the cluster's default class), dynamically
    /// provisioned: outfit writes no PersistentVolume. Kept after the user's last workspace goes,
    /// as zero-to-jupyterhub keeps its claims; removed only when asked.
    PerUser,
    /// One claim per workspace from `storageClassName`, named `<workspace>-home` and owned by its
    /// Workspace: kept while the Workspace exists (stopped included), removed with it. A
    /// workspace of deic-dk's API (no Workspace) has its claim owned by its pod.
    PerWorkspace,
    /// An `emptyDir`: the home goes with the pod.
    Ephemeral,
}

impl StorageStrategy {
    /// `nfs`, `per-user` or `ephemeral`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "nfs" => Ok(Self::Nfs),
            "per-user" => Ok(Self::PerUser),
            "per-workspace" => Ok(Self::PerWorkspace),
            "ephemeral" => Ok(Self::Ephemeral),
            other => Err(format!(
                "expected nfs, per-user, per-workspace or ephemeral, got {other:?}"
            )),
        }
    }

    /// Its name, as the config and the claims' annotation say it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Nfs => "nfs",
            Self::PerUser => "per-user",
            Self::PerWorkspace => "per-workspace",
            Self::Ephemeral => "ephemeral",
        }
    }

    /// Whether outfit writes PersistentVolumes (and so needs rights on them).
    pub fn writes_volumes(self) -> bool {
        self == Self::Nfs
    }

    /// The claims' access modes when the config names none: NFS is shared by every pod of the
    /// user (ReadWriteMany); a dynamically provisioned disk is most often ReadWriteOnce.
    pub fn default_access_modes(self) -> &'static [&'static str] {
        match self {
            Self::Nfs => &["ReadWriteMany"],
            Self::PerUser | Self::PerWorkspace | Self::Ephemeral => &["ReadWriteOnce"],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_read_by_name_and_only_nfs_writes_volumes() {
        for strategy in [
            StorageStrategy::Nfs,
            StorageStrategy::PerUser,
            StorageStrategy::PerWorkspace,
            StorageStrategy::Ephemeral,
        ] {
            assert_eq!(StorageStrategy::parse(strategy.name()), Ok(strategy));
        }
        assert!(StorageStrategy::parse("per-pod").is_err());
        assert!(StorageStrategy::Nfs.writes_volumes());
        assert!(!StorageStrategy::PerUser.writes_volumes());
        assert_eq!(StorageStrategy::PerUser.default_access_modes(), ["ReadWriteOnce"]);
    }
}
