//! `[sandbox] nested_namespaces = true`: a sandbox inside the sandbox (bwrap, `unshare -Ur`, an
//! agent's own) works for an unprivileged caller, and the walls it must not open stay shut: the
//! read-only system binds cannot be written or remounted writable from a nested namespace. As
//! root, /proc stays closed to writes (root inside is host root by uid), so nested uid maps are
//! refused there.

use crate::harness::{Mode, Net, Outcome, World, fail, skip};

fn nested_world(mode: &Mode) -> Result<World<'_>, crate::harness::Failure> {
    let w = World::new(mode)?;
    w.put(
        &w.home.join(".config/airlock/config.toml"),
        "[sandbox]\nnested_namespaces = true\n",
    )?;
    w.give_to_user()?;
    Ok(w)
}

pub fn nested_sandbox_inside(mode: &Mode) -> Outcome {
    let mut w = nested_world(mode)?;
    if mode.uid == 0 {
        // The attack this mode guards against: host root by uid writing procfs.
        w.probe(Net::None, &["open-write", "/proc/sysrq-trigger"])?
            .denied(&[])?;
        let run = w.airlock(&[
            "run",
            "--network",
            "none",
            "--",
            "sh",
            "-c",
            "unshare -Ur true",
        ])?;
        if run.code() == Some(0) {
            return Err(fail(format!(
                "as root, nested uid maps must stay refused (they need /proc writable):\n      {}",
                run.describe()
            )));
        }
        return Ok(());
    }
    let bwrap = ["/usr/bin/bwrap", "/bin/bwrap"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let Some(bwrap) = bwrap else {
        return Err(skip(
            "bwrap is not installed (scripts/test installs bubblewrap)",
        ));
    };
    let script = format!(
        "set -e\nunshare -Ur id -u\n\
         {bwrap} --ro-bind / / --unshare-user --uid 0 --proc /proc --dev /dev sh -c 'echo bwrap-ok'\n\
         if touch /usr/airlock-nested 2>/dev/null; then echo WROTE-USR; fi\n\
         if unshare -Urm sh -c 'mount -o remount,rw /usr && touch /usr/airlock-nested' 2>/dev/null; then echo REMOUNTED; fi\n\
         echo done"
    );
    let run = w.airlock(&["run", "--network", "none", "--", "sh", "-c", &script])?;
    let out = &run.stdout;
    if run.code() != Some(0)
        || !out.contains("0\n")
        || !out.contains("bwrap-ok")
        || !out.contains("done")
    {
        return Err(fail(format!(
            "control failed: a nested sandbox did not run inside:\n      {}",
            run.describe()
        )));
    }
    if out.contains("WROTE-USR") || out.contains("REMOUNTED") {
        return Err(fail(format!(
            "ESCAPE: /usr was written from a nested namespace:\n      {}",
            run.describe()
        )));
    }
    Ok(())
}
