//! The host bridge against the real binary: the daemon's routes and bad-input table, its
//! lifecycle, the shims, install/status/uninstall with fake supervisors, and end-to-end runs
//! through a sandbox (OAuth callbacks forwarded into it among them).

mod bad_input;
mod callbacks;
mod harness;
mod install;
mod lifecycle;
mod routes;
mod sandbox;
mod shims;
