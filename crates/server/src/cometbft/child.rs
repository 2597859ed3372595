//! CometBFT as a child process of the node.
//!
//! The node starts `cometbft start` itself, pointing it at the ABCI server it just bound, so
//! one process is one validator: stopping the node stops its CometBFT, and a node killed
//! outright (SIGKILL) takes its CometBFT with it (Linux's parent-death signal), as a crashed
//! machine would.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a stopping CometBFT gets before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Starts `binary start --home home --proxy_app proxy_app` (`unix://…`), its output appended to
/// `home/cometbft.log`.
pub(super) fn spawn(binary: &Path, home: &Path, proxy_app: &str) -> std::io::Result<Child> {
    let log_path = home.join("cometbft.log");
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)?;
    let parent = nix::unistd::getpid();
    let mut command = Command::new(binary);
    command
        .arg("start")
        .arg("--home")
        .arg(home)
        .arg("--proxy_app")
        .arg(proxy_app)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: only async-signal-safe calls (prctl, getppid) between fork and exec.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
            // The parent may have died before the signal was armed.
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::other(
                    "the node exited before CometBFT started",
                ));
            }
            Ok(())
        });
    }
    command.spawn()
}

/// Asks the child to stop (SIGTERM), and kills it if it has not within the grace period.
pub(super) fn stop(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    if let Ok(pid) = i32::try_from(child.id()) {
        // Our own child, not yet waited for: its pid cannot have been reused.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}
