//! Reading the configuration: defaults, the file, the environment, and errors that name the key.

use std::io::Write;

use super::*;

fn file(text: &str) -> tempfile_lite::File {
    tempfile_lite::File::new(text)
}

/// A file removed when dropped (the crate has no tempfile dependency).
mod tempfile_lite {
    use super::Write;

    pub(super) struct File(pub(super) std::path::PathBuf);

    impl File {
        pub(super) fn new(text: &str) -> Self {
            static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let path = std::env::temp_dir().join(format!("outfit-ws-config-{}-{n}.yaml", std::process::id()));
            std::fs::File::create(&path)
                .and_then(|mut f| f.write_all(text.as_bytes()))
                .unwrap();
            Self(path)
        }
    }

    impl Drop for File {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

fn no_env(_: &str) -> Option<String> {
    None
}

#[test]
fn defaults_are_deic_dks() {
    let (config, warnings) = Config::load(None, no_env).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(config.default_restart_policy, "Never");
    assert_eq!(config.timeout_create, Duration::from_secs(90));
    assert_eq!(config.timeout_delete, Duration::from_secs(90));
    assert_eq!(config.namespace, "sciencedata-dev");
    assert_eq!(config.token_byte_limit, 4096);
    assert_eq!(config.nfs_storage_root, "/tank/storage");
    assert_eq!(config.testing_host.to_string(), "10.0.0.20");
    assert_eq!(config.local_registry_secret, "docker-registry-auth");
    assert_eq!(config.ingress_wildcard_secret, "user-pods-wildcard");
    assert_eq!(config.pod_subnet_cidr.to_string(), "10.128.0.0/15");
    assert!(config.hostname_list.is_empty());
    assert_eq!(config.allowed_source_cidrs.len(), 2);
    assert!(config.bearer_token.is_none());
}

#[test]
fn whitelist_is_anchored() {
    let (config, _) = Config::load(None, no_env).unwrap();
    let allowed = "https://raw.githubusercontent.com/deic-dk/pod_manifests/main/jupyter.yaml";
    assert!(config.whitelist_manifest_regex.is_match(allowed));
    // deic-dk's unanchored match lets this through.
    let smuggled = format!("https://evil.example/x?{allowed}");
    assert!(!config.whitelist_manifest_regex.is_match(&smuggled));
}

#[test]
fn file_then_environment() {
    let f = file(
        "namespace: sciencedata\ntimeoutCreate: 2m\ntokenByteLimit: 100\npodCacheDir: /tmp/x\n\
         hostnameList:\n  - hostname: silo1.example\n    address: 10.0.0.11\n",
    );
    let env = |var: &str| match var {
        "BACKEND_NAMESPACE" => Some("from-env".to_owned()),
        "BACKEND_TIMEOUTDELETE" => Some("1h2m3s".to_owned()),
        _ => None,
    };
    let (config, warnings) = Config::load(Some(&f.0), env).unwrap();
    assert_eq!(config.namespace, "from-env");
    assert_eq!(config.timeout_create, Duration::from_secs(120));
    assert_eq!(config.timeout_delete, Duration::from_secs(3723));
    assert_eq!(config.token_byte_limit, 100);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("podCacheDir"));
    assert_eq!(config.hostname_of("10.0.0.11"), Some("silo1.example"));
    // Looked up by the data-network address too, as deic-dk does.
    let f = file("hostnameList:\n  - {hostname: silo2, address: 10.2.0.12}\n");
    let (config, _) = Config::load(Some(&f.0), no_env).unwrap();
    assert_eq!(config.hostname_of("10.0.0.12"), Some("silo2"));
    assert_eq!(config.hostname_of("10.0.0.13"), None);
}

#[test]
fn lists_from_the_environment_are_json() {
    let env = |var: &str| {
        (var == "BACKEND_HOSTNAMELIST").then(|| r#"[{"hostname": "s", "address": "10.0.0.1"}]"#.to_owned())
    };
    let (config, _) = Config::load(None, env).unwrap();
    assert_eq!(config.hostname_list.len(), 1);
}

#[test]
fn bad_values_name_the_key_and_where_they_came_from() {
    let cases: &[(&str, &str, &str)] = &[
        ("timeoutCreate: 90", "timeoutCreate", "unit"),
        (
            "defaultRestartPolicy: Sometimes",
            "defaultRestartPolicy",
            "Always",
        ),
        ("whitelistManifestRegex: '(['", "whitelistManifestRegex", "regex"),
        ("testingHost: silo", "testingHost", "IP"),
        ("podSubnetCidr: 10.0.0.0/40", "podSubnetCidr", "prefix"),
        ("tokenByteLimit: -1", "tokenByteLimit", "positive"),
        ("allowedSourceCidrs: [nope]", "allowedSourceCidrs", "IP network"),
        ("hostnameList: [{hostname: x}]", "hostnameList", "address"),
        ("tlsCertFile: /tls.crt", "tlsKeyFile", "both"),
        ("allowedOrigins: [portal.example.org]", "allowedOrigins", "origin"),
        ("maxConnections: 0", "maxConnections", "positive"),
        ("storageStrategy: per-pod", "storageStrategy", "per-workspace"),
        (
            "storageAccessModes: [ReadWriteSometimes]",
            "storageAccessModes",
            "access mode",
        ),
        ("maxStreamsPerUser: 0", "maxStreamsPerUser", "positive"),
        ("maxStreams: 0", "maxStreams", "positive"),
        ("maxStreamsPerSource: 0", "maxStreamsPerSource", "positive"),
        (
            "maxConnections: 40\nmaxStreams: 30\nmaxStreamsPerSource: 31",
            "maxStreamsPerSource",
            "above maxStreams (30)",
        ),
        (
            "clientAddressFromCidrs: [ingress]",
            "clientAddressFromCidrs",
            "IP network",
        ),
        (
            "requestsPerUserPerSecond: 0",
            "requestsPerUserPerSecond",
            "positive",
        ),
        ("requestBurstPerUser: 1.5", "requestBurstPerUser", "positive"),
        (
            "maxConnections: 40\nmaxStreams: 40",
            "maxStreams",
            "below maxConnections (40)",
        ),
        ("bodyReadTimeout: 5", "bodyReadTimeout", "unit"),
    ];
    for (text, key, hint) in cases {
        let f = file(text);
        let err = Config::load(Some(&f.0), no_env).unwrap_err().to_string();
        assert!(err.contains(key) && err.contains(hint), "{text}: {err}");
        assert!(err.contains(&f.0.display().to_string()), "{err}");
    }
    let env = |var: &str| (var == "BACKEND_TIMEOUTCREATE").then(|| "soon".to_owned());
    let err = Config::load(None, env).unwrap_err().to_string();
    assert!(
        err.contains("BACKEND_TIMEOUTCREATE") && err.contains("timeoutCreate"),
        "{err}"
    );
}

#[test]
fn limits_are_off_by_default_and_read_as_kubernetes_quantities() {
    let (config, _) = Config::load(None, no_env).unwrap();
    assert_eq!(config.limits, Limits::default());
    let f = file("maxWorkspacesPerUser: 3\nmaxCpuPerUser: 2500m\nmaxMemoryPerUser: 8Gi\n");
    let (config, _) = Config::load(Some(&f.0), no_env).unwrap();
    assert_eq!(
        config.limits,
        Limits {
            max_workspaces: Some(3),
            max_cpu_millis: Some(2_500),
            max_memory_bytes: Some(8 << 30),
            ..Limits::default()
        }
    );
    // Any other resource by name, zero no limit; CPU and memory have their own keys.
    let f = file(
        "maxResourcesPerUser: {nvidia.com/gpu: 2, hugepages-2Mi: 1Gi, amd.com/gpu: 0}\nmaxStoppedWorkspacesPerUser: 5\n",
    );
    let (config, _) = Config::load(Some(&f.0), no_env).unwrap();
    assert_eq!(
        config.limits.max_resources,
        [
            ("hugepages-2Mi".to_owned(), 1 << 30),
            ("nvidia.com/gpu".to_owned(), 2)
        ]
        .into()
    );
    assert_eq!(config.limits.max_stopped, Some(5));
    let env =
        |var: &str| (var == "BACKEND_MAXRESOURCESPERUSER").then(|| r#"{"nvidia.com/gpu": "3"}"#.to_owned());
    let (config, _) = Config::load(None, env).unwrap();
    assert_eq!(config.limits.max_resources["nvidia.com/gpu"], 3);
    for bad in ["{cpu: 2}", "{nvidia.com/gpu: lots}", "[1]"] {
        let f = file(&format!("maxResourcesPerUser: {bad}\n"));
        let err = Config::load(Some(&f.0), no_env).unwrap_err().to_string();
        assert!(err.contains("maxResourcesPerUser"), "{bad}: {err}");
    }
    // A YAML number is a quantity too, and zero is no limit.
    let f = file("maxWorkspacesPerUser: 0\nmaxCpuPerUser: 1.5\nmaxMemoryPerUser: 0\n");
    let (config, _) = Config::load(Some(&f.0), no_env).unwrap();
    assert_eq!(config.limits.max_workspaces, None);
    assert_eq!(config.limits.max_cpu_millis, Some(1_500));
    assert_eq!(config.limits.max_memory_bytes, None);
    let env = |var: &str| (var == "BACKEND_MAXCPUPERUSER").then(|| "4".to_owned());
    let (config, _) = Config::load(None, env).unwrap();
    assert_eq!(config.limits.max_cpu_millis, Some(4_000));
}

#[test]
fn network_isolation_is_on_and_denies_internal_ranges_by_default() {
    let (config, _) = Config::load(None, no_env).unwrap();
    let network = &config.network;
    assert!(network.enabled);
    assert_eq!(network.ingress_namespaces, ["ingress-nginx"]);
    assert_eq!(network.backend_namespace, "outfit-workspaces");
    let denied: Vec<String> = network.denied_egress_cidrs.iter().map(Cidr::to_string).collect();
    assert_eq!(
        denied,
        [
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "100.64.0.0/10",
            "169.254.0.0/16",
            "fc00::/7",
            "fe80::/10",
            // podSubnetCidr (10.128.0.0/15 by default), always added: other users' workspaces.
            "10.128.0.0/15"
        ]
    );
    let metadata = "169.254.169.254".parse().unwrap();
    assert!(network.denied_egress_cidrs.iter().any(|c| c.contains(metadata)));
    assert!(network.allowed_egress_cidrs.is_empty());
    let f = file(
        "networkPolicy: false\ningressNamespaces: [ingress-nginx, traefik]\n\
         backendNamespace: outfit-system\ndeniedEgressCidrs: []\nallowedEgressCidrs: [10.0.0.0/24]\n",
    );
    let (config, _) = Config::load(Some(&f.0), no_env).unwrap();
    let network = &config.network;
    assert!(!network.enabled);
    assert_eq!(network.ingress_namespaces, ["ingress-nginx", "traefik"]);
    assert_eq!(network.backend_namespace, "outfit-system");
    let denied: Vec<String> = network.denied_egress_cidrs.iter().map(Cidr::to_string).collect();
    assert_eq!(denied, ["10.128.0.0/15"], "the pod subnet stays denied");
    assert_eq!(network.allowed_egress_cidrs[0].to_string(), "10.0.0.0/24");
    let env = |var: &str| (var == "BACKEND_NETWORKPOLICY").then(|| "false".to_owned());
    assert!(!Config::load(None, env).unwrap().0.network.enabled);
}

#[test]
fn bad_limits_and_network_values_name_the_key() {
    let cases: &[(&str, &str, &str)] = &[
        ("maxWorkspacesPerUser: -1", "maxWorkspacesPerUser", "whole number"),
        (
            "maxCpuPerUser: lots",
            "maxCpuPerUser",
            "\"lots\" is not a quantity",
        ),
        ("maxCpuPerUser: -1", "maxCpuPerUser", "negative"),
        ("maxMemoryPerUser: 1GB", "maxMemoryPerUser", "\"1GB\""),
        ("networkPolicy: maybe", "networkPolicy", "true or false"),
        (
            "placeholders: {count: 2, cpu: lots}",
            "placeholders",
            "\"lots\" is not a CPU quantity",
        ),
        ("placeholders: {count: 2, gpus: 1}", "placeholders", "gpus"),
        (
            "placeholders: {clusters: {west: 2}}",
            "placeholders",
            "\"west\" is not one of default",
        ),
        (
            "prePull: {enabled: true, pullsPerNode: 0}",
            "prePull",
            "pullsPerNode: must be at least 1",
        ),
        ("prePull: {window: soon}", "prePull", "soon"),
        ("prePull: {timeout: '0'}", "prePull", "must be above 0"),
        ("ingressNamespaces: ['']", "ingressNamespaces", "empty"),
        ("ingressNamespaces: ingress-nginx", "ingressNamespaces", "list"),
        ("backendNamespace: ''", "backendNamespace", "empty"),
        ("deniedEgressCidrs: [10.0.0.0/40]", "deniedEgressCidrs", "prefix"),
        ("allowedEgressCidrs: [silo]", "allowedEgressCidrs", "IP network"),
    ];
    for (text, key, hint) in cases {
        let f = file(text);
        let err = Config::load(Some(&f.0), no_env).unwrap_err().to_string();
        assert!(err.contains(key) && err.contains(hint), "{text}: {err}");
        assert!(err.contains(&f.0.display().to_string()), "{err}");
    }
}

#[test]
fn unknown_keys_are_refused() {
    let f = file("namespce: x\n");
    let err = Config::load(Some(&f.0), no_env).unwrap_err().to_string();
    assert!(err.contains("unknown key \"namespce\""), "{err}");
}

/// The defaults as deic-dk's reference and the docs write them: each, given as its variable,
/// changes nothing.
#[test]
fn each_default_is_the_documented_text() {
    let documented: &[(&str, &str)] = &[
        ("defaultRestartPolicy", "Never"),
        ("timeoutCreate", "1m30s"),
        ("timeoutDelete", "1m30s"),
        ("namespace", "sciencedata-dev"),
        (
            "whitelistManifestRegex",
            r"https:\/\/raw[.]githubusercontent[.]com\/deic-dk\/pod_manifests",
        ),
        ("tokenByteLimit", "4096"),
        ("nfsStorageRoot", "/tank/storage"),
        ("testingHost", "10.0.0.20"),
        ("localRegistryURL", ""),
        ("localRegistrySecret", "docker-registry-auth"),
        ("ingressDomain", ""),
        ("ingressWildcardSecret", "user-pods-wildcard"),
        ("podSubnetCidr", "10.128.0.0/15"),
        ("hostnameList", "[]"),
        ("listen", "0.0.0.0:8080"),
        ("adminListen", "0.0.0.0:8081"),
        ("allowedSourceCidrs", r#"["127.0.0.0/8", "::1/128"]"#),
        ("bearerTokenFile", ""),
        ("storageStrategy", "nfs"),
        ("storageClassName", "nfs"),
        ("storageAccessModes", "[]"),
        ("storageSize", "10Gi"),
        ("snapshotClassName", ""),
        ("snapshotsKept", "3"),
        ("snapshotTimeout", "2m"),
        ("ingressClassName", ""),
        ("manifestFetchTimeout", "10s"),
        ("manifestMaxBytes", "1048576"),
        ("maxBodyBytes", "65536"),
        ("maxCreatesInFlight", "256"),
        ("shutdownGrace", "15s"),
        ("maxConnections", "1024"),
        ("maxStreamsPerUser", "16"),
        ("maxStreams", ""),
        ("maxStreamsPerSource", ""),
        ("requestsPerUserPerSecond", "25"),
        ("requestBurstPerUser", "100"),
        ("bodyReadTimeout", "30s"),
        ("allowedOrigins", "[]"),
        ("tlsCertFile", ""),
        ("tlsKeyFile", ""),
        ("trustedProxyCidrs", "[]"),
        ("clientAddressFromCidrs", "[]"),
        ("adminGroups", "[]"),
        ("oidc", ""),
        ("proxyDomain", ""),
        ("foldUserCase", "false"),
        ("hostUsers", "true"),
        ("imagePlacement", "true"),
        (
            "placeholders",
            r#"{"count": 0, "clusters": {}, "shareOfPeak": 0, "peakWindow": "24h", "cpu": "1", "memory": "2Gi", "nodeSelector": {}, "tolerations": []}"#,
        ),
        (
            "prePull",
            r#"{"enabled": false, "pullsPerNode": 1, "nodesPerImage": 2, "window": "1h", "timeout": "10m", "nodeSelector": {}, "tolerations": []}"#,
        ),
        ("catalogue", "[]"),
        ("maxLifetime", ""),
        ("idleTimeout", ""),
        ("activityCheckInterval", "1m"),
        ("storageGracePeriod", "1m"),
        ("cullAction", "stop"),
        ("stoppedRetention", "0"),
        ("maxWorkspacesPerUser", "0"),
        ("maxCpuPerUser", ""),
        ("maxMemoryPerUser", ""),
        ("maxResourcesPerUser", "{}"),
        ("maxStoppedWorkspacesPerUser", "0"),
        ("networkPolicy", "true"),
        ("ingressNamespaces", r#"["ingress-nginx"]"#),
        ("backendNamespace", "outfit-workspaces"),
        (
            "deniedEgressCidrs",
            r#"["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "fc00::/7", "fe80::/10"]"#,
        ),
        ("allowedEgressCidrs", "[]"),
        ("defaultCluster", "default"),
        ("clusters", "[]"),
    ];
    let defaults = format!("{:?}", Config::load(None, no_env).unwrap().0);
    let mut every_var = Vec::new();
    for (key, text) in documented {
        let var = format!("BACKEND_{}", key.to_uppercase());
        let env = |name: &str| (name == var).then(|| (*text).to_owned());
        let (config, _) = Config::load(None, env).unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(format!("{config:?}"), defaults, "{key}");
        every_var.push((var, *text));
    }
    let env = |name: &str| {
        every_var
            .iter()
            .find(|(v, _)| v == name)
            .map(|(_, t)| (*t).to_owned())
    };
    assert_eq!(format!("{:?}", Config::load(None, env).unwrap().0), defaults);
    // And the list is every key: a key beyond it is unknown.
    let known = Config::load(Some(&file("x: 1\n").0), no_env)
        .unwrap_err()
        .to_string();
    let keys: Vec<&str> = documented.iter().map(|(k, _)| *k).collect();
    assert!(
        known.ends_with(&format!("(known keys: {})", keys.join(", "))),
        "{known}"
    );
}

#[test]
fn the_environment_wins_over_the_file_and_names_itself_in_errors() {
    let f = file("ingressNamespaces: [a]\nnetworkPolicy: false\ntokenByteLimit: 7\n");
    let env = |var: &str| match var {
        "BACKEND_INGRESSNAMESPACES" => Some(r#"["b", "c"]"#.to_owned()),
        "BACKEND_TOKENBYTELIMIT" => Some(" 9 ".to_owned()),
        // Ignored keys are not read from the environment either.
        "BACKEND_PODCACHEDIR" => Some("[not even valid".to_owned()),
        _ => None,
    };
    let (config, warnings) = Config::load(Some(&f.0), env).unwrap();
    assert_eq!(config.network.ingress_namespaces, ["b", "c"]);
    assert!(
        !config.network.enabled,
        "the file's value where no variable is set"
    );
    assert_eq!(config.token_byte_limit, 9);
    assert!(warnings.is_empty(), "{warnings:?}");
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "BACKEND_HOSTNAMELIST",
            "nope",
            "hostnameList",
            "expected a JSON list",
        ),
        ("BACKEND_TIMEOUTCREATE", "0", "timeoutCreate", "must be above 0"),
        (
            "BACKEND_MAXMEMORYPERUSER",
            "-1Gi",
            "maxMemoryPerUser",
            "\"-1Gi\" is negative",
        ),
        (
            "BACKEND_TLSKEYFILE",
            "/tls.key",
            "tlsCertFile",
            "set both or neither",
        ),
        (
            "BACKEND_CATALOGUE",
            r#"[{"name": "a", "url": "https://evil.example/a.yaml"}]"#,
            "catalogue",
            "does not match whitelistManifestRegex",
        ),
    ];
    for (var, value, key, hint) in cases {
        let env = |name: &str| (name == *var).then(|| (*value).to_owned());
        let err = Config::load(None, env).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{var}: key {key}: ")) && err.contains(hint),
            "{var}={value}: {err}"
        );
    }
}

#[test]
fn file_values_are_read_as_text_whatever_yaml_made_of_them() {
    let f = file(
        "tokenByteLimit: 100\nnetworkPolicy: false\nmaxCpuPerUser: 1.5\ningressClassName: ~\nnamespace: ' ws '\n",
    );
    let (config, _) = Config::load(Some(&f.0), no_env).unwrap();
    assert_eq!(config.token_byte_limit, 100);
    assert!(!config.network.enabled);
    assert_eq!(config.limits.max_cpu_millis, Some(1_500));
    assert_eq!(config.ingress_class_name, None);
    assert_eq!(config.namespace, "ws");
    for (text, key, hint) in [
        ("namespace: [a]\n", "namespace", "expected a string"),
        ("timeoutCreate: 0\n", "timeoutCreate", "must be above 0"),
        ("hostnameList: {a: 1}\n", "hostnameList", "expected a sequence"),
        ("[1, 2]\n", "", "expected a mapping"),
    ] {
        let f = file(text);
        let err = Config::load(Some(&f.0), no_env).unwrap_err().to_string();
        let at = f.0.display().to_string();
        assert!(
            err.starts_with(&at) && err.contains(key) && err.contains(hint),
            "{text}: {err}"
        );
    }
}

#[test]
fn clusters_are_read_with_their_kubeconfig_context_and_namespace() {
    let f = file(
        "defaultCluster: here\nclusters:\n  - name: east\n    kubeconfig: /etc/east.yaml\n    context: admin@east\n    namespace: ws-east\n  - name: west\n    kubeconfig: /etc/west.yaml\n\
         catalogue:\n  - name: gpu\n    url: https://raw.githubusercontent.com/deic-dk/pod_manifests/main/gpu.yaml\n    cluster: east\n",
    );
    let (config, _) = Config::load(Some(&f.0), no_env).unwrap();
    assert_eq!(config.cluster_names(), ["here", "east", "west"]);
    assert_eq!(config.clusters[0].context.as_deref(), Some("admin@east"));
    assert_eq!(config.clusters[0].namespace.as_deref(), Some("ws-east"));
    assert_eq!(
        config.clusters[1].kubeconfig,
        std::path::PathBuf::from("/etc/west.yaml")
    );
    assert_eq!(config.clusters[1].context, None);
    assert_eq!(config.catalogue[0].cluster.as_deref(), Some("east"));
    let (config, _) = Config::load(None, no_env).unwrap();
    assert_eq!(config.cluster_names(), ["default"], "one cluster unless told");
}

#[test]
fn a_bad_cluster_entry_is_named_by_key_and_index() {
    let entry = |name: &str| format!(r#"{{"name": "{name}", "kubeconfig": "/k"}}"#);
    let cases = [
        (
            format!("[{}, {{\"name\": \"b\"}}]", entry("a")),
            "clusters",
            "entry 1: missing field `kubeconfig`",
        ),
        (
            r#"[{"name": "a", "kubeconfig": "/k", "contxt": "x"}]"#.to_owned(),
            "clusters",
            "entry 0: unknown field `contxt`",
        ),
        (
            format!("[{}]", entry("East")),
            "clusters",
            "entry 0: cluster name \"East\"",
        ),
        (
            format!("[{}, {}]", entry("a"), entry("a")),
            "clusters",
            "entry 1: the name \"a\" is taken",
        ),
        (
            format!("[{}]", entry("default")),
            "clusters",
            "entry 0: the name \"default\" is taken",
        ),
        (
            r#"[{"name": "a", "kubeconfig": ""}]"#.to_owned(),
            "clusters",
            "entry 0: kubeconfig must not be empty",
        ),
    ];
    for (value, key, hint) in &cases {
        let env = |name: &str| (name == "BACKEND_CLUSTERS").then(|| value.clone());
        let err = Config::load(None, env).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("BACKEND_CLUSTERS: key {key}: ")) && err.contains(hint),
            "{value}: {err}"
        );
    }
    let env = |name: &str| {
        match name {
        "BACKEND_CATALOGUE" => Some(
            r#"[{"name": "gpu", "url": "https://raw.githubusercontent.com/deic-dk/pod_manifests/x.yaml", "cluster": "moon"}]"#
                .to_owned(),
        ),
        _ => None,
    }
    };
    let err = Config::load(None, env).unwrap_err().to_string();
    assert!(
        err.contains("key catalogue: entry \"gpu\": cluster \"moon\" is not one of default"),
        "{err}"
    );
}

/// Progress streams over every user take half the port unless set: requests keep the rest
/// (issue 46, point 2).
#[test]
fn streams_take_at_most_half_the_port_unless_set_below_it() {
    let (config, _) = Config::load(None, no_env).unwrap();
    assert_eq!(
        (config.exposure.max_connections, config.exposure.max_streams),
        (1024, 512)
    );
    let f = file("maxConnections: 40\nmaxStreams: 30\n");
    let (config, _) = Config::load(Some(&f.0), no_env).unwrap();
    assert_eq!(config.exposure.max_streams, 30);
}

/// One client address takes half the streams unless set (issue 46, point 2: any token is an
/// identity, so identities alone do not bound one machine); the addresses it is read from are
/// the configured proxies', apart from the identity headers'.
#[test]
fn a_source_takes_half_the_streams_and_its_address_comes_from_the_configured_proxies() {
    let (config, _) = Config::load(None, no_env).unwrap();
    assert_eq!(config.exposure.max_streams_per_source, 256);
    assert!(config.client_address_from_cidrs.is_empty());
    let f = file(
        "maxConnections: 40\nmaxStreams: 30\nmaxStreamsPerSource: 30\n\
         clientAddressFromCidrs: [10.0.0.0/8, 'fd00::/8']\ntrustedProxyCidrs: [127.0.0.1/32]\n",
    );
    let (config, _) = Config::load(Some(&f.0), no_env).unwrap();
    assert_eq!(config.exposure.max_streams_per_source, 30);
    let proxies: Vec<String> = config
        .client_address_from_cidrs
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(proxies, ["10.0.0.0/8", "fd00::/8"]);
    assert_eq!(
        config.trusted_proxy_cidrs.len(),
        1,
        "the identity proxies stay their own"
    );
}

#[test]
fn the_proxy_domain_needs_sign_in_and_never_holds_the_backends_own_host() {
    let secret = std::env::temp_dir().join(format!("outfit-proxy-domain-secret-{}", std::process::id()));
    std::fs::write(&secret, "s").unwrap();
    let oidc = format!(
        r#"{{"issuerUrl": "https://login.example.org", "clientId": "outfit", "clientSecretFile": {:?},
             "redirectUrl": "https://workspaces.example.org/auth/callback"}}"#,
        secret.display().to_string()
    );
    let load = |domain: &str, with_oidc: bool| {
        let env = |var: &str| match var {
            "BACKEND_PROXYDOMAIN" => Some(domain.to_owned()),
            "BACKEND_OIDC" if with_oidc => Some(oidc.clone()),
            _ => None,
        };
        Config::load(None, env).map(|(config, _)| config.proxy_domain)
    };
    assert_eq!(
        load("WS.example.org", true).unwrap().as_deref(),
        Some("ws.example.org")
    );
    for (domain, with_oidc, said) in [
        ("ws.example.org", false, "set oidc too"),
        ("example.org", true, "the backend's host"),
        ("not a domain", true, "not a DNS domain"),
    ] {
        let error = load(domain, with_oidc).unwrap_err().to_string();
        assert!(
            error.contains("proxyDomain") && error.contains(said),
            "{domain}: {error}"
        );
    }
    std::fs::remove_file(&secret).unwrap();
}
