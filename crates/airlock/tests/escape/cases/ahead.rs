//! The root built ahead (native): the next launch's init builds the root its project's last launch
//! recorded while airlock plans, and airlock uses that root only if it is the one it planned, over
//! the same files. A record that says otherwise, or a source replaced during the launch, must never
//! show inside; nor may an init cloned early, with the namespaces the record names, serve a launch
//! that needs others.

use std::fs;
use std::net::TcpListener;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};

use crate::check;
use crate::harness::{
    CONDITION_DEADLINE, Failure, Mode, Net, Outcome, Secrets, World, fail, finish, give, skip,
    wait_until,
};

/// The record's mark and network byte, before the root's JSON.
const HEAD: usize = 2;

/// The project's record of its root, after a first launch made it.
fn record_after_first_launch(w: &mut World) -> Result<PathBuf, Failure> {
    let first = w.airlock(&["run", "--", "true"])?;
    check!(
        first.status.success(),
        "the first launch failed:\n      {}",
        first.describe()
    );
    let record = state_dir(w)?.join("root-ahead");
    let bytes = fs::read(&record).map_err(|e| {
        fail(format!(
            "control failed (a harness failure, not a pass): no record at {} after a launch: {e}",
            record.display()
        ))
    })?;
    check!(
        bytes.first() == Some(&b'1'),
        "control failed (a harness failure, not a pass): the first launch's record does not say to build ahead: {:?}",
        String::from_utf8_lossy(&bytes[..bytes.len().min(40)])
    );
    Ok(record)
}

fn state_dir(w: &World) -> Result<PathBuf, Failure> {
    let dir = w.home.join(".local/share/airlock/sandboxes");
    fs::read_dir(&dir)
        .map_err(|e| fail(format!("no sandbox state in {}: {e}", dir.display())))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .ok_or_else(|| fail(format!("no sandbox state under {}", dir.display())))
}

fn native_only(mode: &Mode) -> Result<(), Failure> {
    if mode.backend != "native" {
        return Err(skip(format!(
            "the {} backend builds no root ahead (native only)",
            mode.backend
        )));
    }
    Ok(())
}

/// `ahead-record-tampered`: a record rewritten to bind the user's `~/.ssh` into the project is
/// built by init, but the launch plans another root, so that one is never used: the key does not
/// show inside, and the record holds the launch's own root afterwards (it was read, and refused).
pub fn record_tampered(mode: &Mode) -> Outcome {
    native_only(mode)?;
    let mut w = World::new(mode)?;
    let record = record_after_first_launch(&mut w)?;
    let honest = fs::read(&record)?;
    let mut root: serde_json::Value = serde_json::from_slice(&honest[HEAD..])
        .map_err(|e| fail(format!("the record is not JSON: {e}")))?;
    let leak = w.project.join("leak");
    root["mounts"]
        .as_array_mut()
        .ok_or_else(|| fail("the record has no mounts"))?
        .push(serde_json::json!({
            "op": "bind",
            "source": w.home.join(".ssh"),
            "target": leak,
            "writable": false,
        }));
    let mut planted = honest[..HEAD].to_vec();
    planted.extend(serde_json::to_vec(&root).expect("JSON"));
    fs::write(&record, &planted)?;
    give(mode, &record)?;
    let run = w.airlock(&["run", "--", "sh", "-c", "cat leak/* 2>&1; echo done"])?;
    check!(
        run.status.success() && run.stdout.contains("done"),
        "the launch after a tampered record failed:\n      {}",
        run.describe()
    );
    check!(
        !run.stdout.contains(&Secrets::ssh(&w)),
        "the tampered record's bind of ~/.ssh was used inside:\n      {}",
        run.describe()
    );
    let after = fs::read(&record)?;
    check!(
        after.first() == Some(&b'0') && after[HEAD..] == honest[HEAD..],
        "the record was not replaced by the launch's own root (was the tampered one read at all?): {:?}",
        String::from_utf8_lossy(&after[..after.len().min(40)])
    );
    Ok(())
}

/// `ahead-source-rewritten`: a generated file the root binds is altered on the host between two
/// launches; the next launch's prepare step writes it anew (a new file, by rename). The launch
/// is held (the project's name lock, taken as a removal takes it) after its plan and before that
/// step until init has bound the altered file ahead. The launch must see that the source is no
/// longer the file init bound and build the root afresh: inside shows the generated content, and
/// the record says not to build ahead again until the root changes (`-`).
pub fn source_rewritten(mode: &Mode) -> Outcome {
    native_only(mode)?;
    let mut w = World::new(mode)?;
    let record = record_after_first_launch(&mut w)?;
    let state = state_dir(&w)?;
    let (generated, inside) = generated_bind(&record, &state.join("generated"))?;
    let wanted = fs::read_to_string(&generated)?;
    let shown = inside.to_string_lossy().into_owned();
    let read = ["run", "--", "cat", shown.as_str()];
    let control = w.airlock(&read)?;
    check!(
        control.status.success() && control.stdout == wanted,
        "control failed (a harness failure, not a pass): {} does not show inside as written:\n      {}",
        generated.display(),
        control.describe()
    );
    // In place, as an editor that truncates would: the same inode, other bytes.
    fs::write(&generated, format!("# {}\n", Secrets::planted(&w)))?;
    let name = state
        .file_name()
        .expect("a name")
        .to_string_lossy()
        .into_owned();
    let lock_path = w
        .home
        .join(format!(".local/state/airlock/locks/{name}.lock"));
    let lock = fs::File::open(&lock_path)?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(fail(format!("cannot lock {}", lock_path.display())));
    }
    let project = w.project.clone();
    let (mut cmd, out, err) = w.airlock_command(&project, &read)?;
    let mut child = cmd.spawn()?;
    let bound = wait_until(CONDITION_DEADLINE, || {
        child.try_wait().ok().flatten().is_some() || mounted_in_child(child.id(), &shown)
    });
    drop(lock);
    let run = finish(child, format!("airlock {}", read.join(" ")), &out, &err)?;
    check!(
        bound,
        "control failed (a harness failure, not a pass): init never bound {shown} ahead while the launch waited:\n      {}",
        run.describe()
    );
    check!(
        run.status.success() && run.stdout == wanted,
        "the altered {} showed inside instead of the generated one:\n      {}",
        generated.display(),
        run.describe()
    );
    let mark = fs::read(&record)?.first().copied();
    check!(
        mark == Some(b'-'),
        "the launch used a root whose source had been replaced (the record's mark is {:?}, not '-')",
        mark.map(char::from)
    );
    Ok(())
}

/// Whether a child of `parent` (a sandbox's init) has a mount at `target` in its namespace.
fn mounted_in_child(parent: u32, target: &str) -> bool {
    let Ok(entries) = fs::read_dir("/proc") else {
        return false;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(") ")
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(parent)
            })
        })
        .any(|pid| {
            fs::read_to_string(format!("/proc/{pid}/mountinfo"))
                .is_ok_and(|info| info.lines().any(|l| l.split(' ').nth(4) == Some(target)))
        })
}

/// A bind in the record whose source is a generated file: the source and where it shows inside.
fn generated_bind(record: &Path, generated: &Path) -> Result<(PathBuf, PathBuf), Failure> {
    let bytes = fs::read(record)?;
    let root: serde_json::Value = serde_json::from_slice(&bytes[HEAD..])
        .map_err(|e| fail(format!("the record is not JSON: {e}")))?;
    root["mounts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["op"] == "bind")
        .filter_map(|m| Some((m["source"].as_str()?, m["target"].as_str()?)))
        .map(|(source, target)| (PathBuf::from(source), PathBuf::from(target)))
        .find(|(source, _)| source.starts_with(generated) && source.is_file())
        .ok_or_else(|| {
            fail(format!(
                "control failed (a harness failure, not a pass): the record binds no file of {}",
                generated.display()
            ))
        })
}

/// `ahead-record-host-network`: a record whose network byte says its sandbox was on the host's
/// network, while this launch's has a network namespace of its own. The launch's starter is forked
/// before the config is read, so it clones init with the record's namespaces; that init must be
/// dropped, and the sandbox must not reach a listener on the host's loopback. Control: the same
/// connect succeeds with `--network host`, and the record is rewritten with this launch's byte.
pub fn record_host_network(mode: &Mode) -> Outcome {
    native_only(mode)?;
    let mut w = World::new(mode)?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?.to_string();
    w.probe(Net::None, &["loopback-self"])?.succeeded()?;
    let record = state_dir(&w)?.join("root-ahead");
    let mut bytes = fs::read(&record)?;
    check!(
        bytes.get(..HEAD) == Some(b"1n"),
        "control failed (a harness failure, not a pass): the record of a --network none launch starts {:?}, not \"1n\"",
        String::from_utf8_lossy(&bytes[..bytes.len().min(HEAD)])
    );
    bytes[1] = b'h';
    fs::write(&record, &bytes)?;
    give(mode, &record)?;
    w.probe(Net::None, &["connect-tcp", &addr])?.denied(&[])?;
    let after = fs::read(&record)?;
    check!(
        after.get(..HEAD) == Some(b"1n"),
        "the record was not rewritten with the launch's own network byte: {:?}",
        String::from_utf8_lossy(&after[..after.len().min(HEAD)])
    );
    w.probe(Net::Host, &["connect-tcp", &addr])?.succeeded()?;
    drop(listener);
    Ok(())
}

/// `ahead-setup-made-ahead`: an init whose root was built ahead makes its setup while it waits
/// (the keeper's masks, the loopback, the egress listener) and hands it over only after `G`. On
/// such a launch the project's `.env` must still read empty inside, and the egress proxy's port
/// must take a connection. Control: the project's record says the launch's root was built ahead
/// (`1`: a root used or seen again), and `.env` holds the secret on the host.
pub fn setup_made_ahead(mode: &Mode) -> Outcome {
    native_only(mode)?;
    let mut w = World::new(mode)?;
    let secret = format!("AHEAD-{}", w.token);
    w.put(&w.project.join(".env"), &format!("TOKEN={secret}\n"))?;
    w.give_to_user()?;
    let script = "./probe probe read .env; ./probe probe connect-tcp 127.0.0.1:3128";
    // The first launch records its root; the second builds it ahead and uses it.
    for launch in ["first", "second"] {
        let run = w.airlock(&["run", "--", "sh", "-c", script])?;
        check!(
            run.stdout.contains("read .env: 0 bytes") && !run.stdout.contains(&secret),
            "LEAK or failure: the {launch} launch must read .env empty:\n      {}",
            run.describe()
        );
        check!(
            run.stdout.contains("connected to 127.0.0.1:3128"),
            "the {launch} launch could not reach the egress proxy's port:\n      {}",
            run.describe()
        );
    }
    let mark = fs::read(state_dir(&w)?.join("root-ahead"))?;
    check!(
        mark.first() == Some(&b'1'),
        "control failed (a harness failure, not a pass): the record does not say the root was built ahead: {:?}",
        String::from_utf8_lossy(&mark[..mark.len().min(40)])
    );
    check!(
        fs::read_to_string(w.project.join(".env"))?.contains(&secret),
        "control failed (a harness failure, not a pass): .env lost its secret on the host"
    );
    Ok(())
}
