//! The herdr plugin's mapping decoder (`airlock-herdr/src/store.rs`): one JSON file per pane under
//! the plugin's state directory, read back on every action.
//!
//! Beyond "no panic": an accepted mapping has the version this build reads, reads back the same
//! after serialising it again, and its pane id gives a file name of safe characters only.
#![no_main]

use std::path::Path;

use airlock_herdr::store::{MAPPING_VERSION, file_stem, parse_mapping};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("/fuzz/panes/w1_p2-0123456789.json");
    let mapping = match parse_mapping(path, data) {
        Ok(m) => m,
        Err(e) => {
            assert!(e.message.contains("/fuzz/panes/"), "{}", e.message);
            return;
        }
    };
    assert_eq!(mapping.version, MAPPING_VERSION);
    let json = serde_json::to_vec(&mapping).expect("serialises");
    let again = parse_mapping(path, &json).unwrap_or_else(|e| panic!("{}", e.message));
    assert_eq!(again, mapping);
    let stem = file_stem(&mapping.pane_id);
    assert!(
        stem.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')),
        "{stem:?}"
    );
    assert!(stem.len() <= 64 + 11, "{stem:?}");
});
