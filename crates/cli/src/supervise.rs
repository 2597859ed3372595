//! The background processes of the two `localnet` commands (the exchange's validators and the
//! payments committee): started in their own session with a pid file, recognised again by
//! their command line, stopped with SIGTERM and, after one grace period, SIGKILL. One copy, so
//! the two commands cannot drift (their grace periods had: 15 s and 10 s).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::sys::signal::Signal;

/// How long a process has to stop on SIGTERM before it is killed: a node finishes its block
/// and closes its store (and a CometBFT child) within it on a loaded machine.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(15);

/// A background process this command started: its pid file, and a path that appears in its
/// command line (its data directory or config), by which a live pid is known to be ours.
pub(crate) struct Supervised {
    pub name: String,
    pub pid_file: PathBuf,
    pub marker: PathBuf,
}

impl Supervised {
    /// Its pid, if the pid file names a live, non-zombie process whose command line holds the
    /// marker (a pid may have been reused).
    pub(crate) fn running_pid(&self) -> Option<i32> {
        running_pid(&self.pid_file, &self.marker)
    }

    /// Starts `command` in its own session (it outlives this command and ignores its
    /// terminal's signals) and writes its pid file.
    pub(crate) fn spawn(&self, command: &mut Command) -> anyhow::Result<u32> {
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(command, || {
                nix::unistd::setsid()?;
                Ok(())
            });
        }
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", self.name))?;
        std::fs::write(&self.pid_file, child.id().to_string())
            .with_context(|| format!("writing {}", self.pid_file.display()))?;
        Ok(child.id())
    }
}

/// The pid in `pid_file` if it is alive, not a zombie, and runs with `marker` in its
/// command line.
pub(crate) fn running_pid(pid_file: &Path, marker: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(pid_file)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let state = stat.rsplit(')').next()?.split_whitespace().next()?;
    let ours = String::from_utf8_lossy(&cmdline).contains(&*marker.to_string_lossy());
    (ours && state != "Z").then_some(pid)
}

/// Stops every process of `processes` that runs: SIGTERM to all, then, per process, waits up
/// to [`STOP_GRACE`] from the signal and kills what is left. Removes their pid files. Returns
/// how many were running.
pub(crate) fn stop_all(processes: &[Supervised]) -> usize {
    let running: Vec<(&Supervised, i32)> = processes
        .iter()
        .filter_map(|process| process.running_pid().map(|pid| (process, pid)))
        .collect();
    for (_, pid) in &running {
        // A process we started (running_pid checked its command line).
        signal(*pid, Signal::SIGTERM);
    }
    let deadline = Instant::now() + STOP_GRACE;
    for (process, pid) in &running {
        while process.running_pid().is_some() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if process.running_pid().is_some() {
            eprintln!("{} did not stop in time; killing it", process.name);
            signal(*pid, Signal::SIGKILL);
        }
        let _ = std::fs::remove_file(&process.pid_file);
    }
    running.len()
}

fn signal(pid: i32, signal: Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shell whose command line carries `marker` (as its first argument).
    fn sleeper(dir: &Path, name: &str, marker: &Path) -> Supervised {
        let process = Supervised {
            name: name.to_string(),
            pid_file: dir.join(format!("{name}.pid")),
            marker: marker.to_path_buf(),
        };
        let mut command = Command::new("sh");
        // Short sleeps, so nothing outlives the shell by more than 0.1 s.
        command
            .args(["-c", "while :; do sleep 0.1; done", "sh"])
            .arg(marker);
        process.spawn(&mut command).expect("sh starts");
        process
    }

    #[test]
    fn a_process_is_ours_only_with_its_marker_and_stop_all_ends_it_and_its_pid_file() {
        let dir = walras_testkit::TempDir::new("supervise");
        let ours = sleeper(dir.path(), "one", &dir.path().join("marker-one"));
        let pid = ours.running_pid().expect("running, with its marker");
        // The same pid under another marker (a reused pid) is not ours.
        assert_eq!(running_pid(&ours.pid_file, &dir.path().join("other")), None);
        assert_eq!(stop_all(std::slice::from_ref(&ours)), 1);
        assert_eq!(ours.running_pid(), None, "pid {pid} stopped");
        assert!(!ours.pid_file.exists(), "its pid file is gone");
        assert_eq!(stop_all(&[ours]), 0, "nothing left to stop");
    }
}
