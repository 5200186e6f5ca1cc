//! The herdr plugin suite: the real `airlock` binary against fake `herdr` and `sbx` executables.
//!
//! One executable, several roles. Started as `herdr` or `sbx` (symlinks in each test's `bin/`) it
//! is that fake ([`fakes`]); as `<exe> hammer ...` it is a lock-hammering worker ([`cases::locks`]).
//! Otherwise it runs every case in [`cases`] on a few threads, printing `ok` or `FAIL` per case.
//! Arguments not starting with `-` filter cases by name.

mod cases;
mod fakes;
mod world;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

fn main() {
    let argv0 = std::env::args().next().unwrap_or_default();
    let name = std::path::Path::new(&argv0)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("")
        .to_owned();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match name.as_str() {
        "herdr" => std::process::exit(fakes::herdr::main(args)),
        "sbx" => std::process::exit(fakes::sbx::main(args)),
        _ => {}
    }
    if args.first().map(String::as_str) == Some("touch-mapping") {
        std::process::exit(cases::locks::touch(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("hammer") {
        std::process::exit(cases::locks::hammer(&args[1..]));
    }
    std::process::exit(suite(&args));
}

fn suite(args: &[String]) -> i32 {
    if args.iter().any(|a| a == "--list") {
        for case in cases::CASES {
            println!("{}: test", case.0);
        }
        return 0;
    }
    let filters: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map(String::as_str)
        .collect();
    let selected: Vec<&cases::Case> = cases::CASES
        .iter()
        .filter(|c| filters.is_empty() || filters.iter().any(|f| c.0.contains(f)))
        .collect();
    println!(
        "herdr plugin suite: {} cases against {}",
        selected.len(),
        env!("CARGO_BIN_EXE_airlock")
    );
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let threads = std::env::var("HERDR_SUITE_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(4);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some((name, case)) = selected.get(i).map(|c| (c.0, c.1)) else {
                        return;
                    };
                    let started = std::time::Instant::now();
                    let outcome = std::panic::catch_unwind(case).unwrap_or_else(|p| {
                        Err(p
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                            .unwrap_or_default())
                    });
                    match outcome {
                        Ok(()) => println!("ok   {name} ({} ms)", started.elapsed().as_millis()),
                        Err(why) => {
                            println!("FAIL {name}: {why}");
                            failures.lock().expect("lock").push(name);
                        }
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().expect("lock");
    println!(
        "{} passed, {} failed",
        selected.len() - failures.len(),
        failures.len()
    );
    i32::from(!failures.is_empty())
}
