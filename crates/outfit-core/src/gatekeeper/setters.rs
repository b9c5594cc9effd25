//! What each mutator kind writes at the end of its location.

use std::borrow::Cow;

use serde_json::Value;

use super::{
    action::{Action, AssignValue, MetadataField},
    image::ImageParams,
    traverse::Setter,
};

/// The object's name and namespace, which `fromMetadata` reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Meta<'a> {
    pub(crate) name: &'a str,
    pub(crate) namespace: Option<&'a str>,
}

/// The setter for one application of `action` to an object with metadata `meta`. An enum rather
/// than a boxed trait object: it is built for every candidate mutator on every request.
pub(super) fn for_action<'a>(action: &'a Action, meta: Meta<'_>) -> ActionSetter<'a> {
    match action {
        Action::Assign(value) | Action::Metadata(value) => ActionSetter::Assign(Assign(resolve(value, meta))),
        Action::ModifySet { prune, values } => ActionSetter::ModifySet(ModifySet {
            prune: *prune,
            values,
        }),
        Action::Image(params) => ActionSetter::Image(Image(params)),
    }
}

/// One of the setters below.
pub(super) enum ActionSetter<'a> {
    Assign(Assign<'a>),
    ModifySet(ModifySet<'a>),
    Image(Image<'a>),
}

impl ActionSetter<'_> {
    fn get(&self) -> &dyn Setter {
        match self {
            ActionSetter::Assign(setter) => setter,
            ActionSetter::ModifySet(setter) => setter,
            ActionSetter::Image(setter) => setter,
        }
    }
}

impl Setter for ActionSetter<'_> {
    fn value_for(&self, current: Option<&Value>) -> Result<Option<Value>, String> {
        self.get().value_for(current)
    }

    fn would_change(&self, current: Option<&Value>) -> bool {
        self.get().would_change(current)
    }

    fn element(&self) -> Result<&Value, String> {
        self.get().element()
    }
}

fn resolve<'a>(value: &'a AssignValue, meta: Meta<'_>) -> Cow<'a, Value> {
    match value {
        AssignValue::Value(value) => Cow::Borrowed(value),
        AssignValue::FromMetadata(MetadataField::Name) => Cow::Owned(Value::String(meta.name.to_owned())),
        AssignValue::FromMetadata(MetadataField::Namespace) => {
            Cow::Owned(Value::String(meta.namespace.unwrap_or_default().to_owned()))
        }
    }
}

/// Assign and AssignMetadata: the value replaces whatever is there.
pub(super) struct Assign<'a>(Cow<'a, Value>);

impl Setter for Assign<'_> {
    fn value_for(&self, current: Option<&Value>) -> Result<Option<Value>, String> {
        Ok(self.would_change(current).then(|| self.0.as_ref().clone()))
    }

    fn would_change(&self, current: Option<&Value>) -> bool {
        current != Some(self.0.as_ref())
    }

    fn element(&self) -> Result<&Value, String> {
        match self.0.as_ref() {
            value @ Value::Object(_) => Ok(value),
            _ => Err("assign.value for a keyed list is not an object".into()),
        }
    }
}

/// Deep equality with one number rule: numbers are equal when Kubernetes holds them as one
/// value ([`crate::semantic::number`]: `80 == 80.0`, integers compared exactly), so a set never
/// gains a second copy of a number written differently.
pub(crate) fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => crate::semantic::number(x) == crate::semantic::number(y),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

pub(super) struct ModifySet<'a> {
    prune: bool,
    values: &'a [Value],
}

impl ModifySet<'_> {
    fn not_a_list(current: &Value) -> String {
        format!("{current} is not a list of values, cannot treat it as a set")
    }
}

impl Setter for ModifySet<'_> {
    fn value_for(&self, current: Option<&Value>) -> Result<Option<Value>, String> {
        if !self.would_change(current) {
            return Ok(None);
        }
        let items = match current {
            None if self.prune => return Ok(None),
            None => return Ok(Some(Value::Array(self.values.to_vec()))),
            Some(Value::Array(items)) => items,
            Some(other) => return Err(Self::not_a_list(other)),
        };
        let mut items = items.clone();
        if self.prune {
            items.retain(|item| !self.values.iter().any(|v| same(v, item)));
        } else {
            for value in self.values {
                if !items.iter().any(|item| same(item, value)) {
                    items.push(value.clone());
                }
            }
        }
        Ok(Some(Value::Array(items)))
    }

    fn would_change(&self, current: Option<&Value>) -> bool {
        match current {
            // Gatekeeper creates the empty parents of a pruned missing field; outfit changes nothing.
            None => !self.prune,
            Some(Value::Array(items)) if self.prune => {
                items.iter().any(|i| self.values.iter().any(|v| same(v, i)))
            }
            Some(Value::Array(items)) => self.values.iter().any(|v| !items.iter().any(|i| same(i, v))),
            Some(_) => true,
        }
    }
}

pub(super) struct Image<'a>(&'a ImageParams);

impl Image<'_> {
    fn current(current: Option<&Value>) -> Result<&str, String> {
        match current {
            None => Ok(""),
            Some(Value::String(image)) => Ok(image),
            Some(other) => Err(format!("the image at the location is not a string: {other}")),
        }
    }
}

impl Setter for Image<'_> {
    fn value_for(&self, current: Option<&Value>) -> Result<Option<Value>, String> {
        let before = Self::current(current)?;
        let after = self.0.mutate(before);
        Ok((current.is_none() || after != before).then_some(Value::String(after)))
    }

    fn would_change(&self, current: Option<&Value>) -> bool {
        match Self::current(current) {
            Ok(before) => current.is_none() || self.0.mutate(before) != before,
            Err(_) => true,
        }
    }
}
