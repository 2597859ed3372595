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

/// Starts `binary start --home home --proxy_app tcp://abci_address`, its output appended to
/// `home/cometbft.log`.
pub fn spawn(binary: &Path, home: &Path, abci_address: &str) -> std::io::Result<Child> {
    let log_path = home.join("cometbft.log");
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)?;
    let parent = std::process::id() as libc::pid_t;
    let mut command = Command::new(binary);
    command
        .arg("start")
        .arg("--home")
        .arg(home)
        .arg("--proxy_app")
        .arg(format!("tcp://{abci_address}"))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: only async-signal-safe calls (prctl, getppid, _exit) between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before the signal was armed.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    command.spawn()
}

/// Asks the child to stop (SIGTERM), and kills it if it has not within the grace period.
pub fn stop(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    // SAFETY: signalling our own child by its pid.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
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
