//! An answer checked against an OpenAPI document's schema: every property the schema requires
//! is there and none it does not list, all the way down (`$ref`s followed, `allOf` parts taken
//! together, an Option's `oneOf` with null). What the backend's unit tests check serialized
//! examples with, and the end-to-end test the running backend's answers.

use serde_json::{Map, Value};

/// `schema` with its `$ref` followed, in the document `doc`; a reference to nothing panics.
pub fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(target) => {
            let name = target
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("{target}: not a schema of the components"));
            let found = &doc["components"]["schemas"][name];
            assert!(found.is_object(), "{target} is not in the document");
            resolve(doc, found)
        }
        None => schema,
    }
}

/// The properties and the required ones of an object `schema`, its `allOf` parts together.
pub fn object_of(doc: &Value, schema: &Value) -> (Map<String, Value>, Vec<String>) {
    let schema = resolve(doc, schema);
    let mut properties = schema["properties"].as_object().cloned().unwrap_or_default();
    let mut required: Vec<String> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    for part in schema["allOf"].as_array().into_iter().flatten() {
        let (more, also) = object_of(doc, part);
        for (key, value) in more {
            properties.entry(key).or_insert(value);
        }
        required.extend(also);
    }
    (properties, required)
}

/// Panics, naming where (`at`), unless `value` has every property `schema` requires and none it
/// does not list, in every object and array within. A map (an object schema without
/// properties) holds data, not properties: its keys are not checked.
pub fn conforms(doc: &Value, schema: &Value, value: &Value, at: &str) {
    let schema = resolve(doc, schema);
    if value.is_null() {
        return;
    }
    if let Some(variants) = schema["oneOf"].as_array() {
        for variant in variants.iter().filter(|v| v["type"] != "null") {
            conforms(doc, variant, value, at);
        }
        return;
    }
    match value {
        Value::Object(fields) => {
            let (properties, required) = object_of(doc, schema);
            if properties.is_empty() {
                return;
            }
            for name in &required {
                assert!(
                    fields.contains_key(name),
                    "{at}: required {name:?} is not in {value}"
                );
            }
            for (name, field) in fields {
                let property = properties
                    .get(name)
                    .unwrap_or_else(|| panic!("{at}: {name:?} is answered but not in the schema: {value}"));
                conforms(doc, property, field, &format!("{at}.{name}"));
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                conforms(doc, &schema["items"], item, &format!("{at}[{i}]"));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_property_missing_or_not_listed_fails_down_to_nested_objects() {
        let doc = json!({"components": {"schemas": {
            "Item": {"type": "object", "required": ["name"], "properties": {"name": {}, "note": {}}},
            "List": {"allOf": [{"type": "object", "required": ["items"],
                                "properties": {"items": {"type": "array", "items": {"$ref": "#/components/schemas/Item"}}}},
                               {"type": "object", "properties": {"warnings": {}}}]},
        }}});
        let list = json!({"$ref": "#/components/schemas/List"});
        let fails =
            |value: Value| std::panic::catch_unwind(|| conforms(&doc, &list, &value, "list")).is_err();
        assert!(!fails(
            json!({"items": [{"name": "a", "note": null}], "warnings": []})
        ));
        assert!(fails(json!({"warnings": []})), "items is required");
        assert!(
            fails(json!({"items": [{"note": "n"}]})),
            "an item's name is required"
        );
        assert!(fails(json!({"items": [], "extra": 1})), "extra is not listed");
        assert!(
            fails(json!({"items": [{"name": "a", "nome": 1}]})),
            "nome is not listed"
        );
    }
}
