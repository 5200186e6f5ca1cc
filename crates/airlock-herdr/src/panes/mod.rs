//! The manifest's `[[panes]]`: the deletion popup and the sandboxes overlay.

pub mod overlay;
