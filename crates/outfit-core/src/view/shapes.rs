//! The lenient JSON shapes views are built of: a string, a value of an expected type, a list, a
//! map kept as raw members. A field of the wrong JSON type is recorded, not an error, so the merge
//! can say exactly which field is malformed.

use std::{borrow::Cow, fmt, marker::PhantomData};

use serde::{
    Deserialize, Deserializer,
    de::{IgnoredAny, MapAccess, SeqAccess, Visitor, value::MapAccessDeserializer},
};
use serde_json::{Value, value::RawValue};

/// Answers every JSON type that the visitor does not expect with `$wrong`, consuming it.
macro_rules! otherwise {
    ($wrong:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($wrong)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($wrong)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($wrong)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($wrong)
        }
    };
}

macro_rules! otherwise_str {
    ($wrong:expr) => {
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok($wrong)
        }
    };
}

macro_rules! otherwise_seq {
    ($wrong:expr) => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok($wrong)
        }
    };
}

macro_rules! otherwise_map {
    ($wrong:expr) => {
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok($wrong)
        }
    };
}

/// A field that should be a string: `None` when absent, null or of another type (as
/// `Value::as_str` reads it). Borrowed from the text unless it had escapes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Str<'a>(pub(crate) Option<Cow<'a, str>>);

impl Str<'_> {
    pub(crate) fn as_deref(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for StrVisitor<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Some(Cow::Borrowed(s))))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Str(Some(Cow::Owned(s.to_owned()))))
            }
            fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
                Ok(Str(Some(Cow::Owned(s))))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Str(None))
            }
            otherwise!(Str(None));
            otherwise_seq!(Str(None));
            otherwise_map!(Str(None));
        }
        deserializer.deserialize_any(StrVisitor(PhantomData))
    }
}

/// A field that should be an object read as `T`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Shape<T> {
    /// Absent or null.
    #[default]
    Absent,
    /// An object.
    Is(T),
    /// Another JSON type.
    Wrong,
}

impl<T> Shape<T> {
    /// The object; `Err` when the field has another type.
    pub(crate) fn object(&self) -> Result<Option<&T>, WrongType> {
        match self {
            Shape::Absent => Ok(None),
            Shape::Is(object) => Ok(Some(object)),
            Shape::Wrong => Err(WrongType),
        }
    }

    /// The object, if the field is one.
    pub(crate) fn get(&self) -> Option<&T> {
        match self {
            Shape::Is(object) => Some(object),
            Shape::Absent | Shape::Wrong => None,
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Shape<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ShapeVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ShapeVisitor<T> {
            type Value = Shape<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(Shape::Is)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Shape::Absent)
            }
            otherwise!(Shape::Wrong);
            otherwise_str!(Shape::Wrong);
            otherwise_seq!(Shape::Wrong);
        }
        deserializer.deserialize_any(ShapeVisitor(PhantomData))
    }
}

/// A field that should be a list of `T`: raw JSON entries, or each entry read as a view.
#[derive(Debug, Clone, Default)]
pub(crate) enum List<T> {
    /// Absent or null.
    #[default]
    Absent,
    /// A list.
    Items(Vec<T>),
    /// Another JSON type.
    Wrong,
}

impl<T> List<T> {
    /// The entries (none when absent); `Err` when the field has another type.
    pub(crate) fn items(&self) -> Result<&[T], WrongType> {
        match self {
            List::Absent => Ok(&[]),
            List::Items(items) => Ok(items),
            List::Wrong => Err(WrongType),
        }
    }

    /// How many entries, when the field is a list (even an empty one); `None` otherwise.
    pub(crate) fn present_len(&self) -> Option<usize> {
        match self {
            List::Items(items) => Some(items.len()),
            List::Absent | List::Wrong => None,
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ListVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ListVisitor<T> {
            type Value = List<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(4));
                while let Some(item) = seq.next_element::<T>()? {
                    items.push(item);
                }
                Ok(List::Items(items))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(List::Absent)
            }
            otherwise!(List::Wrong);
            otherwise_str!(List::Wrong);
            otherwise_map!(List::Wrong);
        }
        deserializer.deserialize_any(ListVisitor(PhantomData))
    }
}

/// The marker of a field whose JSON type is wrong; the caller knows which field it asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WrongType;

/// An object's members in their order, values raw: `metadata.labels`, `metadata.annotations`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> Members<'a> {
    /// The value of `key` (the last one, as a parsed map would keep, if the text repeats it).
    pub(crate) fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// The keys, in text order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_ref())
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for MembersVisitor<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some((Str(key), value)) = map.next_entry::<Str<'de>, &'de RawValue>()? {
                    members.push((key.unwrap_or_default(), value));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor(PhantomData))
    }
}

/// A raw JSON value as a string, if it is one. Borrowed when the text has no escapes.
pub(crate) fn raw_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    let text = raw.get();
    if let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"'))
        && !inner.contains('\\')
    {
        return Some(Cow::Borrowed(inner));
    }
    serde_json::from_str::<Str<'_>>(text).ok().and_then(|s| s.0)
}

/// A raw JSON value parsed, for the rare comparisons that need the whole of it. `Null` if it
/// cannot be (it was validated once already, so only nesting beyond serde_json's limit fails).
pub(crate) fn raw_value(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Probe<'a> {
        #[serde(borrow)]
        s: Str<'a>,
        #[serde(borrow)]
        l: List<&'a RawValue>,
        #[serde(borrow)]
        o: Shape<Members<'a>>,
    }

    fn probe(text: &str) -> Probe<'_> {
        serde_json::from_str(text).expect("valid probe")
    }

    #[test]
    fn every_json_type_in_every_field_is_read_without_error() {
        for value in [
            "null",
            "true",
            "1",
            "-1",
            "1.5",
            r#""x""#,
            "[1,[2]]",
            r#"{"a":{"b":1}}"#,
        ] {
            let text = format!(r#"{{"s":{value},"l":{value},"o":{value}}}"#);
            let probe = probe(&text);
            assert_eq!(probe.s.0.is_some(), value == r#""x""#, "{value}");
            assert_eq!(
                matches!(probe.l, List::Items(_)),
                value.starts_with('['),
                "{value}"
            );
            assert_eq!(matches!(probe.o, Shape::Is(_)), value.starts_with('{'), "{value}");
            let absent_or_null = value == "null";
            assert_eq!(matches!(probe.l, List::Absent), absent_or_null, "{value}");
            assert_eq!(matches!(probe.o, Shape::Absent), absent_or_null, "{value}");
        }
        let absent = probe("{}");
        assert!(
            absent.s.0.is_none() && matches!(absent.l, List::Absent) && matches!(absent.o, Shape::Absent)
        );
    }

    #[test]
    fn strings_borrow_unless_escaped_and_members_keep_the_last_duplicate() {
        let probe = probe(r#"{"s":"plain","o":{"a":"1","b":"x\"y","a":"2"}}"#);
        assert!(matches!(probe.s.0, Some(Cow::Borrowed("plain"))));
        let Shape::Is(members) = probe.o else {
            panic!("an object")
        };
        assert_eq!(members.keys().collect::<Vec<_>>(), ["a", "b", "a"]);
        assert_eq!(raw_str(members.get("a").expect("a")).as_deref(), Some("2"));
        assert_eq!(raw_str(members.get("b").expect("b")).as_deref(), Some("x\"y"));
        assert!(members.get("c").is_none());
    }

    #[test]
    fn list_entries_stay_raw() {
        let probe = probe(r#"{"l":[{"name":"a"}, 3, "x"]}"#);
        let items = probe.l.items().expect("a list");
        assert_eq!(
            items.iter().map(|r| r.get()).collect::<Vec<_>>(),
            [r#"{"name":"a"}"#, "3", r#""x""#]
        );
        assert!(raw_str(items[1]).is_none());
        assert_eq!(raw_value(items[0]), serde_json::json!({"name": "a"}));
    }
}
