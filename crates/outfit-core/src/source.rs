//! Reading policy documents from files and directories (the CLI's `--policies` and the server's
//! directory mode). The only module of this crate that touches the file system.

use std::path::{Path, PathBuf};

use crate::{
    document::{self, Document},
    error::DocumentError,
};

/// File names read from a policy directory.
const POLICY_EXTENSIONS: &[&str] = &["yaml", "yml", "json"];

/// Lists the policy files under `path`: the file itself, or every `*.yaml`, `*.yml` and `*.json`
/// below a directory, recursively, in a stable (sorted) order. Hidden entries (`.git`, and the
/// `..data` links of Kubernetes Secret and ConfigMap volumes) are skipped, so a mounted volume's
/// files are read once, through their visible names.
pub fn policy_files(path: &Path) -> Result<Vec<PathBuf>, DocumentError> {
    let io = |source| DocumentError::Io {
        path: path.display().to_string(),
        source,
    };
    let metadata = std::fs::metadata(path).map_err(io)?;
    if !metadata.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    walk(path, &mut files)?;
    files.sort();
    Ok(files)
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), DocumentError> {
    let io = |source| DocumentError::Io {
        path: dir.display().to_string(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        // Follow symlinks: ConfigMap volumes expose their files as links.
        let is_dir = std::fs::metadata(&path).map(|m| m.is_dir()).unwrap_or(false);
        if is_dir {
            walk(&path, files)?;
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| POLICY_EXTENSIONS.contains(&e))
        {
            files.push(path);
        }
    }
    Ok(())
}

/// Reads and parses one file.
pub fn read_file(path: &Path) -> Result<Vec<Document>, DocumentError> {
    let text = std::fs::read_to_string(path).map_err(|source| DocumentError::Io {
        path: path.display().to_string(),
        source,
    })?;
    document::parse_stream(&text, &path.display().to_string())
}

/// Reads every policy document under the given paths, in order.
pub fn read_paths(paths: &[PathBuf]) -> Result<Vec<Document>, DocumentError> {
    let mut documents = Vec::new();
    for path in paths {
        for file in policy_files(path)? {
            documents.extend(read_file(&file)?);
        }
    }
    Ok(documents)
}
