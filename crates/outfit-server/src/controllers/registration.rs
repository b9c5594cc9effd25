//! The webhook controller: watches outfit's MutatingWebhookConfiguration (that one object, by
//! name) and, on the replica that holds the Lease, keeps its `rules` equal to the kinds the
//! serving policies apply to and its `caBundle` equal to the CA of the certificate served. It
//! acts on every change of the configuration (a hand edit is undone), of the policies and of the
//! certificate. What the configuration should say is [`outfit_k8s::registration::plan`]'s; this is
//! the watching and writing.

use std::{
    collections::{BTreeSet, HashMap},
    sync::Arc,
    time::Duration,
};

use arc_swap::ArcSwap;
use base64::{Engine, prelude::BASE64_STANDARD};
use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, PostParams},
    discovery::Discovery,
    runtime::{WatchStreamExt, watcher},
};
use outfit_core::PolicySet;
use outfit_k8s::{
    registration::{Desired, Reason, plan},
    rules::{self, Rules},
};
use serde_json::Value;
use tokio::{sync::watch, time::Instant};
use tokio_util::sync::CancellationToken;

use outfit_k8s::api_error::{brief, brief_watch};

use crate::{controllers::changes::changed, metrics::Metrics, policies::ReloadCounts};

/// What the controller reads and tells.
pub struct Inputs {
    /// The serving policy set.
    pub policies: Arc<ArcSwap<PolicySet>>,
    /// Fires after each policy reload.
    pub policy_reloads: watch::Receiver<ReloadCounts>,
    /// The PEM bundle of the CAs of the certificate served; `None` when outfit does not know it
    /// (cert-manager's injector fills `caBundle`).
    pub ca_bundle: watch::Receiver<Option<String>>,
    /// Whether this replica holds the Lease.
    pub leading: watch::Receiver<bool>,
    /// Told the PEM bundle the configuration's first webhook trusts, as the API server has it
    /// (the certificate rotation waits on it).
    pub published: Arc<watch::Sender<Option<String>>>,
    /// Where writes are counted.
    pub metrics: Arc<Metrics>,
}

/// The kinds' resources looked up in the API server's discovery (kinds of CRDs).
#[derive(Default)]
struct Discovered {
    resources: HashMap<(String, String), String>,
    /// The kinds last looked for, and when: a kind the API server does not serve is looked up
    /// again at most every [`REDISCOVER`].
    last: Option<(BTreeSet<(String, String)>, Instant)>,
}

/// How often kinds the API server does not serve are looked for again (a CRD installed after
/// its policies gets its rule within this).
const REDISCOVER: Duration = Duration::from_secs(5);
/// Wait before writing again after a write failed for another reason than a conflict.
const RETRY: Duration = Duration::from_secs(1);

/// The controller's state between events.
struct Controller {
    client: Client,
    api: Api<DynamicObject>,
    name: String,
    inputs: Inputs,
    /// The configuration as last seen (`None`: not there).
    current: Option<Value>,
    /// What the configuration said when last in step, since this replica began writing.
    in_step: Option<Desired>,
    discovered: Discovered,
    missing_logged: bool,
}

/// Runs until `shutdown`.
pub async fn run(client: Client, name: String, inputs: Inputs, shutdown: CancellationToken) {
    let resource = ApiResource::erase::<MutatingWebhookConfiguration>(&());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut events = events(api.clone(), &name);
    let mut controller = Controller {
        client,
        api,
        name,
        inputs,
        current: None,
        in_step: None,
        discovered: Discovered::default(),
        missing_logged: false,
    };
    let mut listing: Option<Option<Value>> = None;
    let mut retry_at: Option<Instant> = None;
    loop {
        let retry = async {
            match retry_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let inputs = &mut controller.inputs;
        tokio::select! {
            () = shutdown.cancelled() => return,
            event = events.next() => match event {
                Some(Ok(watcher::Event::Init)) => { listing = Some(None); continue; }
                Some(Ok(watcher::Event::InitApply(object))) => { listing = Some(Some(value(object))); continue; }
                Some(Ok(watcher::Event::InitDone)) => controller.current = listing.take().flatten(),
                Some(Ok(watcher::Event::Apply(object))) => controller.current = Some(value(object)),
                Some(Ok(watcher::Event::Delete(_))) => controller.current = None,
                Some(Err(error)) => {
                    tracing::warn!(configuration = %controller.name, error = brief_watch(&error), "cannot watch the webhook configuration; retrying");
                    inputs.metrics.configuration_error();
                    continue;
                }
                None => return,
            },
            () = changed(&mut inputs.policy_reloads) => {}
            () = changed(&mut inputs.ca_bundle) => {}
            () = changed(&mut inputs.leading) => {}
            () = retry => retry_at = None,
        }
        publish(&controller.inputs.published, controller.current.as_ref());
        if !*controller.inputs.leading.borrow() {
            controller.in_step = None;
            continue;
        }
        retry_at = controller.reconcile().await.map(|wait| Instant::now() + wait);
    }
}

impl Controller {
    /// Writes the configuration if it does not say what it should. Returns when to look again
    /// without an event: after a write that failed for another reason than a conflict, or while
    /// some policies' kinds are not served.
    async fn reconcile(&mut self) -> Option<Duration> {
        let Some(configuration) = self.current.clone() else {
            if !self.missing_logged {
                tracing::warn!(configuration = %self.name, "the webhook configuration is not there; waiting for it (install it with outfit manifests)");
                self.missing_logged = true;
            }
            return None;
        };
        self.missing_logged = false;
        let (desired, complete) = self.desired(&configuration).await;
        let again = (!complete).then_some(REDISCOVER);
        let Some((updated, changes)) = plan(&configuration, &desired) else {
            self.in_step = Some(desired);
            return again;
        };
        let object: DynamicObject = match serde_json::from_value(updated) {
            Ok(object) => object,
            Err(error) => {
                tracing::error!(%error, "the webhook configuration does not read back as an object");
                return again;
            }
        };
        // The resourceVersion read makes the write conditional: a change made meanwhile wins, and
        // the watch brings it for another look.
        match self
            .api
            .replace(&self.name, &PostParams::default(), &object)
            .await
        {
            Ok(stored) => {
                for change in &changes {
                    let reason = Reason::of(change.field, self.in_step.as_ref(), &desired);
                    tracing::info!(configuration = %self.name, reason = reason.as_str(), "{change}");
                    self.inputs
                        .metrics
                        .configuration_updated(change.field.as_str(), reason.as_str());
                }
                self.current = Some(value(stored));
                publish(&self.inputs.published, self.current.as_ref());
                self.in_step = Some(desired);
                again
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                tracing::debug!(configuration = %self.name, "the webhook configuration changed meanwhile; looking again");
                again
            }
            Err(error) => {
                tracing::warn!(configuration = %self.name, error = brief(&error), "cannot write the webhook configuration; retrying");
                self.inputs.metrics.configuration_error();
                Some(RETRY)
            }
        }
    }

    /// What the configuration should say now, and whether every kind was placed: a kind the API
    /// server does not serve (yet) leaves the rules as they are.
    async fn desired(&mut self, configuration: &Value) -> (Desired, bool) {
        let set = self.inputs.policies.load_full();
        let (rules, complete) = match rules_for(&self.client, &set, &mut self.discovered).await {
            Ok(rules) => (rules::to_json(&rules), true),
            Err(unknown) => {
                tracing::warn!(configuration = %self.name, error = %unknown, "some policies apply to kinds the API server does not serve; the rules stay as they are until it does");
                (configuration["webhooks"][0]["rules"].clone(), false)
            }
        };
        let desired = Desired {
            rules,
            ..Desired::new(&Rules::Pods, self.inputs.ca_bundle.borrow().as_deref())
        };
        (desired, complete)
    }
}

/// The watch of the one configuration: list and watch by `metadata.name`, which RBAC's
/// `resourceNames` allows.
fn events(
    api: Api<DynamicObject>,
    name: &str,
) -> BoxStream<'static, Result<watcher::Event<DynamicObject>, watcher::Error>> {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    watcher(api, config).default_backoff().boxed()
}

fn value(object: DynamicObject) -> Value {
    serde_json::to_value(object).unwrap_or_default()
}

/// Tells the PEM bundle the configuration trusts, when it changed.
fn publish(published: &watch::Sender<Option<String>>, configuration: Option<&Value>) {
    let bundle = configuration
        .and_then(|c| c["webhooks"][0]["clientConfig"]["caBundle"].as_str())
        .and_then(|b| BASE64_STANDARD.decode(b).ok())
        .and_then(|pem| String::from_utf8(pem).ok());
    published.send_if_modified(|old| {
        let modified = *old != bundle;
        if modified {
            old.clone_from(&bundle);
        }
        modified
    });
}

/// The rules for `set`; kinds outfit does not know are looked up in the API server's discovery
/// (the CRDs installed).
async fn rules_for(
    client: &Client,
    set: &PolicySet,
    discovered: &mut Discovered,
) -> Result<Rules, rules::UnknownKinds> {
    let resolve = |resources: &HashMap<(String, String), String>| {
        let resources = resources.clone();
        move |group: &str, kind: &str| resources.get(&(group.to_owned(), kind.to_owned())).cloned()
    };
    let unknown = match rules::from_policies_resolving(set, &[], resolve(&discovered.resources)) {
        Ok(rules) => return Ok(rules),
        Err(unknown) => unknown,
    };
    let missing: BTreeSet<(String, String)> = unknown.missing.iter().cloned().collect();
    let fresh = discovered
        .last
        .as_ref()
        .is_some_and(|(kinds, at)| *kinds == missing && at.elapsed() < REDISCOVER);
    if fresh {
        return Err(unknown);
    }
    discovered.last = Some((missing.clone(), Instant::now()));
    let groups: Vec<&str> = missing.iter().map(|(group, _)| group.as_str()).collect();
    match Discovery::new(client.clone()).filter(&groups).run().await {
        Ok(discovery) => {
            for group in discovery.groups() {
                for (resource, _) in group.recommended_resources() {
                    discovered
                        .resources
                        .insert((resource.group, resource.kind), resource.plural);
                }
            }
        }
        Err(error) => tracing::warn!(error = brief(&error), "API discovery failed"),
    }
    rules::from_policies_resolving(set, &[], resolve(&discovered.resources))
}
