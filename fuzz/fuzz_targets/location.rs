//! Any text as a Gatekeeper `location` (`spec.containers[name: *].image`):
//! `outfit_core::gatekeeper::location::Location::parse`, as every mutator's `location` and
//! `pathTests[].subPath` is read.
//!
//! Invariants: no panic; an error points at a column inside the text (or just after it); a
//! location that parses prints (`Display`, used in messages and conflict reports) as text that
//! parses back to the same location and prints the same again.
//!
//! Run: `hack/fuzz.sh run location 60`

#![no_main]

use libfuzzer_sys::fuzz_target;
use outfit_core::gatekeeper::location::{Location, Node};

fuzz_target!(|text: &str| {
    match Location::parse(text) {
        Err(error) => {
            let columns = text.chars().count() + 1;
            assert!(
                (1..=columns).contains(&error.column),
                "column {} outside 1..={columns}: {error}",
                error.column
            );
        }
        Ok(location) => {
            // The grammar: a location starts with a field, and a selector follows a field.
            if let Some(first) = location.nodes().first() {
                assert!(matches!(first, Node::Object(_)), "{location:?}");
            }
            for pair in location.nodes().windows(2) {
                assert!(
                    matches!(pair[0], Node::Object(_)) || matches!(pair[1], Node::Object(_)),
                    "two selectors in a row: {location:?}"
                );
            }
            let printed = location.to_string();
            let again = Location::parse(&printed)
                .unwrap_or_else(|e| panic!("{text:?} printed as {printed:?}, which does not parse: {e}"));
            assert_eq!(again, location, "{text:?} printed as {printed:?}");
            assert_eq!(again.to_string(), printed);
            assert!(location.starts_with(&again) && again.starts_with(&Location::default()));
        }
    }
});
