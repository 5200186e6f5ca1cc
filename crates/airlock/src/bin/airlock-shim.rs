//! The bridge's shims and the readonly-mode `git` wrapper in a binary of their own (`xdg-open`,
//! `code`, `git-credential-airlock`, `git`, … inside a sandbox are symlinks to it): a small program
//! starts faster than the whole airlock.

fn main() {
    airlock_egress::nss::hosts_from_files_and_dns();
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_default();
    // `git` in readonly mode: the real git, with a hint when a write fails (airlock-tools).
    if airlock_tools::git::hint::is_wrapper(&argv0) {
        std::process::exit(airlock_tools::git::hint::run(args.collect()));
    }
    let code = match airlock_bridge::shims::shim_for(&argv0) {
        Some(shim) => airlock_bridge::shims::run(&shim, args.collect()),
        None => {
            eprintln!(
                "airlock-shim: run it under a shim name (xdg-open, code, git-credential-airlock, …); \
                 inside a sandbox they are in /run/airlock/bin"
            );
            2
        }
    };
    std::process::exit(code);
}
