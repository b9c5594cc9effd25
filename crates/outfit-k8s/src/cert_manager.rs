//! The objects that let cert-manager issue outfit's serving certificate and inject its CA
//! (`outfit manifests --cert-manager`).

use serde_json::{Value, json};

use crate::{
    component::Component,
    names::{NAME, TLS_SECRET, service_dns_names},
};

/// cert-manager's objects, as its docs set up a CA for webhooks: a self-signed Issuer signs a CA
/// Certificate, whose Issuer signs the serving Certificate (so a renewed serving certificate keeps
/// the CA in `caBundle`, and no admission fails over the swap).
pub(crate) fn objects(namespace: &str) -> Vec<Value> {
    let labels = || {
        Component {
            name: NAME,
            namespace,
        }
        .labels()
    };
    let issuer = |name: &str, spec: Value| {
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
               "metadata": {"name": name, "namespace": namespace, "labels": labels()}, "spec": spec})
    };
    let root = format!("{NAME}-selfsigned");
    let ca = format!("{NAME}-ca");
    vec![
        issuer(&root, json!({"selfSigned": {}})),
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": ca, "namespace": namespace, "labels": labels()},
               "spec": {"isCA": true, "commonName": "outfit CA", "secretName": ca, "duration": "87600h",
                        "privateKey": {"algorithm": "ECDSA", "size": 256},
                        "issuerRef": {"name": root, "kind": "Issuer", "group": "cert-manager.io"}}}),
        issuer(&ca, json!({"ca": {"secretName": ca}})),
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": TLS_SECRET, "namespace": namespace, "labels": labels()},
               "spec": {"secretName": TLS_SECRET, "dnsNames": service_dns_names(namespace),
                        "duration": "2160h", "renewBefore": "720h",
                        "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
                        "issuerRef": {"name": ca, "kind": "Issuer", "group": "cert-manager.io"}}}),
    ]
}
