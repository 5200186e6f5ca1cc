//! The escape cases. Each one makes attempts that must fail and at least one control that must
//! succeed, so a sandbox that fails to start (or refuses everything) cannot pass.
//! Names are what `docs/security.md` cites.

use crate::harness::{Mode, Outcome};

mod ahead;
mod files;
mod host_objects;
mod host_trust;
mod kernel;
mod lifecycle;
mod nested;
mod network;
mod processes;
mod sockets;
mod terminal;

/// One named case.
pub struct Case {
    pub name: &'static str,
    pub run: fn(&Mode) -> Outcome,
}

/// Every case, in the order they run.
pub const CASES: &[Case] = &[
    Case {
        name: "secrets-ssh-key-absent",
        run: files::ssh_key_absent,
    },
    Case {
        name: "secrets-aws-credentials-absent",
        run: files::aws_credentials_absent,
    },
    Case {
        name: "secrets-other-credentials-absent",
        run: files::other_credentials_absent,
    },
    Case {
        name: "etc-secrets-absent",
        run: files::etc_secrets_absent,
    },
    Case {
        name: "etc-ssl-private-absent",
        run: host_objects::etc_ssl_private_absent,
    },
    Case {
        name: "host-homes-absent",
        run: files::host_homes_absent,
    },
    Case {
        name: "env-files-read-empty",
        run: files::env_files_read_empty,
    },
    Case {
        name: "env-files-not-writable",
        run: files::env_files_not_writable,
    },
    Case {
        name: "env-symlink-to-host-secret",
        run: files::env_symlink_to_host_secret,
    },
    Case {
        name: "write-host-home",
        run: files::write_host_home,
    },
    Case {
        name: "write-usr",
        run: files::write_usr,
    },
    Case {
        name: "write-etc",
        run: files::write_etc,
    },
    Case {
        name: "etc-files-fixed",
        run: files::etc_files_fixed,
    },
    Case {
        name: "write-project-sibling",
        run: files::write_project_sibling,
    },
    Case {
        name: "symlink-to-host-ssh-key",
        run: files::symlink_to_host_ssh_key,
    },
    Case {
        name: "symlink-to-sibling",
        run: files::symlink_to_sibling,
    },
    Case {
        name: "control-project-write-visible",
        run: files::project_write_visible,
    },
    Case {
        name: "control-git-toplevel-is-project",
        run: files::git_toplevel_is_project,
    },
    Case {
        name: "host-process-invisible",
        run: processes::host_process_invisible,
    },
    Case {
        name: "host-process-unsignalable",
        run: processes::host_process_unsignalable,
    },
    Case {
        name: "init-not-taken-over",
        run: processes::init_not_taken_over,
    },
    Case {
        name: "inherited-fds-closed",
        run: processes::inherited_fds_closed,
    },
    Case {
        name: "proc-links-stay-inside",
        run: processes::proc_links_stay_inside,
    },
    Case {
        name: "init-descriptors-unreachable",
        run: processes::init_descriptors_unreachable,
    },
    Case {
        name: "host-env-not-visible",
        run: processes::host_env_not_visible,
    },
    Case {
        name: "network-none-host-tcp",
        run: network::none_host_tcp,
    },
    Case {
        name: "network-none-host-abstract-socket",
        run: network::none_host_abstract_socket,
    },
    Case {
        name: "host-unix-socket-in-home-absent",
        run: network::host_unix_socket_absent,
    },
    Case {
        name: "tiocsti-denied",
        run: kernel::tiocsti_denied,
    },
    Case {
        name: "tiocsti-inherited-terminal",
        run: terminal::tiocsti_inherited_terminal,
    },
    Case {
        name: "terminal-is-the-sandboxs-pty",
        run: terminal::terminal_is_the_sandboxs_pty,
    },
    Case {
        name: "terminal-chmod-stays-inside",
        run: terminal::terminal_chmod_stays_inside,
    },
    Case {
        name: "tioclinux-denied",
        run: kernel::tioclinux_denied,
    },
    Case {
        name: "tiocsetd-denied",
        run: kernel::tiocsetd_denied,
    },
    Case {
        name: "keyring-syscalls-denied",
        run: kernel::keyring_denied,
    },
    Case {
        name: "bpf-setns-denied",
        run: kernel::bpf_setns_denied,
    },
    Case {
        name: "io-uring-denied",
        run: kernel::io_uring_denied,
    },
    Case {
        name: "vsock-denied",
        run: sockets::vsock_denied,
    },
    Case {
        name: "socket-families-denied",
        run: sockets::socket_families_denied,
    },
    Case {
        name: "unshare-user-denied",
        run: kernel::unshare_user_denied,
    },
    Case {
        name: "clone3-enosys",
        run: kernel::clone3_enosys,
    },
    Case {
        name: "x32-abi-refused",
        run: kernel::x32_refused,
    },
    Case {
        name: "mount-denied",
        run: kernel::mount_denied,
    },
    Case {
        name: "host-devices-absent",
        run: kernel::host_devices_absent,
    },
    Case {
        name: "dev-chmod-denied",
        run: host_objects::dev_chmod_denied,
    },
    Case {
        name: "privileges-dropped",
        run: kernel::privileges_dropped,
    },
    Case {
        name: "id-maps-own-ids-only",
        run: kernel::id_maps_own_ids_only,
    },
    Case {
        name: "supplementary-groups-dropped",
        run: host_objects::supplementary_groups_dropped,
    },
    Case {
        name: "setuid-no-escalation",
        run: kernel::setuid_no_escalation,
    },
    Case {
        name: "control-exit-status-42",
        run: lifecycle::exit_status_42,
    },
    Case {
        name: "control-signal-death-reraised",
        run: lifecycle::signal_death_reraised,
    },
    Case {
        name: "publish-loopback-only",
        run: network::publish_loopback_only,
    },
    Case {
        name: "sigterm-forwarded",
        run: lifecycle::sigterm_forwarded,
    },
    Case {
        name: "sigkill-kills-sandbox",
        run: lifecycle::sigkill_kills_sandbox,
    },
    Case {
        name: "leftovers-gone-at-exit",
        run: lifecycle::leftovers_gone_at_exit,
    },
    Case {
        name: "mount-namespace-released-after-exit",
        run: lifecycle::mount_namespace_released_after_exit,
    },
    Case {
        name: "ahead-record-tampered",
        run: ahead::record_tampered,
    },
    Case {
        name: "ahead-source-rewritten",
        run: ahead::source_rewritten,
    },
    Case {
        name: "ahead-record-host-network",
        run: ahead::record_host_network,
    },
    Case {
        name: "ahead-setup-made-ahead",
        run: ahead::setup_made_ahead,
    },
    Case {
        name: "command-not-found-127",
        run: lifecycle::command_not_found,
    },
    Case {
        name: "refuse-root-project",
        run: lifecycle::refuse_root_project,
    },
    Case {
        name: "refuse-home-project",
        run: lifecycle::refuse_home_project,
    },
    // Files the host trusts (git metadata, PATH, config reads)
    Case {
        name: "trust-submodule-gitdir-redirect",
        run: host_trust::submodule_gitdir_redirect,
    },
    Case {
        name: "trust-repo-created-inside",
        run: host_trust::repo_created_inside,
    },
    Case {
        name: "trust-commondir-redirect",
        run: host_trust::commondir_redirect,
    },
    Case {
        name: "trust-config-keys-readwrite",
        run: host_trust::config_keys_readwrite,
    },
    Case {
        name: "trust-commits-come-back-as-refs",
        run: host_trust::commits_come_back_as_refs,
    },
    Case {
        name: "trust-guard-symlink-race",
        run: host_trust::guard_symlink_race,
    },
    Case {
        name: "trust-path-planted-git",
        run: host_trust::path_planted_git,
    },
    Case {
        name: "trust-hookspath-in-project",
        run: host_trust::hookspath_in_project,
    },
    Case {
        name: "trust-config-secrets-hidden",
        run: host_trust::config_secrets_hidden,
    },
    Case {
        name: "trust-git-link-not-followed",
        run: host_trust::git_link_not_followed,
    },
    Case {
        name: "nested-sandbox-inside",
        run: nested::nested_sandbox_inside,
    },
    Case {
        name: "trust-mask-host-replaces",
        run: host_trust::mask_host_replaces,
    },
    Case {
        name: "trust-mask-moved-parent",
        run: host_trust::mask_moved_parent,
    },
    Case {
        name: "trust-hide-globs",
        run: host_trust::hide_globs,
    },
    Case {
        name: "trust-git-config-stays-sanitised",
        run: host_trust::git_config_stays_sanitised,
    },
];
