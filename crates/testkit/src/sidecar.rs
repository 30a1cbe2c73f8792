//! An emulator the tests talk to (moto, Azurite), as a process beside the test process: started
//! on a free loopback port, waited for until it listens, and stopped when the test process exits
//! however it exits.
//!
//! The emulator runs in the background of a shell whose stdin is a pipe from the test process:
//! when that process exits, the pipe closes, the shell's `read` returns, and the shell kills the
//! emulator. A `Drop` would not do: the sidecars are process-wide statics, which are never dropped.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How to start one emulator.
pub struct Spec<'a> {
    /// What the failure messages call it (`moto_server`, `azurite-blob`).
    pub name: &'a str,
    /// The shell command line that runs it in the foreground, listening on `127.0.0.1:port`
    /// (paths quoted for the shell).
    pub command: String,
    pub port: u16,
    /// The directory it runs in (its working files), if it needs one.
    pub dir: Option<PathBuf>,
    /// Where its stdout and stderr go (shown when it does not come up); `None`: discarded.
    pub log: Option<PathBuf>,
    /// How long it may take to listen.
    pub patience: Duration,
    /// Added to the message when it does not listen in time (what to install, what to check).
    pub hint: &'a str,
    /// Text in its log that means it exited, to fail at once rather than after `patience`.
    pub exited: Option<&'a str>,
}

/// A running emulator; it lives as long as the test process.
pub struct Sidecar {
    pub port: u16,
    _shell: Child,
}

/// Start `spec`'s emulator and wait until it accepts connections on its port.
pub fn start(spec: Spec<'_>) -> Sidecar {
    let cd = spec.dir.as_ref().map(|d| format!("cd '{}' && ", d.display())).unwrap_or_default();
    let log = spec.log.as_ref().map_or_else(|| "/dev/null".to_string(), |l| format!("'{}'", l.display()));
    let script = format!("{cd}{} >{log} 2>&1 & pid=$!; echo started; read _; kill $pid", spec.command);
    let mut shell = Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", spec.name));
    let mut line = String::new();
    BufReader::new(shell.stdout.take().expect("the shell's stdout"))
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("{} wrapper: {e}", spec.name));
    let deadline = Instant::now() + spec.patience;
    while std::net::TcpStream::connect(("127.0.0.1", spec.port)).is_err() {
        let log = spec.log.as_ref().and_then(|l| std::fs::read_to_string(l).ok()).unwrap_or_default();
        if let Some(exited) = spec.exited {
            assert!(!log.contains(exited), "{} exited: {log}", spec.name);
        }
        assert!(
            Instant::now() < deadline,
            "{} did not listen on 127.0.0.1:{} within {} s{}{}",
            spec.name,
            spec.port,
            spec.patience.as_secs(),
            spec.hint,
            if spec.log.is_some() { format!(". Log:\n{log}") } else { String::new() },
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Sidecar { port: spec.port, _shell: shell }
}
