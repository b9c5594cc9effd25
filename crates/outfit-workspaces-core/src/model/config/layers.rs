//! The file and the environment as one serde [`Deserializer`](de::Deserializer) for
//! [`Settings`](super::settings::Settings): in one pass over the keys the settings declare, each
//! takes its `BACKEND_<KEY UPPERCASED>` variable when set, else the file's value, else its default.
//! Unlike viper, the variable applies whether or not the file names the key. A value its reader
//! refuses is reported with its key and where it came from.

use std::{collections::BTreeMap, fmt};

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor, value::StrDeserializer};
use serde_json::{Map, Value};

/// Why the layers could not be read.
#[derive(Debug)]
pub(super) enum LayerError {
    /// A value its key's reader refused.
    Key {
        origin: String,
        key: String,
        reason: String,
    },
    /// A key the settings don't declare; only the file can name one.
    Unknown {
        key: String,
        known: &'static [&'static str],
    },
    /// Anything else serde could report (every key has a default, so nothing is missing).
    Other(String),
}

impl fmt::Display for LayerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Key { origin, key, reason } => write!(f, "{origin}: key {key}: {reason}"),
            Self::Unknown { key, .. } => write!(f, "unknown key {key:?}"),
            Self::Other(reason) => f.write_str(reason),
        }
    }
}

impl std::error::Error for LayerError {}

impl de::Error for LayerError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        Self::Other(message.to_string())
    }

    fn unknown_field(key: &str, known: &'static [&'static str]) -> Self {
        Self::Unknown {
            key: key.to_owned(),
            known,
        }
    }
}

/// The file's keys (already a mapping), its name for messages, the environment, and where each
/// key that is not a default came from (filled while reading, for checks across keys).
pub(super) struct Layers<'a, E> {
    pub(super) file: Map<String, Value>,
    pub(super) file_origin: &'a str,
    pub(super) env: E,
    pub(super) origins: &'a mut BTreeMap<&'static str, String>,
}

impl<'de, E: Fn(&str) -> Option<String>> de::Deserializer<'de> for Layers<'_, E> {
    type Error = LayerError;

    fn deserialize_struct<V: Visitor<'de>>(
        mut self,
        _name: &'static str,
        keys: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, LayerError> {
        // The keys the settings don't know go first, so a typo is what gets reported.
        let mut entries: Vec<(String, Value, String)> = Vec::new();
        let unknown: Vec<String> = self
            .file
            .keys()
            .filter(|key| !keys.contains(&key.as_str()))
            .cloned()
            .collect();
        for key in unknown {
            let value = self.file.remove(&key).unwrap_or_default();
            entries.push((key, value, self.file_origin.to_owned()));
        }
        for key in keys {
            let var = format!("BACKEND_{}", key.to_uppercase());
            let (value, origin) = match (self.env)(&var) {
                Some(text) => (Value::String(text), var),
                None => match self.file.remove(*key) {
                    Some(value) => (value, self.file_origin.to_owned()),
                    None => continue,
                },
            };
            self.origins.insert(key, origin.clone());
            entries.push(((*key).to_owned(), value, origin));
        }
        visitor.visit_map(Entries {
            entries: entries.into_iter(),
            current: None,
        })
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, LayerError> {
        Err(LayerError::Other(
            "the configuration is read into a struct of keys".to_owned(),
        ))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
        unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

/// The chosen value of each key, with where it came from.
struct Entries {
    entries: std::vec::IntoIter<(String, Value, String)>,
    current: Option<(String, Value, String)>,
}

impl<'de> MapAccess<'de> for Entries {
    type Error = LayerError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, LayerError> {
        let Some(entry) = self.entries.next() else {
            return Ok(None);
        };
        let name: StrDeserializer<'_, LayerError> = entry.0.as_str().into_deserializer();
        let key = seed.deserialize(name)?;
        self.current = Some(entry);
        Ok(Some(key))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, LayerError> {
        let (key, value, origin) = self
            .current
            .take()
            .ok_or_else(|| LayerError::Other("a value asked for before its key".to_owned()))?;
        seed.deserialize(value).map_err(|e| LayerError::Key {
            origin,
            key,
            reason: e.to_string(),
        })
    }
}
