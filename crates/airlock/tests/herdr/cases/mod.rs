//! The cases, grouped by concern. Each builds its own [`World`](crate::world::World).

pub mod airlock_attack;
pub mod airlock_backend;
pub mod airlock_report;
pub mod bad_input;
pub mod deletion;
pub mod flow;
pub mod git;
pub mod locks;
pub mod misc;
pub mod parity_deletion;
pub mod parity_more;
pub mod parity_panes;
pub mod parity_shapes;
pub mod recovery;
pub mod sbx_run;

use crate::world::Outcome;

/// A named case.
pub type Case = (&'static str, fn() -> Outcome);

pub const CASES: &[Case] = &[
    (
        "sbx_run_default_spec_calls_and_exit_code",
        sbx_run::default_spec_calls_and_exit_code,
    ),
    (
        "sbx_run_a_repository_made_in_the_workspace_is_quarantined",
        sbx_run::a_repository_made_in_the_workspace_is_quarantined,
    ),
    (
        "sbx_run_no_network_and_ports",
        sbx_run::no_network_and_ports,
    ),
    (
        "sbx_run_env_is_filtered_and_never_in_argv",
        sbx_run::env_is_filtered_and_never_in_argv,
    ),
    (
        "sbx_run_not_ready_creates_nothing",
        sbx_run::sbx_not_ready_creates_nothing,
    ),
    (
        "sbx_run_refusals_call_no_sbx",
        sbx_run::refusals_call_no_sbx,
    ),
    (
        "sbx_run_hostile_names_cannot_inject_flags",
        sbx_run::hostile_names_cannot_inject_flags,
    ),
    ("sbx_run_render_and_doctor", sbx_run::render_and_doctor),
    (
        "sbx_run_a_signal_still_removes_the_vm",
        sbx_run::a_signal_still_removes_the_vm,
    ),
    (
        "sbx_run_a_worktree_carries_its_repository_read_only",
        sbx_run::a_worktree_carries_its_repository_read_only,
    ),
    ("airlock_backend_mount_flow", airlock_backend::mount_flow),
    (
        "airlock_backend_mount_flow_as_the_unprivileged_user",
        airlock_backend::mount_flow_as_the_unprivileged_user,
    ),
    (
        "airlock_backend_agent_reports_reach_herdr_only_for_its_own_pane",
        airlock_report::agent_reports_reach_herdr_only_for_its_own_pane,
    ),
    (
        "airlock_backend_default_follows_sbx",
        airlock_attack::default_follows_sbx_and_doctor_says_why,
    ),
    (
        "airlock_backend_attack_tampered_name_deletes_nothing_outside",
        airlock_attack::a_tampered_sandbox_name_deletes_nothing_outside,
    ),
    (
        "airlock_backend_attack_tampered_record_and_links",
        airlock_attack::a_tampered_record_is_refused_and_links_are_not_followed,
    ),
    (
        "airlock_backend_attack_stop_signals_only_listed_sessions",
        airlock_attack::stop_signals_only_sessions_airlock_lists,
    ),
    (
        "airlock_backend_attack_typed_paths_are_quoted",
        airlock_attack::paths_typed_into_a_pane_are_quoted,
    ),
    (
        "airlock_backend_clone_flow_fetches_a_commit_made_inside",
        airlock_backend::clone_flow_fetches_a_commit_made_inside,
    ),
    (
        "deletion_popup_closed_without_an_answer",
        deletion::popup_closed_without_an_answer,
    ),
    (
        "deletion_failures_after_delete_are_reported",
        deletion::failures_after_delete_are_reported,
    ),
    (
        "guards_refuse_deletion_while_a_shell_is_attached",
        recovery::deletion_and_stop_refused_while_a_shell_is_attached,
    ),
    (
        "flow_without_a_focused_pane_opens_a_tab",
        flow::without_a_focused_pane_opens_a_tab,
    ),
    (
        "misc_manifest_declares_everything",
        misc::manifest_declares_everything,
    ),
    (
        "git_not_a_repository_is_not_found",
        git::not_a_repository_is_not_found,
    ),
    (
        "flow_start_reconnect_shell_stop_replace_forget",
        flow::start_reconnect_shell_stop_replace_forget,
    ),
    (
        "flow_adopts_a_mapping_whose_pane_is_gone",
        recovery::adopts_a_mapping_whose_pane_is_gone,
    ),
    (
        "flow_swallowed_command_moves_to_a_fresh_pane",
        recovery::swallowed_command_moves_to_a_fresh_pane,
    ),
    (
        "flow_custom_agent_setup_once_and_report_agent",
        flow::custom_agent_setup_once_and_report_agent,
    ),
    (
        "flow_missing_agent_binary_is_config",
        flow::missing_agent_binary_is_config,
    ),
    (
        "flow_open_in_tab_and_recycled_pane_id",
        flow::open_in_tab_and_recycled_pane_id,
    ),
    (
        "guards_refuse_while_agent_or_bridge_runs",
        recovery::guards_refuse_while_agent_or_bridge_runs,
    ),
    (
        "deletion_popup_cancelled_and_timed_out",
        deletion::popup_cancelled_and_timed_out,
    ),
    ("deletion_worktree_hook", deletion::worktree_hook),
    ("deletion_prune_mappings", deletion::prune_mappings),
    (
        "deletion_unreadable_ls_is_never_gone",
        deletion::unreadable_ls_is_never_gone,
    ),
    (
        "deletion_mapping_changed_during_popup",
        deletion::mapping_changed_during_popup,
    ),
    (
        "deletion_no_session_during_a_deletion",
        deletion::no_session_during_a_deletion,
    ),
    ("git_fetch_changes_via_bundle", git::fetch_via_bundle),
    ("git_fetch_changes_via_remote", git::fetch_via_remote),
    (
        "git_fetch_changes_refuses_mount_mode",
        git::refuses_mount_mode,
    ),
    ("misc_doctor", misc::doctor),
    ("misc_list_and_info", misc::list_and_info),
    ("misc_ls_shapes", misc::ls_shapes),
    ("misc_open_port", misc::open_port),
    ("misc_install_keybindings", misc::install_keybindings),
    (
        "misc_timeouts_are_daemon_failures",
        misc::timeouts_are_daemon_failures,
    ),
    (
        "misc_run_action_waits_for_the_result",
        misc::run_action_waits_for_the_result,
    ),
    (
        "misc_overlay_and_sandboxes_action",
        misc::overlay_and_sandboxes_action,
    ),
    ("bad_input_config", bad_input::config),
    (
        "bad_input_mapping_version_and_pane_ids",
        bad_input::mapping_version_and_pane_ids,
    ),
    ("bad_input_context_and_paths", bad_input::context_and_paths),
    ("bad_input_name_clash", bad_input::name_clash),
    (
        "parity_1_orphan_reachable_from_any_workspace",
        parity_panes::orphan_reachable_from_any_workspace,
    ),
    (
        "parity_1_orphan_deletions_and_ambiguity",
        parity_panes::orphan_deletions_and_ambiguity,
    ),
    (
        "parity_1_workspace_null_and_reused_pane_ids",
        parity_panes::workspace_null_and_reused_pane_ids,
    ),
    (
        "parity_2_prune_pane_came_back_during_the_popup",
        parity_deletion::prune_pane_came_back_during_the_popup,
    ),
    (
        "parity_2_prune_mapping_rewritten_during_the_listing",
        parity_deletion::prune_mapping_rewritten_during_the_listing,
    ),
    (
        "parity_2_prune_keeps_a_bridge_in_creating",
        parity_deletion::prune_keeps_a_bridge_in_creating,
    ),
    (
        "parity_3_replace_validates_before_it_deletes",
        parity_deletion::replace_validates_before_it_deletes,
    ),
    (
        "parity_3_replace_uses_the_configured_agent_and_keeps_history",
        parity_deletion::replace_uses_the_configured_agent_and_keeps_history,
    ),
    (
        "parity_4_start_agent_checks_sbx_first",
        parity_panes::start_agent_checks_sbx_first,
    ),
    ("parity_4_conflict_rules", parity_panes::conflict_rules),
    (
        "parity_5_install_keybindings_rules",
        parity_shapes::install_keybindings_rules,
    ),
    (
        "parity_6_info_and_list_value_shapes",
        parity_shapes::info_and_list_value_shapes,
    ),
    (
        "parity_6_doctor_value_shapes",
        parity_shapes::doctor_value_shapes,
    ),
    (
        "parity_6_prune_deleted_by_name",
        parity_shapes::prune_deleted_by_name,
    ),
    (
        "parity_7_worktree_hook_names_and_exit_codes",
        parity_deletion::worktree_hook_names_and_exit_codes,
    ),
    (
        "parity_7_pane_command_carries_the_sbx_path",
        parity_panes::pane_command_carries_the_sbx_path,
    ),
    (
        "parity_7_failed_rehome_closes_the_extra_pane",
        parity_panes::failed_rehome_closes_the_extra_pane,
    ),
    (
        "parity_7_open_shell_with_a_vanished_cwd",
        parity_panes::open_shell_with_a_vanished_cwd,
    ),
    (
        "parity_7_config_strictness",
        parity_shapes::config_strictness,
    ),
    (
        "parity_1_shell_protects_a_rehomed_sandbox",
        parity_more::shell_protects_a_rehomed_sandbox,
    ),
    (
        "parity_7_swallowed_command_moves_next_to_the_user",
        parity_more::swallowed_command_moves_next_to_the_user,
    ),
    (
        "parity_7_fetch_changes_records_what_it_learns",
        parity_more::fetch_changes_records_what_it_learns,
    ),
    (
        "parity_7_garbage_context_is_startup",
        parity_more::garbage_context_is_startup,
    ),
    (
        "parity_6_links_rows_and_toasts",
        parity_more::links_rows_and_toasts,
    ),
    (
        "parity_7_popup_warns_about_clone_mode_work",
        parity_more::popup_warns_about_clone_mode_work,
    ),
    (
        "parity_1_fetch_and_open_port_reach_an_orphan",
        parity_more::fetch_and_open_port_reach_an_orphan,
    ),
    ("locks_hammer_8_processes", locks::hammer_8_processes),
    (
        "locks_kill_9_leaves_a_reclaimable_lock",
        locks::kill_9_leaves_a_reclaimable_lock,
    ),
    (
        "locks_stale_and_recycled_pids",
        locks::stale_and_recycled_pids,
    ),
];
