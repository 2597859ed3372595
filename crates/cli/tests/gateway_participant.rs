//! `walras gateway participant` (issue 28 item 6): two participant processes, one taking its
//! orders as JSON lines on stdin and one from `--offer`, against a `walras gateway` process in
//! front of a `walras node --block-source gateway`. Both participants' offers commit and cross,
//! each prints its own account's fill, an overdraft is refused by the gateway with the node's
//! `insufficient_balance` rule, both exit cleanly once their input is over, and a new process
//! for a participant goes on trading.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use walras_testkit::*;

/// `walras keygen --out FILE --json`: the public key.
fn keygen(path: &std::path::Path) -> String {
    let output = Command::new(walras_bin())
        .args(["keygen", "--json", "--out"])
        .arg(path)
        .output()
        .expect("walras keygen runs");
    assert!(output.status.success());
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    printed["public_key"]
        .as_str()
        .expect("a public key")
        .to_string()
}

/// A running `walras` child whose stdout lines arrive on a channel.
struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<serde_json::Value>,
    seen: Vec<serde_json::Value>,
}

impl Running {
    fn spawn(args: &[String]) -> Running {
        let mut child = Command::new(walras_bin())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("walras gateway participant starts");
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|_| panic!("not a JSON line: {line}"));
                if sender.send(value).is_err() {
                    break;
                }
            }
        });
        Running {
            stdin: child.stdin.take(),
            child,
            lines,
            seen: Vec::new(),
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Reads lines until one satisfies `wanted`; returns it.
    fn wait_for(
        &mut self,
        what: &str,
        wanted: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        if let Some(line) = self.seen.iter().find(|line| wanted(line)) {
            return line.clone();
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {what} within 60 s; printed: {:#?}", self.seen));
            self.seen.push(line.clone());
            if wanted(&line) {
                return line;
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Checks: participant 0 (orders on stdin) has an overdrawing offer refused by the gateway with
/// `InsufficientBalance`, then an offer that rests; participant 1 (its offer from `--offer`)
/// crosses it. Both see their offer accepted in a block and their own account's fill (read from
/// the node's operator listener), and both exit with a `done` line once their input is over.
#[test]
fn two_participant_processes_trade_through_a_gateway_and_see_their_fills() {
    let dir = TempDir::new("gateway-participants");
    let gateway_public = keygen(&dir.path().join("gateway.key"));
    let keys = [
        keygen(&dir.path().join("p0.key")),
        keygen(&dir.path().join("p1.key")),
    ];
    let participants = dir.path().join("participants.txt");
    std::fs::write(&participants, format!("{}\n{}\n", keys[0], keys[1])).unwrap();
    let node = NodeProcess::start(
        &dir.path().join("node"),
        &[
            "--block-source",
            "gateway",
            "--gateway-key",
            &gateway_public,
        ],
    );
    let operator = node.operator_url.clone().expect("an operator listener");
    let mut gateway = Command::new(walras_bin())
        .args(["gateway", "--node", &node.url, "--key"])
        .arg(dir.path().join("gateway.key"))
        .arg("--participant-keys")
        .arg(&participants)
        .args(["--listen", "127.0.0.1:0", "--straggler-threshold-ms", "300"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("walras gateway starts");
    let mut gateway_lines = BufReader::new(gateway.stdout.take().unwrap()).lines();
    let first = gateway_lines.next().unwrap().unwrap();
    let address = first
        .strip_prefix("walras gateway listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_string();
    std::thread::spawn(move || for _ in gateway_lines {});

    let (a, b) = (1u64, 2u64);
    let x = held(&operator, a, 10_000, u16::MAX);
    let y = held(&operator, b, 10_000, x);
    let participant = |number: u32, account: u64, extra: &[String]| {
        let mut args: Vec<String> = ["gateway", "participant", "--gateway", &address]
            .iter()
            .map(|arg| arg.to_string())
            .collect();
        let key = dir.path().join(format!("p{number}.key"));
        args.extend([
            "--participant".to_string(),
            number.to_string(),
            "--key".to_string(),
            key.to_string_lossy().into_owned(),
            "--gateway-key".to_string(),
            gateway_public.clone(),
            "--account".to_string(),
            account.to_string(),
            "--dev".to_string(),
            "--node".to_string(),
            operator.clone(),
        ]);
        args.extend_from_slice(extra);
        Running::spawn(&args)
    };
    let mut p0 = participant(0, a, &[]);
    let connected = p0.wait_for("connected", |line| line["type"] == "connected");
    assert_eq!(connected["account"], a);

    // More than account a holds: the gateway refuses it with the node's rule.
    p0.send(&format!(
        r#"{{"offer":{{"sell":{x},"buy":{y},"amount":4611686018427387000,"min_price":"0.5"}}}}"#
    ));
    let refused = p0.wait_for("the overdraft's notice", |line| line["type"] == "notice");
    assert_eq!(refused["code"], "InsufficientBalance", "{refused}");
    assert!(
        refused["text"].as_str().unwrap().contains("available"),
        "{refused}"
    );
    p0.send(&format!(
        r#"{{"offer":{{"sell":{x},"buy":{y},"amount":5000,"min_price":"0.5"}}}}"#
    ));
    let sent = p0.wait_for("the offer sent", |line| {
        line["type"] == "sent" && line["sequence"] == 2
    });
    let hash0 = sent["hash"].clone();
    let own = |hash: serde_json::Value| {
        move |line: &serde_json::Value| {
            line["type"] == "block"
                && line["own"]
                    .as_array()
                    .is_some_and(|own| own.iter().any(|own| own["hash"] == hash))
        }
    };
    let block0 = p0.wait_for("participant 0's block", own(hash0.clone()));

    let mut p1 = participant(
        1,
        b,
        &[
            "--offer".to_string(),
            format!("{y}:{x}:5000:0.5"),
            "--no-stdin".to_string(),
        ],
    );
    let sent = p1.wait_for("the flag's offer sent", |line| line["type"] == "sent");
    let hash1 = sent["hash"].clone();
    let block1 = p1.wait_for("participant 1's block", own(hash1.clone()));
    for (block, hash) in [(&block0, &hash0), (&block1, &hash1)] {
        let own = block["own"].as_array().unwrap();
        let mine = own.iter().find(|own| own["hash"] == *hash).unwrap();
        assert_eq!(mine["status"], "accepted", "{block}");
    }
    let fill0 = p0.wait_for("participant 0's fill", |line| line["type"] == "fill");
    let fill1 = p1.wait_for("participant 1's fill", |line| line["type"] == "fill");
    assert_eq!(
        (fill0["account"].as_u64(), fill0["sell"].as_u64()),
        (Some(a), Some(u64::from(x)))
    );
    assert_eq!(
        (fill1["account"].as_u64(), fill1["sell"].as_u64()),
        (Some(b), Some(u64::from(y)))
    );
    assert_eq!(
        fill0["height"], fill1["height"],
        "they crossed in one block"
    );
    assert!(fill0["sold"].as_u64().unwrap() > 0 && fill1["sold"].as_u64().unwrap() > 0);

    // Input over: each prints `done` and exits successfully.
    p0.stdin = None;
    for participant in [&mut p0, &mut p1] {
        let done = participant.wait_for("done", |line| line["type"] == "done");
        assert!(done["counts"]["accepted"].as_u64() >= Some(1), "{done}");
        let status = participant.child.wait().expect("it exits");
        assert!(status.success());
    }
    // A new process for participant 0: its numbering continues after the gateway's last
    // (it restarted at 0 and every message was refused as out of order).
    let mut again = participant(0, a, &[]);
    again.send(&format!(
        r#"{{"offer":{{"sell":{x},"buy":{y},"amount":100,"min_price":"1000"}}}}"#
    ));
    let sent = again.wait_for("the second session's offer", |line| line["type"] == "sent");
    let block = again.wait_for("its block", own(sent["hash"].clone()));
    assert!(
        !again.seen.iter().any(|line| line["code"] == "Refused"),
        "{:#?}",
        again.seen
    );
    let own = block["own"].as_array().unwrap();
    assert!(own.iter().any(|own| own["status"] == "accepted"), "{block}");
    let _ = gateway.kill();
    let _ = gateway.wait();
}
