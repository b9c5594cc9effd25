//! The sidecar template (`sidecarconfig.json` of `filer-sidecar-injector-json`): one container
//! and two volumes, filled in per share. StatCan fills `env[0..3]`, `volumeMounts[0]` and
//! `volumes[0..1]` by position, so reordering the template breaks it; here the volumes are found
//! by type (the `emptyDir` for FUSE fd passing, the `csi` ephemeral volume), the container's mount
//! by the fd-passing volume's name, and env vars by name (added when the template lacks one).

use serde_json::{Map, Value, json};

/// A template that holds what a sidecar needs.
#[derive(Debug, Clone)]
pub(super) struct Template {
    container: Map<String, Value>,
    fd_passing: Map<String, Value>,
    csi: Map<String, Value>,
}

/// What one share's sidecar is filled with.
pub(super) struct Fill<'a> {
    /// `filerBucket`: the container's name.
    pub(super) filer_bucket: &'a str,
    /// `shortNs`.
    pub(super) short_namespace: &'a str,
    /// The hashed bucket.
    pub(super) bucket: &'a str,
    /// The filer's URL, and the same without its scheme.
    pub(super) url: &'a str,
    pub(super) host: &'a str,
    /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`: a `secretKeyRef` or a plain value.
    pub(super) access: &'a Value,
    pub(super) secret: &'a Value,
}

/// A share's sidecar and its two volumes.
pub(super) struct Sidecar {
    pub(super) container: Value,
    pub(super) volumes: [Value; 2],
    /// The CSI volume's name: the notebook container mounts it.
    pub(super) csi_name: String,
}

impl Template {
    /// Reads the template's JSON text.
    pub(super) fn parse(text: &str) -> Result<Self, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
        let list = |key: &str| -> Result<Vec<Map<String, Value>>, String> {
            match value.get(key) {
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| {
                        item.as_object()
                            .cloned()
                            .ok_or(format!("{key}[]: must be objects"))
                    })
                    .collect(),
                _ => Err(format!("{key}: must be a list")),
            }
        };
        let containers = list("containers")?;
        let volumes = list("volumes")?;
        let container = containers
            .into_iter()
            .next()
            .ok_or("containers: must hold the sidecar container")?;
        // The volume whose `field` is an object (`fill` writes into the CSI one's attributes).
        let of_type = |field: &str| {
            volumes
                .iter()
                .find(|v| v.get(field).is_some_and(Value::is_object))
                .cloned()
                .ok_or(format!("volumes: no {field} volume (an object)"))
        };
        Ok(Self {
            fd_passing: of_type("emptyDir")?,
            csi: of_type("csi")?,
            container,
        })
    }

    /// The sidecar of one share, with StatCan's names and values.
    pub(super) fn fill(&self, fill: &Fill<'_>) -> Sidecar {
        let proxy_dir = format!("fusermount3-proxy-{}-{}", fill.filer_bucket, fill.short_namespace);
        let fd_name = format!("fuse-fd-passing-{}-{}", fill.filer_bucket, fill.short_namespace);
        let csi_name = format!(
            "fuse-csi-ephemeral-{}-{}",
            fill.filer_bucket, fill.short_namespace
        );

        let mut container = self.container.clone();
        container.insert("name".into(), json!(fill.filer_bucket));
        container.insert(
            "args".into(),
            json!(["-c", goofys_command(fill.url, fill.bucket)]),
        );
        // A native sidecar: without it the never-ending goofys loop would hold the pod in Init.
        container.entry("restartPolicy").or_insert(json!("Always"));
        container.insert(
            "resources".into(),
            json!({"limits": {"cpu": "500m", "memory": "10Gi"}, "requests": {"cpu": "100m", "memory": "100Mi"}}),
        );
        let template_fd = self.fd_passing.get("name").cloned().unwrap_or_default();
        let mounts = list_in(&mut container, "volumeMounts");
        let mount = json!({"name": fd_name, "mountPath": proxy_dir});
        match mounts.iter_mut().find(|m| m.get("name") == Some(&template_fd)) {
            Some(existing) => {
                existing["name"] = mount["name"].clone();
                existing["mountPath"] = mount["mountPath"].clone();
            }
            None => mounts.push(mount),
        }
        let env = list_in(&mut container, "env");
        let socket = json!(format!("{proxy_dir}/fuse-csi-ephemeral.sock"));
        set_env(
            env,
            "FUSERMOUNT3PROXY_FDPASSING_SOCKPATH",
            &json!({"value": socket}),
        );
        set_env(env, "AWS_ACCESS_KEY_ID", fill.access);
        set_env(env, "AWS_SECRET_ACCESS_KEY", fill.secret);
        set_env(env, "BUCKET_HOST", &json!({"value": fill.host}));

        let mut fd_passing = self.fd_passing.clone();
        fd_passing.insert("name".into(), json!(fd_name));
        let mut csi = self.csi.clone();
        csi.insert("name".into(), json!(csi_name));
        let attributes = &mut csi.entry("csi").or_insert_with(|| json!({}))["volumeAttributes"];
        if !attributes.is_object() {
            *attributes = json!({});
        }
        attributes["fdPassingEmptyDirName"] = json!(fd_name);
        Sidecar {
            container: Value::Object(container),
            volumes: [Value::Object(fd_passing), Value::Object(csi)],
            csi_name,
        }
    }
}

/// StatCan's retry loop: goofys in the foreground up to 5 times, then `sleep infinity` (the
/// container never exits, so a failed mount is silent, as upstream).
fn goofys_command(url: &str, bucket: &str) -> String {
    format!(
        "for i in {{1..5}}; do /goofys --cheap --endpoint {url} --http-timeout 1500s --dir-mode 0777 --file-mode 0777  \
         --debug_fuse --debug_s3 -o allow_other -f {bucket} /tmp;echo '---- goofys command failed: trying again'; \
         sleep 1; done;echo 'goofys command failed 5 times sleeping'; sleep infinity"
    )
}

/// The list at `key`, made one when absent or not a list.
fn list_in<'m>(object: &'m mut Map<String, Value>, key: &str) -> &'m mut Vec<Value> {
    let slot = object.entry(key).or_insert_with(|| json!([]));
    if !slot.is_array() {
        *slot = json!([]);
    }
    slot.as_array_mut().expect("made a list above")
}

/// Sets env var `name` to `source` (`{"value": ...}` or `{"valueFrom": ...}`), in place when the
/// template has it, else appended.
fn set_env(env: &mut Vec<Value>, name: &str, source: &Value) {
    let mut var = json!({"name": name});
    if let (Some(var), Some(source)) = (var.as_object_mut(), source.as_object()) {
        var.extend(source.clone());
    }
    match env
        .iter_mut()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
    {
        Some(existing) => *existing = var,
        None => env.push(var),
    }
}
